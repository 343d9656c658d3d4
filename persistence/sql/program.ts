/**
 * A store operation written once for every SQL store: a generator that yields the statements it
 * runs (by name, see statements.ts) and receives their results. The SQLite store runs it
 * synchronously inside its transaction ({@link runSync}); the Postgres store awaits each statement
 * on its connection ({@link runAsync}). The rules of a commit (commit.ts) are thereby one text, not
 * one per driver.
 */
import type { StatementName } from './statements.ts';
import type { Row } from './records.ts';

/**
 * One statement to run: better-sqlite3's `run` (changes), `get` (the first row) or `all` (every
 * row); `write`: a write whose result the program does not read (Postgres may send it with the
 * next statement: persistence/drivers/pg/deferred.ts); `getThen`: `get`, and only when it returns
 * a row, `get` of the statement `then` too (both rows; see {@link getThen}); its `expect`, what the
 * program expects them to answer (see {@link Expected}).
 */
export interface Call {
  name: StatementName;
  method: 'run' | 'get' | 'all' | 'write' | 'getThen';
  args: unknown[];
  /** `getThen`'s second statement. */
  then?: { name: StatementName; args: unknown[] };
  /** `getThen`'s answer as the program expects it (see {@link Expected}). */
  expect?: Expected | undefined;
}

/**
 * What a program expects a `getThen` to answer: both rows, as it will read them. A driver that
 * answers each statement at once ignores it. One that waits a round trip per answer may hand the
 * program `rows` at once and send what it writes next (and the transaction's COMMIT) without
 * waiting, provided the pair itself fails, aborting the transaction, unless it returns rows with
 * exactly these values (Postgres: persistence/drivers/pg/deferred.ts, "Sent ahead"); the
 * transaction then runs again, waiting for each answer. `unchecked`: columns of the second row the
 * program writes rightly whatever they turn out to be (not compared).
 */
export interface Expected {
  rows: [Row, Row];
  unchecked?: readonly string[];
}

/** An operation over the store's statements, ending with its result. */
export type Program<R> = Generator<Call, R, unknown>;

/** Run a statement that writes: how many rows it changed. */
export function* run(name: StatementName, ...args: unknown[]): Generator<Call, { changes: number }, unknown> {
  return (yield { name, method: 'run', args }) as { changes: number };
}

/** Run a statement that writes, its result unread: it fails the write if it fails, later perhaps (deferred.ts). */
export function* write(name: StatementName, ...args: unknown[]): Generator<Call, void, unknown> {
  yield { name, method: 'write', args };
}

/** Run a statement: its first row, if any. */
export function* get(name: StatementName, ...args: unknown[]): Generator<Call, Row | undefined, unknown> {
  return (yield { name, method: 'get', args }) as Row | undefined;
}

/**
 * Run a statement, and only when it returns a row the statement `then` too: the first row of each
 * (the second undefined when it did not run). What the two do is what two `get`s in turn do; a
 * driver may send them as one statement (Postgres: one round trip, persistence/drivers/pg/pairs.ts).
 */
export function* getThen(
  name: StatementName,
  args: unknown[],
  then: StatementName,
  thenArgs: unknown[],
  expect?: Expected,
): Generator<Call, [Row | undefined, Row | undefined], unknown> {
  return (yield { name, method: 'getThen', args, then: { name: then, args: thenArgs }, expect }) as [Row | undefined, Row | undefined];
}

/** Run a statement: all its rows. */
export function* all(name: StatementName, ...args: unknown[]): Generator<Call, Row[], unknown> {
  return (yield { name, method: 'all', args }) as Row[];
}

/** A prepared statement a synchronous driver runs (better-sqlite3's shape). */
export interface SyncStatement {
  /** False for a statement that may change rows (better-sqlite3's `readonly`). */
  readonly readonly?: boolean;
  run(...args: unknown[]): unknown;
  get(...args: unknown[]): unknown;
  all(...args: unknown[]): unknown[];
}

/**
 * Run a program on a synchronous driver's prepared statements (inside the caller's transaction).
 * `changed`, when given, counts the rows its statements changed (a `get`/`all` of a statement that
 * writes changes a row per row it returns: such statements read back with RETURNING).
 */
export function runSync<R>(program: Program<R>, s: Record<StatementName, SyncStatement>, changed?: { rows: number }): R {
  let step = program.next();
  while (!step.done) {
    const c = step.value;
    let value: unknown;
    try {
      const stmt = s[c.name];
      if (c.method === 'getThen') {
        const first = stmt.get(...c.args);
        const then = first === undefined ? undefined : s[c.then!.name];
        value = [first, then?.get(...c.then!.args)];
        if (changed) changed.rows += rowsChanged(stmt, 'get', first) + (then ? rowsChanged(then, 'get', (value as unknown[])[1]) : 0);
      } else {
        value = c.method === 'run' || c.method === 'write' ? stmt.run(...c.args) : c.method === 'get' ? stmt.get(...c.args) : stmt.all(...c.args);
        if (changed) changed.rows += rowsChanged(stmt, c.method, value);
      }
    } catch (error) {
      step = program.throw(error);
      continue;
    }
    step = program.next(value);
  }
  return step.value;
}

/** A `getThen` as two `get`s, the second only after a row. */
async function inTurn(c: Call, exec: (call: Call) => Promise<unknown>): Promise<[unknown, unknown]> {
  const first = await exec({ name: c.name, method: 'get', args: c.args });
  return [first, first === undefined ? undefined : await exec({ name: c.then!.name, method: 'get', args: c.then!.args })];
}

function rowsChanged(stmt: SyncStatement, method: Call['method'], value: unknown): number {
  if (method === 'run' || method === 'write') return (value as { changes: number }).changes;
  if (stmt.readonly !== false) return 0;
  return method === 'get' ? (value === undefined ? 0 : 1) : (value as unknown[]).length;
}

/**
 * Run a program with a driver that executes each statement asynchronously (one at a time, in
 * order). A `getThen` reaches `exec` as two `get`s in turn, unless `pairs` says `exec` runs it itself.
 */
export async function runAsync<R>(program: Program<R>, exec: (call: Call) => Promise<unknown>, pairs = false): Promise<R> {
  let step = program.next();
  while (!step.done) {
    let value: unknown;
    try {
      value = pairs || step.value.method !== 'getThen' ? await exec(step.value) : await inTurn(step.value, exec);
    } catch (error) {
      step = program.throw(error);
      continue;
    }
    step = program.next(value);
  }
  return step.value;
}
