/**
 * The Postgres store's write transactions, apart from the store: the rows a write locks first
 * (lockJobsSql, in one statement with BEGIN), a savepoint per write of a batch, each write's
 * outcome, and the run-again signal of a write that met a concurrent one.
 */
import type pg from 'pg';
import type { CommitResult, TransitionCommit } from '../../../src/ports/store.ts';
import type { Locks } from '../../sql/driver.ts';
import { CommitOutcomeUnknown } from '../../../src/ports/store.ts';
import { failure, LeaseHeld } from '../../sql/outcomes.ts';
import { runAsync, type Program } from '../../sql/program.ts';
import type { Row } from '../../sql/records.ts';
import type { StatementName } from '../../sql/statements.ts';
import { DeferredWrites, sendAhead, type Ahead, type Queries } from './deferred.ts';
import type { PgStatement } from './sql.ts';
import { isConnectionLost, isPgFault, sqlState } from './faults.ts';

/**
 * Per-job row locks: one statement, in id order (so two transactions never wait on each other in
 * a cycle), `FOR NO KEY UPDATE` (the inbox's and history's foreign-key checks, FOR KEY SHARE, do not wait on it).
 * The jobs are found through their own ids or through what points at them: each kind of
 * reference that is present is one indexed lookup in a UNION ALL (an OR of `IN` subqueries
 * would be planned as a scan of every job: 19 ms a transaction at 100k jobs).
 */
const LOCK_PARTS: readonly { key: Exclude<keyof Locks, 'jobs'>; sql: (list: string) => string }[] = [
  { key: 'effects', sql: (list) => `SELECT job_id FROM effects WHERE id = ANY(${list})` },
  { key: 'tokens', sql: (list) => `SELECT job_id FROM effects WHERE token = ANY(${list})` },
  { key: 'timers', sql: (list) => `SELECT job_id FROM timers WHERE id = ANY(${list})` },
  { key: 'seqs', sql: (list) => `SELECT job_id FROM inbox WHERE seq = ANY(${list})` },
];

/** A write met a concurrent one (a unique key taken meanwhile, a deadlock): the transaction runs again. */
export class RunAgain {
  constructor(readonly cause: unknown) {}
}

/** A write of a batch run without savepoints failed: the transaction runs again with one per write ({@link Tx.isolated}). */
export class Isolate extends RunAgain {}

export const MAX_RUNS = 8;

/** A write transaction: run a program (program.ts) on its connection, or queue a statement without parameters to go with the next round trip. */
export interface Tx {
  run<R>(program: Program<R>): Promise<R>;
  /**
   * Programs of writes that touch no job in common, each on a lane of its own (see
   * {@link runLanes}): their statements share round trips. Not in an isolated run.
   */
  lanes<R>(programs: readonly Program<R>[]): Promise<R[]>;
  sql(text: string): void;
  /** One statement given as it is prepared (a driver's own: the batch claim), after the queued ones: its rows. */
  query(stmt: PgStatement, args: readonly unknown[]): Promise<Row[]>;
  /** Which run of the transaction this is (1: the first; a {@link RunAgain} makes another). */
  runs: number;
  /**
   * Each write of a batch in a savepoint of its own. Not on a first run: there a write that fails
   * runs the whole transaction again with savepoints ({@link Isolate}), where it fails alone. A
   * batch whose writes all succeed (the usual case) then costs no SAVEPOINT round trips between
   * its writes and no subtransactions on the server.
   */
  isolated: boolean;
  /** A run was already repeated for a key another transaction took meanwhile (23505): a second one is the write's own collision. */
  keyRetried: boolean;
}

/**
 * One write of a batch in its own savepoint: a refused one rolls back alone. A key another
 * transaction took meanwhile (a concurrent create of the same job) runs the whole transaction
 * again once, where the write then finds what was created; a lost connection fails it all.
 * Before any write of the transaction has failed ({@link Tx.isolated} false), no savepoint: a
 * failure runs the transaction again with them.
 */
export async function savepoint<T>(t: Tx, fn: () => Promise<T>): Promise<T> {
  if (!t.isolated) {
    try {
      return await fn();
    } catch (error) {
      // A fault of the server or connection fails the whole call, as in an isolated run; only a
      // write's own refusal (an Abort, a constraint) runs the transaction again isolated.
      if (isPgFault(error)) throw error;
      throw new Isolate(error);
    }
  }
  t.sql('SAVEPOINT w');
  try {
    const result = await fn();
    t.sql('RELEASE SAVEPOINT w');
    return result;
  } catch (error) {
    if (isConnectionLost(error)) throw error;
    t.sql('ROLLBACK TO SAVEPOINT w');
    // Once: a key taken again on the second run is this write's own collision (refused alone).
    if (sqlState(error) === '23505' && !t.keyRetried) throw new RunAgain(error);
    throw error;
  }
}

