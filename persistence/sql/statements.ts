import type { JobFilter, LeaseClaim } from '../../src/ports/store.ts';
import { attemptsLeft, exhausted, inCallerTime, releasesLeft, SQLITE, stuck, type SqlDialect } from './predicates.ts';
import { statsSql } from './statsSql.ts';
import { JOB_RECORD_COLUMNS } from './records.ts';
import { schedulesSql } from './schedulesSql.ts';

/** The inbox columns an accepted event writes, and their parameters (see inboxParams). */
const INBOX_COLUMNS = 'job_id, event_id, type, payload, payload_hash, status, error, revision, accepted_at, processed_at, source_kind, source_id, attempt';
const INBOX_VALUES = INBOX_COLUMNS.split(', ').map((c) => `@${c}`).join(', ');

/** `<jobIdColumn>`'s job is not suspended. */
const NOT_SUSPENDED = (jobIdColumn: string) => `NOT EXISTS (SELECT 1 FROM jobs sj WHERE sj.id = ${jobIdColumn} AND sj.suspended_at IS NOT NULL)`;

/**
 * `<jobIdColumn>`'s job is neither suspended nor quarantined: its activities may run. A
 * quarantined job's runtime cannot apply their outcomes, and one without the job's machine cannot
 * run them at all; they wait, unclaimed, for its release.
 */
const NOT_HELD = (jobIdColumn: string) => `NOT EXISTS (SELECT 1 FROM jobs sj WHERE sj.id = ${jobIdColumn} AND ${HELD('sj')})`;

/** The job row `j` (an alias) is suspended or quarantined (NOT_HELD). */
const HELD = (j: string) => `(${j}.suspended_at IS NOT NULL OR ${j}.quarantine IS NOT NULL)`;

/**
 * A write under a lease (`@runner` null: no lease given, nothing checked or changed). Allowed when
 * the lease is free, expired (by the dialect's lease clock), held by a dead runner named in
 * `@take_over`, held by `@runner` with the fence `@held`, or forced. The fence grows unless
 * `@runner` renews its own live lease.
 */
const LEASE_OK = (d: SqlDialect) => `(@runner IS NULL OR @force = 1 OR lease_owner IS NULL OR lease_until <= ${d.leaseNow} OR lease_owner = @take_over
  OR (lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1)))`;
export const LEASE_SET = (d: SqlDialect) => `lease_fence = CASE WHEN @runner IS NULL OR (@force = 0 AND lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1) AND lease_until > ${d.leaseNow})
    THEN lease_fence ELSE lease_fence + 1 END,
  lease_owner = CASE WHEN @runner IS NULL THEN lease_owner WHEN @until IS NULL THEN NULL ELSE @runner END,
  lease_until = CASE WHEN @runner IS NULL THEN lease_until ELSE ${d.leaseUntil} END`;

/**
 * An event accepted and applied in one commit (`@inline_event`, its id), or an activity's outcome
 * applied with its attempt's end (`@first_in_line` 1), goes in only when no event waits before it
 * (events apply in accept order): otherwise the UPDATE matches nothing, and the refusal reads as a
 * conflict (those events first). An inline id's uniqueness is a key, written after this UPDATE
 * (`recordKey`), except for a made-up id applied at the revision it names (`@at_named` = 1): the
 * history's primary key holds that one, and this probe makes sure the id was not recorded under a
 * key before (a caller that sent such an id itself, earlier).
 */
const INLINE_OK = `((@inline_event IS NULL AND @first_in_line = 0) OR (NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @id AND status = 'pending')
  AND (@at_named = 0 OR NOT EXISTS (SELECT 1 FROM event_keys WHERE job_id = @id AND event_id = @inline_event))))`;

/** The columns every commit's job UPDATE writes (the new state and what it is built from). */
const STATE_SET = `revision = revision + 1, state_value = @state_value, state_paths = @state_paths, context = @context,
  snapshot = @snapshot, updated_at = @at, progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END`;

/** A commit made from a record not read again (`@unread` 1, `@unread_born` its birth time): the job is that one, and not quarantined. */
const UNREAD_OK = `(@unread = 0 OR (created_at = @unread_born AND quarantine IS NULL))`;

/** The job at the expected revision, status and version, not suspended while the commit settles an event. */
const SAME_STATUS = `id = @id AND revision = @expected AND status = @status AND machine_version = @machine_version
  AND (suspended_at IS NULL OR @settles = 0) AND ${UNREAD_OK}`;

/** A history row of an event applied as it was accepted, read as an event (as the `events` view maps it). */
const INLINE_EVENT = `SELECT NULL AS seq, job_id, event_id, event_type AS type, payload, payload_hash, outcome AS status,
  coalesce(source_kind, 'external') AS source_kind, source_id, attempt, error, revision, at AS accepted_at, at AS processed_at FROM transitions`;

/** The `@runner, @held, @any_fence, @now, @until, @take_over, @force` parameters of LEASE_OK / LEASE_SET for a lease claim (none: no lease checked). */
export function leaseParams(lease: (Omit<LeaseClaim, 'fence'> & { fence: number | null | undefined }) | undefined, now: number) {
  return {
    runner: lease?.runner ?? null,
    held: lease?.fence ?? null,
    // A claim that names no fence (tools and tests) renews the runner's own lease whatever its fence.
    any_fence: lease && lease.fence === undefined ? 1 : 0,
    now: lease?.now ?? now,
    until: lease?.until ?? null,
    take_over: lease?.takeOver ?? null,
    force: lease?.force ? 1 : 0,
  };
}


/** An effect a round may start: its job is not held (suspended, quarantined), and no other live runner holds the job's lease. */
const DUE_FILTER = (d: SqlDialect) => `${NOT_HELD('effects.job_id')}
  AND (@runner IS NULL OR NOT EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id AND ${LEASED_ELSEWHERE(d, 'lj')}))`;

