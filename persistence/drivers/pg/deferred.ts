/**
 * Writes whose result a program does not read (`write`, program.ts: a history row, an attempt's
 * end, effects and timers cancelled) do not each cost a round trip on Postgres. They wait, in
 * order, and go with the next statement whose result the program reads, as data-modifying CTEs of
 * it (`WITH spool_w1 AS (…), spool_w2 AS (…) <that statement>`), or together as one statement when the
 * program ends (in a transaction's run without savepoints: with a later program's statement, or in
 * COMMIT's simple query, driver.ts). Every statement of a transaction sees what the ones before it
 * wrote, but the parts of one statement all see the same snapshot, and a row must not be written
 * twice in one statement (Postgres keeps one of the two writes). So a write joins only parts that
 * neither write a table it names nor name the table it writes (one exception: `#joins`); otherwise
 * what waits goes first, on its own. What a statement writes and names: shapes.ts.
 *
 * Sent ahead: in a transaction's run without savepoints, a `getThen` whose answer its program
 * expects (program.ts, `Expected`: a step's attempt end and job update) goes in a form that fails
 * unless it did what was expected, and the program goes on at once with the answer it expected.
 * What it writes next then waits for COMMIT's simple query as above, and a step's whole
 * transaction is one round trip instead of two. The answers are read when the transaction ends:
 * a pair that did not do what was expected (SPX01: the job moved, the attempt was no longer
 * current, a progress report landed in between) aborts the transaction before anything sent after
 * it runs, and it is run again waiting for each answer.
 */
import type pg from 'pg';
import type { Call, Expected } from '../../sql/program.ts';
import type { StatementName } from '../../sql/statements.ts';
import { expectedPairOf, pairOf, shifted, THEN_COLUMN } from './pairs.ts';
import { shapeOf, type Shape } from './shapes.ts';
import { bind, planned, prepared, type PgStatement } from './sql.ts';

/**
 * Statements of a transaction sent ahead of their answers, each awaited only when the transaction
 * ends ({@link DeferredWrites}, "Sent ahead"): `sent` in the order they went; `expected`, how many
 * were sent on an expectation of their answer (a `getThen` answered as its program expected, a
 * lane's trailing writes: transactions.ts, runLanes). A run that sent any and then failed runs
 * again waiting for each answer (the driver's `#transaction`).
 */
export interface Ahead {
  sent: Promise<unknown>[];
  expected: number;
}

/** Record `p` as sent ahead: its failure is read when the transaction ends (and is not unhandled meanwhile). */
export function sendAhead(ahead: Ahead, p: Promise<unknown>): void {
  p.catch(() => undefined);
  ahead.sent.push(p);
}

/** The first failure among what was sent ahead, in the order sent (undefined: none failed). */
export async function firstFailure(ahead: Ahead): Promise<unknown> {
  for (const p of ahead.sent) {
    try {
      await p;
    } catch (error) {
      return error;
    }
  }
  return undefined;
}

/** A write waiting: its statement, values, and shape (what it writes, never null here). */
interface Part {
  stmt: PgStatement;
  values: unknown[];
  shape: Shape & { writes: string };
}


/** One combined text per sequence of statements, named once per process (a prepared statement's name has at most 63 bytes; it runs as `planned`). */
const combined = new Map<string, { name: string; text: string }>();

function combine(parts: readonly Part[], main: PgStatement | undefined): { name: string; text: string } {
  const key = [...parts.map((p) => p.stmt.key), main ? `>${main.key}` : ''].join(',');
  let c = combined.get(key);
  if (c) return c;
  let offset = 0;
  const ctes: string[] = [];
  const all = main ? parts : parts.slice(0, -1);
  for (const [i, p] of all.entries()) {
    ctes.push(`spool_w${i + 1} AS (${shifted(p.stmt.text, offset)})`);
    offset += p.values.length;
  }
  const last = main ?? parts.at(-1)!.stmt;
  const lastText = shifted(last.text, offset).trimStart();
  const text = /^WITH\s/i.test(lastText) ? `WITH ${ctes.join(', ')}, ${lastText.slice(5)}` : `WITH ${ctes.join(', ')} ${lastText}`;
  c = { name: `c_${combined.size + 1}`, text };
  combined.set(key, c);
  return c;
}

/** Where a program's statements go: the transaction's connection, or one lane of it (driver.ts, `lanes`). */
export interface Queries {
  query(q: pg.QueryConfig & { rowMode?: 'array' }): Promise<pg.QueryResult>;
}