/**
 * Programs on lanes of one connection: each runs as {@link Tx.run} would, with deferred writes of
 * its own (deferred.ts), all at once, so that the statements of every lane go out together
 * (node-postgres's pipeline mode: a statement is sent without waiting for the one before it to
 * answer) and a round trip serves them all. A batch of commits is then as many round trips as its
 * longest program, not the sum of them (docs/postgres.md, "Lanes"). The statements still run one
 * after another, in the order sent, each seeing what the ones before it wrote; the programs touch
 * disjoint jobs ({@link disjointJobs}), so no lane reads what another writes. The first statement
 * that fails (or program that refuses) stops every lane from sending more, and once all have
 * stopped it is thrown: nothing of a failed run goes out after the transaction's ROLLBACK. With
 * `ahead` (a run that sends ahead of answers), a lane's program may be answered as it expects and
 * its trailing writes go unanswered: the transaction reads every answer when it ends, and a failure
 * among them runs it again in turn.
 */
export async function runLanes<R>(client: Queries, statements: Record<StatementName, PgStatement>, programs: readonly Program<R>[], ahead: Ahead | null = null): Promise<R[]> {
  let failure: { error: unknown } | undefined;
  const lane: Queries = {
    query: (q) => {
      if (failure) return Promise.reject(failure.error);
      return client.query(q).catch((error: unknown) => {
        failure ??= { error };
        throw error;
      });
    },
  };
  const runs = await Promise.allSettled(
    programs.map(async (program) => {
      const writes = new DeferredWrites(lane, statements, ahead);
      try {
        const result = await runAsync(program, (call) => writes.call(call), true);
        if (ahead) {
          // Its trailing writes too go without waiting for their answer, read when the transaction
          // ends (deferred.ts, "Sent ahead"): any failure then runs it again in turn.
          sendAhead(ahead, writes.flush());
          ahead.expected += 1;
        } else await writes.flush();
        return result;
      } catch (error) {
        failure ??= { error };
        throw error;
      }
    }),
  );
  if (failure) throw failure.error;
  return runs.map((r) => (r as PromiseFulfilledResult<R>).value);
}

/** Whether no job is in two of these sets (each the jobs one write touches): their writes may run on lanes. */
export function disjointJobs(sets: readonly (readonly string[])[]): boolean {
  const seen = new Set<string>();
  for (const jobs of sets) {
    for (const job of new Set(jobs)) {
      if (seen.has(job)) return false;
      seen.add(job);
    }
  }
  return true;
}

/** The row-lock statement of {@link LOCK_PARTS} with its arrays written out as literals (escaped by the driver), to go in a simple query with BEGIN. */
export function lockJobsSql(client: pg.PoolClient, l: Locks): string {
  const texts = (values: readonly (string | number)[]) => `ARRAY[${values.map((v) => client.escapeLiteral(String(v))).join(', ')}]::text[]`;
  const numbers = (values: readonly (string | number)[]) => `ARRAY[${values.map((v) => String(Math.trunc(Number(v)))).join(', ')}]::bigint[]`;
  const parts = LOCK_PARTS.filter((p) => l[p.key]?.length).map((p) => p.sql((p.key === 'seqs' ? numbers : texts)(l[p.key]!)));
  const direct = texts(l.jobs ?? []);
  const which = parts.length === 0 ? `id = ANY(${direct})` : `id IN (${[...(l.jobs?.length ? [`SELECT unnest(${direct})`] : []), ...parts].join(' UNION ALL ')})`;
  return `SELECT id FROM jobs WHERE ${which} ORDER BY id FOR NO KEY UPDATE OF jobs`;
}

export function hasLocks(l: Locks): boolean {
  return Boolean(l.jobs?.length || l.effects?.length || l.tokens?.length || l.timers?.length || l.seqs?.length);
}

/** Each write of a batch in turn (they share the transaction's connection), as `Outcome`s. */
export async function each<I, T>(items: readonly I[], write: (item: I) => Promise<T>): Promise<({ ok: true; result: T } | { ok: false; error: unknown })[]> {
  const out: ({ ok: true; result: T } | { ok: false; error: unknown })[] = [];
  for (const item of items) {
    try {
      out.push({ ok: true, result: await write(item) });
    } catch (error) {
      if (isPgFault(error) || error instanceof RunAgain || error instanceof CommitOutcomeUnknown) throw error;
      out.push({ ok: false, error });
    }
  }
  return out;
}

/** Each commit in turn; a refused one reports why (`failure`), a fault fails them all. */
export async function eachCommit(commits: readonly TransitionCommit[], write: (c: TransitionCommit) => Promise<CommitResult>): Promise<CommitResult[]> {
  const out: CommitResult[] = [];
  for (const c of commits) {
    try {
      out.push(await write(c));
    } catch (error) {
      if (error instanceof RunAgain) throw error;
      out.push(failure(error, isPgFault));
    }
  }
  return out;
}

/** A claim while another live runner holds the job's lease claims nothing (its savepoint rolled back). */
export async function unlessLeaseHeld<T>(claim: Promise<T>): Promise<T | undefined> {
  try {
    return await claim;
  } catch (error) {
    if (error instanceof LeaseHeld) return undefined;
    throw error;
  }
}