/** Another live runner than `@runner` holds the lease of job row `j` (an alias). */
const LEASED_ELSEWHERE = (d: SqlDialect, j: string) => `${j}.lease_owner IS NOT NULL AND ${j}.lease_owner <> @runner AND ${j}.lease_until > ${d.leaseNow}`;

/**
 * The srcs that have pending effects, as a subquery's column `src`: read through effects_pending
 * (keyed by src first) by seeking from each src to the next, one seek per src whatever the rows
 * behind it.
 */
const PENDING_SRCS = (d: SqlDialect) => {
  const next = (after: string) => `(SELECT src FROM effects${d.indexedBy('effects_pending')} WHERE active = 1 AND status = 'pending'${after}
      ORDER BY src LIMIT 1)`;
  return `WITH RECURSIVE k (src) AS (SELECT ${next('')} UNION ALL SELECT ${next(' AND src > k.src')} FROM k WHERE k.src IS NOT NULL)
    SELECT src FROM k WHERE src IS NOT NULL`;
};

/**
 * The due effects (`dueEffects`), as three index-ordered reads (pending by age, backoff by due
 * time, running by claim expiry), each stopping at `limit` rows (default @limit), with a further
 * condition `also` on `effects` when given (`filter`: one in DUE_FILTER's place, which implies it).
 * Pending rows are read per src (effects_pending is keyed by src, then age): the oldest `limit` of each of `srcs` (a subquery's column `src`; default:
 * every src with pending rows, PENDING_SRCS), merged oldest first, so rows of a src the read may
 * not take (not in `srcs`) are never read. Given `srcs`, the backoff and expired reads keep to them
 * too. `head`: a condition on the rows each read stopped at instead (the subquery is named
 * `effects`), so that a filter most due rows fail reads at most `limit` rows of each kind (and
 * pending src), whatever the backlog behind them. Columns: the effect's, and `r` (its rowid).
 */
const DUE_READS = (d: SqlDialect, o: { filter?: string; also?: string; limit?: string; head?: string; srcs?: string } = {}) => {
  const { limit = '@limit', head } = o;
  const where = `${o.filter ?? DUE_FILTER(d)}${o.also ? ` AND ${o.also}` : ''}`;
  const stop = (name: string, rows: string) => `SELECT * FROM (${rows}) AS ${head ? `effects WHERE ${head}` : name}`;
  const read = (name: string, rows: string, order: string) =>
    stop(name, `SELECT *, rowid AS r FROM effects WHERE ${rows} AND ${where}${o.srcs ? ` AND effects.src IN (${o.srcs})` : ''}
          ORDER BY ${order}, rowid LIMIT ${limit}`);
  const pendingOfSrc = (columns: string) => `SELECT ${columns} FROM effects${d.indexedBy('effects_pending')}
          WHERE effects.src = s.src AND active = 1 AND status = 'pending' AND ${where} ORDER BY created_at, rowid LIMIT ${limit}`;
  const pending = `SELECT * FROM (${d.perRow(`(${o.srcs ?? PENDING_SRCS(d)}) AS s`, 'effects', pendingOfSrc)}) AS p ORDER BY created_at, r LIMIT ${limit}`;
  return `${stop('pending', pending)}
        UNION ALL
        ${read('backoff', `active = 1 AND status = 'backoff' AND next_run_at <= @now`, 'next_run_at')}
        UNION ALL
        ${read('expired', `active = 1 AND status = 'running' AND claim_expires_at <= ${d.leaseNow}`, 'claim_expires_at')}`;
};

/** An attempt claimed: running, the next attempt, claimed by `@runner` until `@until` (by the lease clock), started now (the attempt lives on the effect row until it ends). One text for `claimEffect` and the batch claim. */
export const CLAIM_SET = (d: SqlDialect) => `status = 'running', attempt = effects.attempt + 1, claimed_by = @runner,
        claim_expires_at = ${d.leaseUntil}, next_run_at = NULL, updated_at = @now, ${ATTEMPT_START}`;

/** The effect row may be attempted: an attempt left; not a running attempt unsafe to repeat (the executor recovers its expired claim first). */
const ATTEMPTABLE = `${attemptsLeft('effects')} AND NOT (effects.status = 'running' AND effects.unsafe = 1)`;

/**
 * The job row `j` (an alias) is active, of a machine version in `@machines` (`id@version` texts).
 * EXISTS, not IN: SQLite builds an IN list into a table (a page zeroed, a Bloom filter) at every
 * run of the statement, 14% of a claim pick at a limit of 1; the few versions are read per row.
 */
const RUNNABLE_JOB = (d: SqlDialect, j: string) =>
  `${j}.status = 'active' AND EXISTS (SELECT 1 FROM (${d.jsonValues('@machines')}) AS mv WHERE mv.value = ${j}.machine_id || '@' || ${j}.machine_version)`;

/** Of the due rows, the ones a batch claim may take: ATTEMPTABLE, of a RUNNABLE_JOB. Which srcs: CLAIM_SRCS. */
const CLAIMABLE = (d: SqlDialect) => `${ATTEMPTABLE} AND EXISTS (SELECT 1 FROM jobs mj WHERE mj.id = effects.job_id AND ${RUNNABLE_JOB(d, 'mj')})`;

/**
 * DUE_FILTER and CLAIMABLE for a batch claim (`@runner` given), in one look at the job instead of
 * three: ATTEMPTABLE, of a RUNNABLE_JOB neither HELD nor LEASED_ELSEWHERE.
 */
