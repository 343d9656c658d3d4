/**
 * What a synchronous SQLite driver (better-sqlite3, sqlite-wasm) does the same way over its
 * prepared statements: a batch's writes without savepoints first, each in a savepoint of its own
 * when one failed after changing rows (RunIsolated); the batch claim of due activities; a page of
 * the history feed. The driver gives its statements (the {@link SyncStatement} shape) and its
 * transactions.
 */
import type { DueClaim, DueClaimed, DueClaimResult, EffectRecord, FeedPage, HistoryFeedFilter, Outcome } from '../../src/ports/store.ts';
import { claimDueRowIn } from './commit.ts';
import type { WriteTx } from './driver.ts';
import { anyStarved, dueClaimCounts, dueClaimParams, pickDue } from './dueClaims.ts';
import { feedPageOf } from './feed.ts';
import { failure, outcomeOf, RunIsolated, unlessLeaseHeld } from './outcomes.ts';
import { runSync, type Program, type SyncStatement } from './program.ts';
import { toEffectRecord, type Row } from './records.ts';
import { isSqliteFault } from './sqliteFaults.ts';
import type { StatementName } from './statements.ts';

/** A program run without a savepoint: one that fails after changing rows throws RunIsolated (a storage fault as it is). */
export function unisolated<T>(program: Program<T>, s: Record<StatementName, SyncStatement>): T {
  const changed = { rows: 0 };
  try {
    return runSync(program, s, changed);
  } catch (error) {
    if (changed.rows > 0 && !isSqliteFault(error)) throw new RunIsolated(error);
    throw error;
  }
}

/** A synchronous driver's batch-claim pick for a limit (`dueClaimPickSql`, prepared once per limit). */
export type PickFor = (limit: number) => SyncStatement;

/** A write transaction whose batch writes each run by `one`; `fatal`: an error that fails the whole call. */
export function batchTx(s: Record<StatementName, SyncStatement>, one: <T>(program: Program<T>) => T, fatal: (error: unknown) => boolean, pick: PickFor): WriteTx {
  const t: WriteTx = {
    run: (program) => runSync(program, s),
    each: (items, write, leaseHeld) => items.map((item) => outcomeOf(() => (leaseHeld ? unlessLeaseHeld(() => one(write(item))) : one(write(item))), fatal)),
    eachCommit: (commits, write) =>
      commits.map((c) => {
        try {
          return one(write(c));
        } catch (error) {
          return failure(error, fatal);
        }
      }),
    claimDue: (c) => claimDueIn(t, c, pick(c.limit), s),
  };
  return t;
}

/** The first run of a batch (no savepoints) and its run again (a savepoint per write): see {@link runBatch}. */
export function batchTxs(s: Record<StatementName, SyncStatement>, savepoint: <T>(fn: () => T) => T, pick: PickFor): { first: WriteTx; isolated: WriteTx } {
  return {
    first: batchTx(s, (program) => unisolated(program, s), (error) => error instanceof RunIsolated || isSqliteFault(error), pick),
    isolated: batchTx(s, (program) => savepoint(() => runSync(program, s)), isSqliteFault, pick),
  };
}

/**
 * A batch's writes run first without savepoints (a SAVEPOINT and a RELEASE per write saved). A
 * write its own checks refuse before it changed a row is refused alone as it is; one that fails
 * after changing rows rolls the whole transaction back (RunIsolated), which `once` runs again with
 * a savepoint per write, where that write rolls back alone.
 */
export function runBatch<T>(txs: { first: WriteTx; isolated: WriteTx }, once: (t: WriteTx) => T): T {
  try {
    return once(txs.first);
  } catch (error) {
    if (!(error instanceof RunIsolated)) throw error;
  }
  return once(txs.isolated);
}

/**
 * `claimDueEffects` inside a write transaction: `pick` the due rows (one writer: the pick reads
 * what nobody else changes before its claims, no rows to skip) and take them (`pickDue`), read
 * `starved` only when a src is out of slots, read the held ones' effects, and claim each picked row
 * from the job and attempt its pick read (a batch write; its job's record read back from the
 * lease's UPDATE, which writes the row anyway: `claimDueRowIn`).
 */
function claimDueIn(t: WriteTx, c: DueClaim, pick: SyncStatement, s: Record<StatementName, SyncStatement>): DueClaimResult {
  const { picked, held: heldRows, counts } = duePick(c, pick, s.dueStarved);
  const held: EffectRecord[] = [];
  for (const row of heldRows) {
    const effect = s.getEffect.get(row['id']) as Row | undefined;
    if (effect) held.push(toEffectRecord(effect));
  }
  const claim = (row: Row) => claimDueRowIn({ id: row['id'] as string, runner: c.runner, now: c.now, claimUntil: c.claimUntil, fence: null }, row);
  const outcomes = t.each(picked, claim, true) as Outcome<DueClaimed | undefined>[];
  const claimed: DueClaimed[] = [];
  for (const o of outcomes) {
    if (!o.ok) throw o.error;
    if (o.result) claimed.push(o.result);
  }
  return { claimed, held, ...dueClaimCounts(counts, claimed.length) };
}

/** A batch claim's pick on SQLite: its candidates read (`pick`, dueClaimPickSql) and taken (`pickDue`), `starved` read (`dueStarved`) only when a src is out of slots. */
export function duePick(c: DueClaim, pick: SyncStatement, starved: SyncStatement): ReturnType<typeof pickDue> {
  const budgets = c.budgets ?? {};
  const taken = pickDue(pick.all(dueClaimParams(c)) as Row[], c.limit, budgets);
  if (anyStarved(budgets)) taken.counts.starved = Number((starved.get({ budgets: JSON.stringify(budgets), now: c.now }) as Row)['starved']);
  return taken;
}

/** The statements of `historySince` on SQLite: the history's head and a page of it. */
export const SQLITE_FEED_SQL = {
  head: 'SELECT max(seq) AS seq FROM transitions',
  page: `SELECT t.*, j.machine_id FROM transitions t JOIN jobs j ON j.id = t.job_id
      WHERE t.seq > @after AND t.seq <= @upto
        AND (@all = 1 OR j.owner = @owner) AND (@machine IS NULL OR j.machine_id = @machine) AND (@job IS NULL OR t.job_id = @job)
        AND (@outcomes IS NULL OR t.outcome IN (SELECT value FROM json_each(@outcomes)))
      ORDER BY t.seq LIMIT @limit`,
} as const;

/** One page of the history feed after `after`, scanning at most `scan` seqs; run it in one read transaction (the head and the page agree). */
export function feedPage(s: { head: SyncStatement; page: SyncStatement }, after: number, limit: number, scan: number, filter: HistoryFeedFilter): FeedPage {
  const head = ((s.head.get() as { seq: number | null }).seq ?? 0);
  const upto = Math.min(head, after + scan);
  const rows = s.page.all({
    after,
    upto,
    all: filter.owner === undefined ? 1 : 0,
    owner: filter.owner ?? '',
    machine: filter.machineId ?? null,
    job: filter.jobId ?? null,
    outcomes: filter.outcomes === undefined ? null : JSON.stringify(filter.outcomes),
    limit,
  }) as Row[];
  return feedPageOf(rows, 'seq', after, upto, limit);
}
