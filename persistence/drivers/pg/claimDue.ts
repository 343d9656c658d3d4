/**
 * `claimDueEffects` on Postgres: the batch claim in ONE statement. The parts both stores share
 * (`dueClaimParts`, persistence/sql/statements.ts: which due rows, one per job, within their
 * budgets) with, between them, the row locks: `FOR NO KEY UPDATE … SKIP LOCKED` on each effect
 * and its job, so runners claiming at once take disjoint rows and none waits on another (READ
 * COMMITTED re-checks a row changed since the statement's snapshot when it locks it: a row
 * another claim took and committed meanwhile no longer has the status and attempt read). Then,
 * in data-modifying CTEs of the same statement: each job's lease taken (LEASE_SET, the rule of
 * every write under a lease), each effect claimed (CLAIM_SET, as `claimEffect`: the new attempt
 * lives on its effect row), and the attempt before it archived (ARCHIVED: a dead runner's running
 * one as interrupted), read off the effect rows as they were before the claim: every part of the
 * statement sees its snapshot. Each claimed row comes back with its job's record as the lease's
 * UPDATE left it (its columns prefixed `job_`; NULL on a held row).
 */
import type { DueClaim, DueClaimed, DueClaimResult, EffectRecord } from '../../../src/ports/store.ts';
import { dueClaimCounts, dueClaimParams } from '../../sql/dueClaims.ts';
import type { SqlDialect } from '../../sql/predicates.ts';
import { JOB_RECORD_COLUMNS, toEffectRecord, toJobRecord, type Row } from '../../sql/records.ts';
import { ARCHIVED, CLAIM_SET, dueClaimParts, LEASE_SET } from '../../sql/statements.ts';
import { toPostgres, type PgStatement } from './sql.ts';

/**
 * The prefix of the claimed job's columns in the statement's rows (an effect has columns of the
 * same names). Not `job_`: the job's `id` would then be `job_id`, an effect's own column, which
 * node-postgres takes from the last column of that name (NULL on a held row).
 */
const JOB = 'j_';

/**
 * The statement's text in dialect `d` (named parameters: `dueClaimParams`, with LEASE_SET's for a
 * lease taken afresh), its limit written in as SQLite's pick has it (`dueClaimPickSql`): with a
 * bound LIMIT, Postgres found the generic plan dearer than a custom one and planned the statement
 * again at every call once the backlog was large (10-25 ms of planning at a 10k backlog under
 * load, against a 2.5 ms run).
 *
 * `locked` finds each candidate's effect and job by primary key, whatever the plan's estimates:
 * its other tests of a status or `active` are spelled `IS NOT DISTINCT FROM` (the same test here,
 * none of them NULL), which no index serves and no partial index's predicate follows from. A plan
 * made on a nearly empty database otherwise walked `effects_due`'s range of the candidate's status
 * for each candidate, the entries of effects claimed before (dead until a vacuum) included: 90
 * buffer hits a candidate at a 10k backlog, growing as the run went on.
 */
export function claimDueSql(d: SqlDialect, limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`claimDueSql: limit ${limit} is not a count`);
  const parts = dueClaimParts(d, String(limit));
  return `WITH ${parts.cand},
  locked AS (SELECT c.* FROM cand c JOIN effects e ON e.id = c.id JOIN jobs j ON j.id = c.job_id
    WHERE c.lease_free = 1 AND ${d.same('e.active', '1')} AND ${d.same('e.status', 'c.status')} AND e.attempt = c.attempt
      AND (j.lease_owner IS NULL OR j.lease_until <= ${d.leaseNow}) AND ${d.same('j.status', "'active'")} AND j.suspended_at IS NULL AND j.quarantine IS NULL
    FOR NO KEY UPDATE OF e, j SKIP LOCKED),
  ${parts.pick('locked')},
  leased AS (UPDATE jobs SET ${LEASE_SET(d)} FROM picked p WHERE jobs.id = p.job_id RETURNING ${JOB_RECORD_COLUMNS.map((c) => `jobs.${c} AS ${JOB}${c}`).join(', ')}),
  claimed AS (UPDATE effects SET ${CLAIM_SET(d)} FROM picked p WHERE effects.id = p.id RETURNING effects.*),
  archived AS (${ARCHIVED('effects.id IN (SELECT p.id FROM picked p)')}),
  n AS (SELECT ${parts.counts('locked')})
SELECT x.*, n.* FROM n LEFT JOIN (
    SELECT cl.*, 'claim' AS kind, l.*, p.t AS due_t, p.r AS due_r
      FROM claimed cl JOIN leased l ON l.${JOB}id = cl.job_id JOIN picked p ON p.id = cl.id
    UNION ALL
    SELECT e.*, 'held', ${JOB_RECORD_COLUMNS.map(() => 'NULL').join(', ')}, c.t, c.r FROM cand c JOIN effects e ON e.id = c.id WHERE c.lease_free = 0
  ) AS x ON TRUE
ORDER BY x.due_t, x.due_r`;
}

const made = new Map<string, PgStatement>();

/** The statement in Postgres's form for dialect `d` (its lease clock) and a claim of `limit`, made once (and prepared once per connection). */
export function claimDueStatement(d: SqlDialect, limit: number): PgStatement {
  const key = `${d.leaseNow}\n${limit}`;
  let stmt = made.get(key);
  if (!stmt) made.set(key, (stmt = toPostgres(claimDueSql(d, limit), `claimDue${limit}`)));
  return stmt;
}

/** The statement's arguments for claim `c`: a lease taken afresh (free or expired), so LEASE_SET's other parameters name no fence, no take-over, no force. */
export function claimDueArgs(c: DueClaim): unknown[] {
  return [{ ...dueClaimParams(c), held: null, any_fence: 0, take_over: null, force: 0 }];
}

/** The statement's rows as the claim's result. */
export function dueClaimResult(rows: readonly Row[]): DueClaimResult {
  const claimed: DueClaimed[] = [];
  const held: EffectRecord[] = [];
  for (const row of rows) {
    if (row['kind'] === 'claim') {
      const job: Row = {};
      for (const c of JOB_RECORD_COLUMNS) job[c] = row[JOB + c];
      claimed.push({ ...toEffectRecord(row), leaseFence: row[`${JOB}lease_fence`] as number, job: toJobRecord(job) });
    } else if (row['kind'] === 'held') held.push(toEffectRecord(row));
  }
  return { claimed, held, ...dueClaimCounts(rows[0], claimed.length) };
}