const CLAIM_FILTER = (d: SqlDialect) => `${ATTEMPTABLE} AND EXISTS (SELECT 1 FROM jobs cj WHERE cj.id = effects.job_id AND ${RUNNABLE_JOB(d, 'cj')}
    AND NOT ${HELD('cj')} AND NOT coalesce(${LEASED_ELSEWHERE(d, 'cj')}, FALSE))`;

/** The srcs a batch claim reads (`@srcs`: `dueClaimParams` leaves out those out of slots): a subquery's column `src`. */
const CLAIM_SRCS = (d: SqlDialect) => `SELECT value AS src FROM (${d.jsonValues('@srcs')}) AS v`;

/**
 * Whether a src out of slots in `@budgets` has a row due (a batch claim's `starved`: `limited`): it
 * looks from each src out of slots (none, usually) for one due row of it, a pending one through
 * effects_pending (src first), a backoff one among the due backoffs (`OFFSET 0` keeps Postgres from
 * turning the lookup into a join over every due row, which it did: a scan of the whole backlog at
 * every claim).
 */
const STARVED = (d: SqlDialect) => `EXISTS (SELECT 1 FROM ${d.jsonEntries('@budgets')} AS b WHERE b.n <= 0
        AND (EXISTS (SELECT 1 FROM effects${d.indexedBy('effects_pending')} WHERE effects.src = b.key AND active = 1 AND status = 'pending' LIMIT 1 OFFSET 0)
          OR EXISTS (SELECT 1 FROM effects WHERE effects.src = b.key AND active = 1 AND status = 'backoff' AND next_run_at <= @now LIMIT 1 OFFSET 0)))`;

/**
 * The parts of a batch claim (`claimDueEffects`): `cand` for both stores, `pick` and `counts` for
 * Postgres's one statement (SQLite applies the same rule to `cand`'s rows in JS: `pickDue`,
 * dueClaims.ts; the claim contract tests hold both to it):
 * - `cand`: the oldest @limit + 1 claimable due rows of the srcs it may take (CLAIM_SRCS; pending
 *   rows are read per src, so a src out of slots costs nothing however many of its rows wait; one
 *   more than it claims: whether more are due is then known, not guessed from a full window), with
 *   their order (`t`, `r`), and whether the job's lease is free or
 *   expired (`lease_free` 1) or @runner's, live (0: left to `claimEffect`, with the fence the
 *   runner knows);
 * - `pick(source)`: from the rows of CTE `source` (the free rows of `cand` Postgres locked,
 *   skipping rows a concurrent claim holds), `firsts` the oldest row of each job (a
 *   second claim of a job needs the fence the first returns), `within` those inside their src's
 *   budget, and `picked` the oldest @limit of them;
 * - `counts(source)`: how many rows each step kept, and whether a src out of slots has rows due
 *   (`starved`, STARVED): `DueClaimResult.more` and `limited`.
 *
 * `limit`: the claim's limit as SQL text, `@limit` (Postgres) or a number written in (SQLite,
 * `dueClaimPickSql`): SQLite re-prepares a statement whose plan depends on a bound LIMIT at every
 * run, and this one's compile cost 0.6-1.8 ms of CPU per claim, whatever the backlog.
 */
export function dueClaimParts(d: SqlDialect, limit = '@limit') {
  return {
    cand: `cand AS (SELECT c.id, c.job_id, c.src, c.status, c.attempt, coalesce(c.next_run_at, c.created_at) AS t, c.r,
        CASE WHEN j.lease_owner IS NULL OR j.lease_until <= ${d.leaseNow} THEN 1 ELSE 0 END AS lease_free
      FROM (${DUE_READS(d, { filter: CLAIM_FILTER(d), limit: `${limit} + 1`, srcs: CLAIM_SRCS(d) })}) AS c JOIN jobs j ON j.id = c.job_id ORDER BY t, c.r LIMIT ${limit} + 1)`,
    pick: (source: string) => `firsts AS (SELECT * FROM (SELECT s.*, row_number() OVER (PARTITION BY s.job_id ORDER BY s.t, s.r) AS nth_of_job
        FROM ${source} AS s) AS f WHERE f.nth_of_job = 1),
      ranked AS (SELECT f.*, row_number() OVER (PARTITION BY f.src ORDER BY f.t, f.r) AS nth_of_src FROM firsts AS f),
      within AS (SELECT * FROM ranked WHERE nth_of_src <= coalesce((SELECT b.n FROM ${d.jsonEntries('@budgets')} AS b WHERE b.key = ranked.src), ${limit} + 1)),
      picked AS (SELECT * FROM within ORDER BY t, r LIMIT ${limit})`,
    counts: (source: string) => `(SELECT count(*) FROM ${source}) AS lockable, (SELECT count(*) FROM firsts) AS firsts, (SELECT count(*) FROM within) AS within,
      CASE WHEN ${STARVED(d)} THEN 1 ELSE 0 END AS starved`,
  };
}

/**
 * `claimDueEffects` on SQLite: the pick's candidates, `cand`'s rows oldest first (`lease_free` 0: held),
 * and no more. What it takes of them (`pick`'s rule, one row per job within its src's budget) and
 * its counts are then made from these few rows (`pickDue`, dueClaims.ts), and `starved` read only
 * when a budget is 0 (`dueStarved`): `pick`'s window functions and `counts`' subqueries over
 * SQLite's CTEs were about half the statement's instructions (at a limit of 1 and of 16), a few µs in JS. Each picked row is
 * then claimed one by one (`claimPicked`), from the job and attempt read here.
 */
export function dueClaimPickSql(d: SqlDialect, limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`dueClaimPickSql: limit ${limit} is not a count`);
  return `WITH ${dueClaimParts(d, String(limit)).cand} SELECT lease_free, id, job_id, src, attempt FROM cand ORDER BY t, r`;
}