/** A program's statements on one transaction's connection, with its result-less writes deferred (see the file's comment). */
export class DeferredWrites {
  readonly #client: Queries;
  readonly #statements: Record<StatementName, PgStatement>;
  readonly #ahead: Ahead | null;
  #waiting: Part[] = [];

  /** `ahead`: where statements sent ahead of their answers go (see {@link #expected}); null: every answer is waited for. */
  constructor(client: Queries, statements: Record<StatementName, PgStatement>, ahead: Ahead | null = null) {
    this.#client = client;
    this.#statements = statements;
    this.#ahead = ahead;
  }

  /** Run one call of a program: a `write` waits (its result is nobody's), any other goes now with what waits. */
  async call(call: Call): Promise<unknown> {
    if (call.method === 'getThen') return this.#pair(call);
    const stmt = this.#statements[call.name];
    const values = bind(stmt, call.args);
    const shape = shapeOf(stmt);
    if (call.method === 'write') {
      if (shape.writes === null) {
        await this.flush();
        await this.#client.query(prepared(stmt, values));
        return undefined;
      }
      if (!this.#joins(shape, values, true)) await this.flush();
      this.#waiting.push({ stmt, values, shape: shape as Part['shape'] });
      return undefined;
    }
    const r = await this.#send(stmt, values, this.#joins(shape, values));
    return call.method === 'run' ? { changes: r.rowCount ?? 0 } : call.method === 'get' ? r.rows[0] : r.rows;
  }

  /** A statement whose result is read, with what waits in front of it when `joins` (and it `leads`), else after it is flushed. */
  async #send(stmt: PgStatement, values: unknown[], joins: boolean, arrays = false): Promise<pg.QueryResult> {
    if (!(this.#waiting.length > 0 && shapeOf(stmt).leads && joins)) await this.flush();
    const q = this.#withWaiting(stmt, values);
    return arrays ? this.#client.query({ ...q, rowMode: 'array' }) : this.#client.query(q);
  }

  /** `stmt` with what waits in front of it, as one statement (everything waiting is taken). */
  #withWaiting(stmt: PgStatement, values: unknown[]): pg.QueryConfig {
    if (this.#waiting.length === 0) return prepared(stmt, values);
    const parts = this.#take();
    const c = combine(parts, stmt);
    return planned(c.name, c.text, [...parts.flatMap((p) => p.values), ...values]);
  }

  /** A `getThen` as one statement (pairs.ts) when its two may be one, else as two `get`s in turn. */
  async #pair(call: Call): Promise<[unknown, unknown]> {
    const [first, second] = [this.#statements[call.name], this.#statements[call.then!.name]];
    const [a, b] = [shapeOf(first), shapeOf(second)];
    const pair = a.writes !== null && b.writes !== null && !b.names.has(a.writes) ? pairOf(first, second) : null;
    if (!pair) {
      const row = await this.call({ name: call.name, method: 'get', args: call.args });
      return [row, row === undefined ? undefined : await this.call({ name: call.then!.name, method: 'get', args: call.then!.args })];
    }
    const [va, vb] = [bind(first, call.args), bind(second, call.then!.args)];
    const joins = this.#joins(a, va) && this.#joins(b, vb);
    if (call.expect && this.#ahead && (this.#waiting.length === 0 || (shapeOf(pair).leads && joins))) {
      const expected = this.#expected(call.expect, first, second, [...va, ...vb], this.#ahead);
      if (expected) return expected;
    }
    const r = await this.#send(pair, [...va, ...vb], joins, true);
    const row = r.rows[0] as unknown[] | undefined;
    if (!row) return [undefined, undefined];
    const split = r.fields.findIndex((f) => f.name === THEN_COLUMN);
    const rowOf = (from: number, to: number) => Object.fromEntries(r.fields.slice(from, to).map((f, i) => [f.name, row[from + i]]));
    return [rowOf(0, split), row[split] === null ? undefined : rowOf(split + 1, r.fields.length)];
  }

  /**
   * Sent ahead: a pair whose answer the program expects (program.ts, `Expected`) goes now, in the
   * form that fails unless it returns what was expected (pairs.ts, `expectedPairOf`), and the
   * program is answered at once with what it expects, so that what it writes next (and the
   * transaction's COMMIT) goes in the same round trip instead of the next one. The answer is not
   * waited for here: the transaction reads it when it ends (the driver's `#transaction`). When the
   * pair did not do what the program was told, it fails, and the aborted transaction runs nothing
   * sent after it; it is then run again with every answer waited for. Only when the pair goes now,
   * in order: nothing waits in front of it, or what waits goes with it. Undefined: no such form.
   */
  #expected(expect: Expected, first: PgStatement, second: PgStatement, values: unknown[], ahead: Ahead): [unknown, unknown] | undefined {
    const [a, b] = expect.rows;
    const firstColumns = Object.keys(a);
    const secondColumns = Object.keys(b).filter((c) => !expect.unchecked?.includes(c));
    const checked = expectedPairOf(first, second, firstColumns, secondColumns);
    if (!checked) return undefined;
    const all = [...values, ...firstColumns.map((c) => a[c]), ...secondColumns.map((c) => b[c])];
    // Handed to the connection now, synchronously (#send's await would let what the program sends next go first).
    sendAhead(ahead, this.#client.query(this.#withWaiting(checked, all)));
    ahead.expected += 1;
    return [a, b];
  }

  /** Send what waits (at the end of a program, before its savepoint is released). */
  async flush(): Promise<void> {
    if (this.#waiting.length === 0) return;
    const parts = this.#take();
    const [only] = parts;
    if (parts.length === 1) return void (await this.#client.query(prepared(only!.stmt, only!.values)));
    const c = combine(parts, undefined);
    await this.#client.query(planned(c.name, c.text, parts.flatMap((p) => p.values)));
  }

  /** Forget what waits (its program failed). */
  drop(): void {
    this.#take();
  }

  /** Whether writes wait. */
  get waiting(): boolean {
    return this.#waiting.length > 0;
  }

  /**
   * What waits as one statement's text with its values written in as literals ({@link quoted}),
   * taken from the queue: to go in one simple query with statements of the transaction's own (its
   * COMMIT). As literals the values are what node-postgres sends for them (text, their types
   * inferred where they stand). Undefined, nothing taken, when nothing waits or a value is not a
   * string, number, bigint, boolean or null.
   */
  inlined(): string | undefined {
    const parts = this.#waiting;
    const values = parts.flatMap((p) => p.values);
    if (parts.length === 0 || !values.every(literal)) return undefined;
    const text = parts.length === 1 ? parts[0]!.stmt.text : combine(parts, undefined).text;
    this.#take();
    return text.replace(/\$(\d+)/g, (_, n: string) => {
      const v = values[Number(n) - 1];
      return v === null ? 'NULL' : quoted(String(v));
    });
  }

  /**
   * Whether a statement of shape `s` (its `values`) may go in one statement with what waits, after
   * it: it names no table a waiting write writes, and (`write`: it too waits) no waiting write
   * names the table it writes. Except, on one table, a waiting INSERT of one row (reading nothing)
   * and an UPDATE of the row of another id ({@link Shape.atRow}): it would not have met that row in
   * turn either. Two INSERTs of one table stay apart: parts of one statement run in no set order,
   * so the rows' sequence values (a history row's `seq`, an effect's `rowid`) could swap.
   */
  #joins(s: Shape, values: readonly unknown[], write = false): boolean {
    return this.#waiting.every(
      (w) => apart(w, s, values) || (!s.names.has(w.shape.writes) && (!write || s.writes === null || !w.shape.names.has(s.writes))),
    );
  }

  #take(): Part[] {
    const parts = this.#waiting;
    this.#waiting = [];
    return parts;
  }
}

/** A value {@link DeferredWrites.inlined} writes as a literal. */
function literal(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean';
}

/** A waiting one-row INSERT that a statement of shape `s` would not meet: see {@link DeferredWrites}'s `#joins`. */
function apart(w: Part, s: Shape, values: readonly unknown[]): boolean {
  if (w.shape.insertsId === null || s.writes !== w.shape.writes) return false;
  return s.atRow !== null && values[s.atRow] !== w.values[w.shape.insertsId];
}

/**
 * A string as an SQL literal: `E'…'` with its quotes and backslashes doubled when it has any, so it
 * reads the same whatever `standard_conforming_strings` says (one regular expression, not
 * node-postgres's `escapeLiteral`, which builds the text a character at a time).
 */
export function quoted(text: string): string {
  return /[\\']/.test(text) ? `E'${text.replace(/[\\']/g, '$&$&')}'` : `'${text}'`;
}