/**
 * A job's full UPDATE (`updateJob`). Only a migration (`migrates`) names machine_version in its
 * SET: SQLite rewrites the entries of every index on a column a SET names, changed or not (an
 * ending job rewrote jobs_machine), and Postgres makes no HOT update past an index on a changed
 * column. Any other commit is of the version it was made from, and checks it as SAME_STATUS does.
 */
const UPDATE_JOB = (d: SqlDialect, migrates: boolean) => `UPDATE jobs SET revision = revision + 1, status = @status, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot,${migrates ? ' machine_version = @machine_version,' : ''} updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END,
        ${LEASE_SET(d)}
      WHERE id = @id AND revision = @expected${migrates ? '' : ' AND machine_version = @machine_version'} AND (suspended_at IS NULL OR @settles = 0)
        AND ${UNREAD_OK} AND ${LEASE_OK(d)} AND ${INLINE_OK}
      RETURNING lease_fence, progress, CASE WHEN EXISTS (SELECT 1 FROM timers WHERE job_id = @id AND status = 'scheduled') THEN 1 ELSE 0 END AS timers_scheduled`;

/** A new job's row, leased (fence 1, until `@until` from `@now` by the lease clock) to the runner that creates it when it claims its first activities (`lease_owner` set), else free. */
const INSERT_JOB = (d: SqlDialect) => `INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context,
        snapshot, input, input_hash, idempotency_key, owner, quarantine, progress, parent_job_id, parent_effect_id, created_at, updated_at,
        lease_owner, lease_fence, lease_until)
      VALUES (@id, @machine_id, @machine_version, 1, @status, @state_value, @state_paths, @context,
        @snapshot, @input, @input_hash, @idempotency_key, @owner, NULL, @progress, @parent_job_id, @parent_effect_id, @at, @at,
        @lease_owner, @lease_fence, CASE WHEN @lease_owner IS NULL THEN NULL ELSE ${d.leaseUntil} END)`;

/**
 * The WHERE of a claim of effect `@id` at `@now` (`@takeOver`: the runner whose running attempt it
 * may take over before its claim expires), only while its job's lease may be taken (LEASE_OK, with
 * leaseParams' parameters, so a lease held elsewhere writes nothing): one text for `claimEffect` and
 * the attempt it archives.
 */
const CLAIM_WHERE = (d: SqlDialect) => `id = @id AND active = 1 AND (status = 'pending' OR (status = 'backoff' AND next_run_at <= @now)
        OR (status = 'running' AND (claim_expires_at <= ${d.leaseNow} OR claimed_by = @takeOver)))
        AND ${attemptsLeft('effects')}
        AND ${NOT_HELD('effects.job_id')}
        AND EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id AND ${LEASE_OK(d)})`;

/**
 * An effect's latest attempt (schema 15) lives on its row: `attempt` (its number), and who ran it,
 * since when, when it ended, how (`attempt_outcome`, NULL while it runs) and its error. The columns
 * an attempt's end sets, from `@outcome`, `@at` and `@error`.
 */
const ATTEMPT_END = `attempt_outcome = @outcome, attempt_ended_at = @at, attempt_error = @error`;

/** A claim's new attempt on its effect row: run by `@runner`, since `@now`, not ended. */
const ATTEMPT_START = `attempt_runner = @runner, attempt_started_at = @now, attempt_ended_at = NULL, attempt_outcome = NULL, attempt_error = NULL`;

/**
 * The outcomes an attempt's record may still change from: running, waiting (its token completes
 * it), interrupted (its late outcome is stale). NULL on an effect row: running.
 */
const ENDS_LATER = `('running', 'waiting', 'interrupted')`;

/**
 * The latest attempts of the effect rows `where` picks, before a claim starts the next one: their
 * effect_attempts rows, written once (a running one taken over: interrupted now).
 */
export const ARCHIVED = (where: string) => `INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, ended_at, outcome, error)
      SELECT id, attempt, attempt_runner, attempt_started_at, coalesce(attempt_ended_at, @now), coalesce(attempt_outcome, 'interrupted'), attempt_error
      FROM effects WHERE ${where} AND attempt_started_at IS NOT NULL
      ON CONFLICT (effect_id, attempt) DO NOTHING`;

/** A statement's text (the groups below name them; `prepare` prepares them for SQLite). */
const q = (text: string): string => text;

/** Job rows: read, created, updated, quarantined. */
function jobsSql(d: SqlDialect) {
  return {
    getJob: q('SELECT * FROM jobs WHERE id = ?'),
    firstActiveVersion: q(`SELECT machine_id, machine_version FROM jobs${d.indexedBy('jobs_active_versions')}
      WHERE status = 'active' AND owner = ? ORDER BY machine_id, machine_version LIMIT 1`),
    // Two seeks, not a row-value comparison: SQLite seeks `(a, b) > (?, ?)` on `a` only and would
    // walk every entry of the current machine.
    nextActiveVersion: q(`SELECT machine_id, machine_version FROM jobs${d.indexedBy('jobs_active_versions')}
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version > @v ORDER BY machine_version LIMIT 1`),
    nextActiveMachine: q(`SELECT machine_id, machine_version FROM jobs${d.indexedBy('jobs_active_versions')}
      WHERE status = 'active' AND owner = @owner AND machine_id > @m ORDER BY machine_id, machine_version LIMIT 1`),
    countActiveVersion: q(`SELECT count(*) AS n FROM (SELECT 1 FROM jobs${d.indexedBy('jobs_active_versions')}
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version = @v LIMIT @limit) AS counted`),
    byKey: q('SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?'),
    /** A new job (INSERT_JOB). */
    insertJob: q(`${INSERT_JOB(d)}
      RETURNING lease_until`),
    /** insertJob unless a job has this id or idempotency key already: then nothing is written and no row returned. */
    insertNewJob: q(`${INSERT_JOB(d)}
      ON CONFLICT DO NOTHING RETURNING lease_until`),
    /** Status and version unchanged (the usual case): their index entries are not rewritten. */
    updateState: q(`UPDATE jobs SET ${STATE_SET}, ${LEASE_SET(d)}
      WHERE ${SAME_STATUS} AND ${LEASE_OK(d)} AND ${INLINE_OK}
      RETURNING lease_fence, progress`),
    /**
     * updateState under a live lease this runner holds at this fence (the usual commit). By the
     * caller's lease clock, with this very expiry (expiries are rounded, leases.ts): the lease
     * columns are left out of the SET, so the lease index is not rewritten (SQLite rewrites the
     * entries of every index on a SET column). By the database's, an expiry written is never the
     * caller's, so the expiry is renewed here (the fence kept), still one statement.
     */
    updateKeepingLease: q(`UPDATE jobs SET ${STATE_SET}${d.callerLeaseClock ? '' : `, lease_until = ${d.leaseUntil}`}
      WHERE ${SAME_STATUS} AND @force = 0
        AND lease_owner = @runner AND lease_fence = @held${d.callerLeaseClock ? ' AND lease_until = @until' : ''} AND lease_until > ${d.leaseNow} AND ${INLINE_OK}
      RETURNING lease_fence, progress`),
    /** Any change but the version's (a job that ends goes straight here); `timers_scheduled` 1: the job has timers still to fire (an ending commit cancels them). */
    updateJob: q(UPDATE_JOB(d, false)),
    /** updateJob of a migration commit: the one commit that moves the job to another machine version. */
    migrateJob: q(UPDATE_JOB(d, true)),
    /** A refused commit's job: its revision, and its lease while live by the lease clock (`lease_live` 1). */
    revisionOf: q(`SELECT revision, lease_owner, lease_fence, lease_until, CASE WHEN lease_until > ${d.leaseNow} THEN 1 ELSE 0 END AS lease_live
      FROM jobs WHERE id = @id`),
    /** A job's revision and the columns written without a commit (getJob with a known record). */
    uncommittedOf: q(`SELECT revision, quarantine, progress, cancel_requested_at, cancel_reason, suspended_at, suspend_reason,
        lease_owner, lease_fence, lease_until, updated_at, created_at FROM jobs WHERE id = ?`),
    quarantine: q('UPDATE jobs SET quarantine = ?, updated_at = ? WHERE id = ?'),
    /** A damaged row's quarantine, recorded once and never over another reason (no clock here: updated_at is kept). */
    jobsWithState: q('SELECT id FROM jobs WHERE state_value = ? AND quarantine IS NULL'),
    quarantineDamaged: q('UPDATE jobs SET quarantine = ? WHERE id = ? AND quarantine IS NULL'),
  };
}

/** History rows, event keys and the inbox. */
function historySql(d: SqlDialect) {
  return {
    insertTransition: q(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${d.historySeq})`),
    /** The history row of an event applied as it is accepted (or an outcome with its attempt's end): its only record (no inbox row). */
    insertInlineTransition: q(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        payload_hash, source_kind, source_id, attempt, seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${d.historySeq})`),
    /** An outcome recorded by its history row (schema 13), by its event id: a walk of the job's history, for the rare reads by id. */
    outcomeInHistory: q(`${INLINE_EVENT} WHERE job_id = ? AND event_id = ? AND payload_hash IS NOT NULL AND source_kind IS NOT NULL`),
    /** A (job, event id) recorded once: a second record of it does nothing (changes 0), read as a duplicate. */
    insertKey: q('INSERT INTO event_keys (job_id, event_id, revision) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
    keyedEvent: q(`${INLINE_EVENT} WHERE job_id = @job AND revision = (SELECT revision FROM event_keys WHERE job_id = @job AND event_id = @event)`),
    locatedEvent: q(`${INLINE_EVENT} WHERE job_id = ? AND revision = ? AND event_id = ? AND payload_hash IS NOT NULL`),
    insertEvent: q(`INSERT INTO inbox (${INBOX_COLUMNS}) VALUES (${INBOX_VALUES}) ON CONFLICT (job_id, event_id) DO NOTHING`),
    /** The runtime's own event accepted and applied in one commit: inserted only while nothing waits before it in the job's inbox. */
    insertAppliedEvent: q(`INSERT INTO inbox (${INBOX_COLUMNS}) SELECT ${INBOX_VALUES}
      WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @job_id AND status = 'pending')
      ON CONFLICT (job_id, event_id) DO NOTHING`),
    settleEvent: q(`UPDATE inbox SET status = @status, error = @error, revision = @revision, processed_at = @at, payload = @payload
      WHERE seq = @seq AND job_id = @job_id AND status = 'pending'`),
    rejectEvent: q(`UPDATE inbox SET status = 'rejected', error = ?, processed_at = ?, payload = coalesce(?, payload) WHERE seq = ? AND status = 'pending'`),
    getEvent: q('SELECT * FROM inbox WHERE job_id = ? AND event_id = ?'),
    // Accept order: a job's events apply in accept order, so the revision orders every applied
    // one; pending and rejected events (no revision) follow in seq order.
    listEvents: q('SELECT * FROM events WHERE job_id = ? ORDER BY revision IS NULL, revision, seq'),
    firstPending: q("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT 1"),
    pending: q("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT ?"),
    pendingJobs: q(`SELECT i.job_id, min(i.seq) AS first FROM inbox i JOIN jobs j ON j.id = i.job_id
      WHERE i.status = 'pending' AND j.quarantine IS NULL AND j.suspended_at IS NULL
        AND (@runner IS NULL OR j.lease_owner IS NULL OR j.lease_owner = @runner OR j.lease_until <= ${d.leaseNow})
      GROUP BY i.job_id ORDER BY first LIMIT @limit`),
    /** `commitLanded`: the history row of that revision, recorded for that event (null-safe). */
    landed: q(`SELECT 1 FROM transitions WHERE job_id = @job AND revision = @revision AND ${d.same('event_id', '@event')}`),
    history: q('SELECT * FROM transitions WHERE job_id = ? ORDER BY revision'),
  };
}

/** Effects and their attempts: start, claim, renew, finish, fail, complete by token. */
function effectsSql(d: SqlDialect) {
  return {
    insertEffect: q(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`),
    settleChild: q(`UPDATE effects SET status = 'succeeded', output = ?, updated_at = ? WHERE id = ? AND kind = 'child' AND status = 'waiting' AND active = 1`),
    failChild: q(`UPDATE effects SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND kind = 'child' AND status = 'waiting' AND active = 1`),
    deactivateAll: q(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND active = 1`),
    cancelAllTimers: q(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status IN ('scheduled', 'fired')`),
    cancelScheduledTimers: q(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status = 'scheduled'`),
    deactivateEffects: q(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND actor_id = ? AND active = 1`),
    getEffect: q('SELECT * FROM effects WHERE id = ?'),
    /** What a claim or an outcome needs to know of an effect before it writes. */
    effectClaimState: q('SELECT job_id, status, attempt FROM effects WHERE id = ?'),
    /** An effect's job, and whether `runner` holds its lease under `fence` (1) or not (0). */
    effectLeaseState: q(`SELECT e.job_id, CASE WHEN EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.lease_owner = @runner AND j.lease_fence = @fence) THEN 1 ELSE 0 END AS held
      FROM effects e WHERE e.id = @id`),
    listEffects: q('SELECT * FROM effects WHERE job_id = ? ORDER BY created_revision, id'),
    /** Every attempt of the job's effects: the archived ones, and each effect's latest, on its row (the `attempts` view, schema 15). */
    listAttempts: q(`SELECT a.* FROM attempts a JOIN effects e ON e.id = a.effect_id
      WHERE a.job_id = ? ORDER BY e.created_revision, a.effect_id, a.attempt`),
    dueEffects: q(`SELECT * FROM (${DUE_READS(d)}) AS due ORDER BY coalesce(next_run_at, created_at), r LIMIT @limit`),
    /** Among dueEffects' oldest `@limit` rows of each kind, those no batch claim with `@machines` would take (CLAIMABLE's rows left out, whatever its srcs and budgets): bounded by the limit, not by the backlog. */
    dueUnclaimable: q(`SELECT * FROM (${DUE_READS(d, { head: `NOT (${CLAIMABLE(d)})` })}) AS due ORDER BY coalesce(next_run_at, created_at), r LIMIT @limit`),
    runningEffects: q(`SELECT * FROM effects WHERE active = 1 AND status = 'running' LIMIT ?`),
    // A child job's id is its invocation's effect id.
    orphanedChildren: q(`SELECT j.id FROM jobs j${d.indexedBy('jobs_active_children')} JOIN effects e ON e.id = j.id
      WHERE j.status = 'active' AND j.parent_job_id IS NOT NULL AND e.active = 0 ORDER BY j.id LIMIT ?`),
    /** An effect claimed, only while its job's lease may be taken (CLAIM_WHERE's LEASE_OK, LEASE_SET's parameters): claimJobLease then takes it. */
    claimEffect: q(`UPDATE effects SET ${CLAIM_SET(d)} WHERE ${CLAIM_WHERE(d)} RETURNING *`),
    /** The attempt before the one a claim of `@id` starts (claimEffect's rows, run just before it), archived. */
    archiveClaimed: q(ARCHIVED(CLAIM_WHERE(d))),
    /**
     * A batch claim's claim of a row its pick read at `@attempt` in this transaction, on SQLite (one
     * writer: nothing but this claim changes the row, its job or the job's lease between the pick and
     * it, and the pick read it due, claimable, its job not held, the job's lease free or expired):
     * CLAIM_WHERE's checks are the pick's, not made again. claimJobLeaseRecord then takes the lease.
     */
    claimPicked: q(`UPDATE effects SET ${CLAIM_SET(d)} WHERE id = @id AND attempt = @attempt RETURNING *`),
    /** The attempt before the one claimPicked starts (run just before it), archived. */
    archivePicked: q(ARCHIVED('id = @id AND attempt = @attempt')),
    /** STARVED alone, for SQLite's batch claim (dueClaimPickSql): read only when a budget is 0. */
    dueStarved: q(`SELECT CASE WHEN ${STARVED(d)} THEN 1 ELSE 0 END AS starved`),
    /** A running attempt given back: pending again, one more attempt allowed, the attempt interrupted with `@error` (SPOOL_RELEASED). */
    releaseEffect: q(`UPDATE effects SET status = 'pending', max_attempts = max_attempts + 1, claimed_by = NULL, claim_expires_at = NULL,
        next_run_at = NULL, updated_at = @at, attempt_outcome = 'interrupted', attempt_ended_at = @at, attempt_error = @error
      WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running' AND active = 1 AND unsafe = 0
        AND ${releasesLeft(d)}`),
    renewClaim: q(`UPDATE effects SET claim_expires_at = ${d.leaseUntil} WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running'
        AND EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id AND lj.lease_owner = @runner)`),
    /** An activity its creating commit claims (EffectStart): written running, at its first attempt. */
    insertClaimedEffect: q(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        claimed_by, claim_expires_at, attempt_runner, attempt_started_at, created_revision, created_at, updated_at)
      VALUES (@id, @job_id, @actor, @src, 'activity', @input, 'running', 1, 1, @max_attempts, @unsafe, @runner, ${d.leaseUntil}, @runner, @now, @revision, @at, @at)`),
    /**
     * Attempt `@attempt` of `@id` ended (`@outcome` at `@at`, `@error`) on its effect row, when it is
     * the effect's latest and its end may still change. Changes nothing for an attempt archived
     * since (endOldAttempt), or one whose end is recorded.
     */
    endAttempt: q(`UPDATE effects SET ${ATTEMPT_END}
      WHERE id = @id AND attempt = @attempt AND attempt_started_at IS NOT NULL AND coalesce(attempt_outcome, 'running') IN ${ENDS_LATER}`),
    /** The end of an attempt archived since (a newer attempt was claimed: its row written then). */
    endOldAttempt: q(`UPDATE effect_attempts SET outcome = @outcome, ended_at = @at, error = @error
      WHERE effect_id = @id AND attempt = @attempt AND outcome IN ${ENDS_LATER}`),
    /**
     * An attempt's end on its effect (its outcome `@outcome` too), under the runner's lease at its fence when `@runner` is given
     * (a refusal is told apart afterwards: effectLeaseState). `@deactivate_actor`: the commit that
     * applies the outcome also leaves the invocation of that actor, so the effect is deactivated
     * here too (at `@deactivated_at`), in the same row write (`active` 0 returned: the commit then
     * runs no deactivateEffects for that actor).
     */
    settleEffect: q(`UPDATE effects SET status = @status, output = @output, error = @error, next_run_at = @next,
        token = @token, claimed_by = NULL, claim_expires_at = NULL, ${ATTEMPT_END},
        active = CASE WHEN actor_id = @deactivate_actor THEN 0 ELSE active END,
        updated_at = CASE WHEN actor_id = @deactivate_actor THEN @deactivated_at ELSE @at END
      WHERE id = @id AND attempt = @attempt AND status = 'running' AND active = 1
        AND (@runner IS NULL OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id AND j.lease_owner = @runner AND j.lease_fence = @fence))
      RETURNING active`),
    /** Failed for good without an outcome (recovery: unsafe to repeat, or out of attempts); a running attempt is recorded interrupted. */
    failEffect: q(`UPDATE effects SET status = 'failed', error = @error, token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = @at,
        attempt_outcome = 'interrupted', attempt_ended_at = @at, attempt_error = NULL
      WHERE id = @id AND active = 1 AND attempt = @attempt AND (status = 'running' OR (attempt = 0 AND status = 'pending'))`),
    effectByToken: q('SELECT * FROM effects WHERE token = ?'),
    completeByToken: q(`UPDATE effects SET status = @status, output = @output, error = @error, token = NULL, updated_at = @at,
        attempt_outcome = @status, attempt_ended_at = @at, attempt_error = @error
      WHERE token = @token AND status = 'waiting' AND active = 1 RETURNING id, attempt`),
  };
}

/** A claim's lease on its job (LEASE_OK, LEASE_SET's parameters), up to its RETURNING list. */
const CLAIM_JOB_LEASE = (d: SqlDialect) => `UPDATE jobs SET ${LEASE_SET(d)}
      WHERE id = @id AND ${LEASE_OK(d)} RETURNING`;

/** Job leases: take, claim, renew, release, expire. */
function leasesSql(d: SqlDialect) {
  return {
    /** A new job whose create claims its first activities: this runner's lease, fence 1. */
    claimJobLease: q(`${CLAIM_JOB_LEASE(d)} lease_fence`),
    /** claimJobLease for a batch claim: the job's record as the claim leaves it (DueClaimed.job), from the row the UPDATE writes anyway. */
    claimJobLeaseRecord: q(`${CLAIM_JOB_LEASE(d)} ${JOB_RECORD_COLUMNS.join(', ')}`),
    holdsLease: q('SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    /** A claim ended now (by the lease clock): the job's lease holder may take the attempt over at once. */
    dropClaim: q(`UPDATE effects SET claim_expires_at = ${d.leaseNow} WHERE id = @id AND attempt = @attempt AND status = 'running'`),
    renewLeases: q(`UPDATE jobs SET lease_until = ${d.leaseUntil} WHERE lease_owner = @runner AND id IN (${d.jsonValues('@ids')})
      RETURNING id, lease_fence`),
    releaseLeases: q(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = @runner
      AND (@all = 1 OR id IN (${d.jsonValues('@ids')}))`),
    leaseHolders: q(`SELECT DISTINCT lease_owner FROM jobs WHERE lease_owner IS NOT NULL AND lease_until > ${d.leaseNow} ORDER BY lease_owner`),
    expireOwnerLeases: q(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?
      RETURNING id, lease_fence, ? AS owner`),
    expireLeases: q(`SELECT id, lease_owner AS owner, lease_fence FROM jobs WHERE lease_owner IS NOT NULL AND lease_until <= ${d.leaseNow}`),
    freeLease: q('UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    nextLeaseExpiry: q(`SELECT ${inCallerTime(d, 'min(lease_until)')} AS t FROM jobs WHERE lease_owner IS NOT NULL AND suspended_at IS NULL`),
  };
}

/** Timers, and the next time anything is due. */
function timersSql(d: SqlDialect) {
  return {
    listTimers: q('SELECT * FROM timers WHERE job_id = ? ORDER BY due_at, id'),
    dueTimers: q(`SELECT * FROM timers WHERE status = 'scheduled' AND due_at <= ? AND ${NOT_SUSPENDED('timers.job_id')}
      ORDER BY due_at, id LIMIT ?`),
    fireTimer: q(`UPDATE timers SET status = 'fired' WHERE id = ? AND status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')}`),
    insertTimer: q(`INSERT INTO timers (id, job_id, key, kind, event, due_at, status, created_revision, created_at)
      VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?, ?)`),
    /** The timers of the keys in a JSON array (one statement however many keys a transition cancels). */
    cancelTimers: q(`UPDATE timers SET status = 'cancelled'
      WHERE job_id = ? AND key IN (${d.jsonValues('?')}) AND status IN ('scheduled', 'fired')`),
    deliverTimer: q(`UPDATE timers SET status = 'delivered' WHERE id = ? AND status = 'fired'`),
    // Suspended jobs wake nobody: their timers and retries wait for resume. (ORDER BY + LIMIT 1
    // walks the index in order and stops at the first row of a job that is not suspended.)
    nextTimer: q(`SELECT due_at AS t FROM timers WHERE status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')} ORDER BY due_at LIMIT 1`),
    nextRetry: q(`SELECT next_run_at AS t FROM effects WHERE active = 1 AND status = 'backoff' AND ${NOT_HELD('effects.job_id')}
      ORDER BY next_run_at LIMIT 1`),
    nextClaimExpiry: q(`SELECT ${inCallerTime(d, 'claim_expires_at')} AS t FROM effects WHERE active = 1 AND status = 'running' AND ${NOT_HELD('effects.job_id')}
      ORDER BY claim_expires_at LIMIT 1`),
  };
}

/** Operations on a job: cancel, progress, notes, assets, purge, suspend, resume, redrive. */
function operationsSql(d: SqlDialect) {
  return {
    requestCancel: q(`UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL`),
    // From an activity (a runner given): never lower (an attempt run again reports from its start).
    setProgress: q(`UPDATE jobs SET progress = CASE WHEN @runner IS NULL THEN @progress ELSE ${d.greatest('COALESCE(progress, @progress)', '@progress')} END
        WHERE id = @id AND status = 'active'
        AND (@runner IS NULL OR (lease_owner = @runner AND lease_fence = @fence))`),
    addNote: q('INSERT INTO notes (job_id, kind, message, at) VALUES (?, ?, ?, ?)'),
    listNotes: q('SELECT job_id, kind, message, at FROM notes WHERE job_id = ? ORDER BY id'),
    attachAsset: q(`INSERT INTO assets (job_id, key, type, uri, size, meta, effect_id, attempt, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, key) DO NOTHING`),
    listAssets: q('SELECT * FROM assets WHERE job_id = ? ORDER BY created_at, key'),
    purge: q('DELETE FROM jobs WHERE id = ?'),
    suspend: q(`UPDATE jobs SET suspended_at = ?, suspend_reason = ? WHERE id = ? AND status = 'active' AND suspended_at IS NULL`),
    resume: q(`UPDATE jobs SET suspended_at = NULL, suspend_reason = NULL WHERE id = ? AND suspended_at IS NOT NULL`),
    redrive: q(`UPDATE effects SET status = 'pending', max_attempts = ?, error = NULL, next_run_at = NULL, token = NULL,
        claimed_by = NULL, claim_expires_at = NULL, updated_at = ?
      WHERE id = ? AND active = 1 AND status = 'failed' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id AND j.status = 'active')`),
    purgeFinished: q(`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status <> 'active' AND updated_at < @before
        AND status IN (${d.jsonValues('@statuses')}) AND (@all = 1 OR owner = @owner) ORDER BY updated_at, id LIMIT @limit)
      RETURNING id`),
  };
}

/** The text of every statement of the store in one SQL dialect, by name (a group per kind of row). */
export function statementsSql(d: SqlDialect) {
  return {
    ...jobsSql(d),
    ...historySql(d),
    ...effectsSql(d),
    ...leasesSql(d),
    ...timersSql(d),
    ...operationsSql(d),
    ...statsSql(d),
    ...schedulesSql(d),
  };
}

/** A statement of the store, by name. */
export type StatementName = keyof ReturnType<typeof statementsSql>;

/**
 * `listJobs`: the query of a filter in one dialect, `?` for each parameter, and the parameters. The
 * few quarantined or suspended jobs come from their partial indexes, not a scan of the rest
 * (recovery lists quarantined jobs on every open).
 */
export function jobListSql(filter: JobFilter, d: SqlDialect): { sql: string; params: unknown[] } {
  const where: string[] = [];
  const params: unknown[] = [];
  const equal = (column: string, value: unknown) => {
    where.push(`${column} = ?`);
    params.push(value);
  };
  const flag = (on: boolean | undefined, condition: string) => {
    if (on !== undefined) where.push(on ? condition : `NOT (${condition})`);
  };
  if (filter.machineId !== undefined) equal('machine_id', filter.machineId);
  if (filter.machineVersion !== undefined) equal('machine_version', filter.machineVersion);
  if (filter.state !== undefined) {
    where.push(d.contains('state_paths', '?'));
    params.push(`|${filter.state}|`);
  }
  if (filter.status !== undefined) equal('status', filter.status);
  flag(filter.quarantined, 'quarantine IS NOT NULL');
  flag(filter.exhausted, exhausted(d));
  flag(filter.cancelRequested, 'cancel_requested_at IS NOT NULL');
  flag(filter.suspended, 'suspended_at IS NOT NULL');
  flag(filter.stuck, stuck(d));
  if (filter.owner !== undefined) equal('owner', filter.owner ?? '');
  if (filter.afterId !== undefined) {
    where.push('id > ?');
    params.push(filter.afterId);
  }
  const from = `jobs${filter.quarantined === true ? d.indexedBy('jobs_quarantined') : filter.suspended === true ? d.indexedBy('jobs_suspended') : ''}`;
  let sql = `SELECT * FROM ${from}${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id`;
  if (filter.limit !== undefined) {
    sql += ' LIMIT ?';
    params.push(filter.limit);
  }
  return { sql, params };
}
