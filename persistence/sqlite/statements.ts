import Database from 'better-sqlite3';
import { type EffectStart, type JobFilter, type LeaseClaim, revisionNamedBy } from '../../src/ports/store.ts';
import { attemptsLeft, releasesLeft, SQLITE } from './predicates.ts';
import { prepareStats } from './stats.ts';
import type { Row } from './records.ts';
import { statements } from './prepared.ts';

/** A raw-mode statement and the function that names its row values (see `rawRows`). */
export type RawRows = { stmt: Database.Statement; named: (values: unknown[]) => Row };

/**
 * A `SELECT *` statement in raw mode, with a function that names a row's values. better-sqlite3
 * builds a named row property by property (about 3 µs for a jobs row, read on every send); an
 * object literal generated once for the statement's columns costs a fraction of that.
 */
export function rawRows(stmt: Database.Statement): RawRows {
  const names = stmt.columns().map((c) => c.name);
  const body = `return { ${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(', ')} };`;
  return { stmt: stmt.raw(true), named: new Function('v', body) as (values: unknown[]) => Row };
}


/**
 * A new history row's global seq (schema 12: the table's rowid), computed in its INSERT: one more
 * than the highest given, kept or purged (history_seq_floor; SQLite's own rowid choice would give a
 * purged one again). Writers are serialised, so rows become visible in seq order (`historySince`).
 */
const HISTORY_SEQ = `(SELECT max(coalesce((SELECT max(seq) FROM transitions), 0),
  coalesce((SELECT seq FROM history_seq_floor WHERE id = 1), 0)) + 1)`;

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
const NOT_HELD = (jobIdColumn: string) =>
  `NOT EXISTS (SELECT 1 FROM jobs sj WHERE sj.id = ${jobIdColumn} AND (sj.suspended_at IS NOT NULL OR sj.quarantine IS NOT NULL))`;

/**
 * A write under a lease (`@runner` null: no lease given, nothing checked or changed). Allowed when
 * the lease is free, expired, held by a dead runner named in `@take_over`, held by `@runner` with
 * the fence `@held`, or forced. The fence grows unless `@runner` renews its own live lease.
 */
const LEASE_OK = `(@runner IS NULL OR @force = 1 OR lease_owner IS NULL OR lease_until <= @now OR lease_owner = @take_over
  OR (lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1)))`;
const LEASE_SET = `lease_fence = CASE WHEN @runner IS NULL OR (@force = 0 AND lease_owner = @runner AND (lease_fence = @held OR @any_fence = 1) AND lease_until > @now)
    THEN lease_fence ELSE lease_fence + 1 END,
  lease_owner = CASE WHEN @runner IS NULL THEN lease_owner WHEN @until IS NULL THEN NULL ELSE @runner END,
  lease_until = CASE WHEN @runner IS NULL THEN lease_until ELSE @until END`;

/**
 * An event accepted and applied in one commit (`@inline_event`, its id) goes in only when no
 * event waits before it (events apply in accept order). Its id's uniqueness is a key, written
 * after this UPDATE (`recordKey`), except for a made-up id applied at the revision it names
 * (`@at_named` = 1): the history's primary key holds that one, and this probe makes sure the id
 * was not recorded under a key before (a caller that sent such an id itself, earlier).
 */
const INLINE_OK = `(@inline_event IS NULL OR (NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @id AND status = 'pending')
  AND (@at_named = 0 OR NOT EXISTS (SELECT 1 FROM event_keys WHERE job_id = @id AND event_id = @inline_event))))`;

/** A history row of an event applied as it was accepted, read as an event (as the `events` view maps it). */
const INLINE_EVENT = `SELECT NULL AS seq, job_id, event_id, event_type AS type, payload, payload_hash, outcome AS status,
  'external' AS source_kind, NULL AS source_id, NULL AS attempt, error, revision, at AS accepted_at, at AS processed_at FROM transitions`;

/** The history row recording an event applied as it was accepted, by the event's id. */
function inlineEvent(s: ReturnType<typeof prepare>, jobId: string, eventId: string): Row | undefined {
  const keyed = s.keyedEvent.get({ job: jobId, event: eventId }) as Row | undefined;
  if (keyed) return keyed;
  const at = revisionNamedBy(eventId);
  return at > 0 ? (s.locatedEvent.get(jobId, at, eventId) as Row | undefined) : undefined;
}

/** An accepted event by id, wherever it is recorded: its inbox row, or its history row. */
export function findEvent(s: ReturnType<typeof prepare>, jobId: string, eventId: string): Row | undefined {
  return (s.getEvent.get(jobId, eventId) as Row | undefined) ?? inlineEvent(s, jobId, eventId);
}

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
const DUE_FILTER = `${NOT_HELD('effects.job_id')}
  AND (@runner IS NULL OR NOT EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id
    AND lj.lease_owner IS NOT NULL AND lj.lease_owner <> @runner AND lj.lease_until > @now))`;

/** Jobs, their history rows and their inbox. */
function prepareJobs(db: Database.Database) {
  return {
    getJob: db.prepare('SELECT * FROM jobs WHERE id = ?'),
    firstActiveVersion: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = ? ORDER BY machine_id, machine_version LIMIT 1`),
    // Two seeks, not a row-value comparison: SQLite seeks `(a, b) > (?, ?)` on `a` only and would
    // walk every entry of the current machine.
    nextActiveVersion: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version > @v ORDER BY machine_version LIMIT 1`),
    nextActiveMachine: db.prepare(`SELECT machine_id, machine_version FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id > @m ORDER BY machine_id, machine_version LIMIT 1`),
    countActiveVersion: db.prepare(`SELECT count(*) FROM (SELECT 1 FROM jobs INDEXED BY jobs_active_versions
      WHERE status = 'active' AND owner = @owner AND machine_id = @m AND machine_version = @v LIMIT @limit)`),
    byKey: db.prepare('SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?'),
    insertJob: db.prepare(`INSERT INTO jobs (id, machine_id, machine_version, revision, status, state_value, state_paths, context,
        snapshot, input, input_hash, idempotency_key, owner, quarantine, progress, parent_job_id, parent_effect_id, created_at, updated_at)
      VALUES (@id, @machine_id, @machine_version, 1, @status, @state_value, @state_paths, @context,
        @snapshot, @input, @input_hash, @idempotency_key, @owner, NULL, @progress, @parent_job_id, @parent_effect_id, @at, @at)`),
    /** Status and version unchanged (the usual case): their index entries are not rewritten. */
    updateState: db.prepare(`UPDATE jobs SET revision = revision + 1, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END,
        ${LEASE_SET}
      WHERE id = @id AND revision = @expected AND status = @status AND machine_version = @machine_version
        AND (suspended_at IS NULL OR @settles = 0) AND ${LEASE_OK} AND ${INLINE_OK}
      RETURNING lease_fence`),
    updateJob: db.prepare(`UPDATE jobs SET revision = revision + 1, status = @status, state_value = @state_value,
        state_paths = @state_paths, context = @context, snapshot = @snapshot, machine_version = @machine_version, updated_at = @at,
        progress = CASE WHEN @set_progress = 1 THEN @progress ELSE progress END,
        ${LEASE_SET}
      WHERE id = @id AND revision = @expected AND (suspended_at IS NULL OR @settles = 0) AND ${LEASE_OK} AND ${INLINE_OK}
      RETURNING lease_fence`),
    revisionOf: db.prepare('SELECT revision, lease_owner, lease_until FROM jobs WHERE id = ?'),
    /** A job's revision and the columns written without a commit (getJob with a known record). */
    uncommittedOf: db.prepare(`SELECT revision, quarantine, progress, cancel_requested_at, cancel_reason, suspended_at, suspend_reason,
        lease_owner, lease_fence, lease_until, updated_at, created_at FROM jobs WHERE id = ?`).raw(),
    insertTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HISTORY_SEQ})`),
    /** The history row of an event applied as it is accepted: its only record (no inbox row). */
    insertInlineTransition: db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner, fence,
        payload_hash, seq)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${HISTORY_SEQ})`),
    /** A (job, event id) recorded once: a second record of it does nothing (changes 0), read as a duplicate. */
    insertKey: db.prepare('INSERT INTO event_keys (job_id, event_id, revision) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
    keyedEvent: db.prepare(`${INLINE_EVENT} WHERE job_id = @job AND revision = (SELECT revision FROM event_keys WHERE job_id = @job AND event_id = @event)`),
    locatedEvent: db.prepare(`${INLINE_EVENT} WHERE job_id = ? AND revision = ? AND event_id = ? AND payload_hash IS NOT NULL`),
    insertEvent: db.prepare(`INSERT INTO inbox (${INBOX_COLUMNS}) VALUES (${INBOX_VALUES}) ON CONFLICT (job_id, event_id) DO NOTHING`),
    /** The runtime's own event accepted and applied in one commit: inserted only while nothing waits before it in the job's inbox. */
    insertAppliedEvent: db.prepare(`INSERT INTO inbox (${INBOX_COLUMNS}) SELECT ${INBOX_VALUES}
      WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE job_id = @job_id AND status = 'pending')
      ON CONFLICT (job_id, event_id) DO NOTHING`),
    settleEvent: db.prepare(`UPDATE inbox SET status = @status, error = @error, revision = @revision, processed_at = @at, payload = @payload
      WHERE seq = @seq AND job_id = @job_id AND status = 'pending'`),
    rejectEvent: db.prepare(`UPDATE inbox SET status = 'rejected', error = ?, processed_at = ?, payload = coalesce(?, payload) WHERE seq = ? AND status = 'pending'`),
    getEvent: db.prepare('SELECT * FROM inbox WHERE job_id = ? AND event_id = ?'),
    // Accept order: a job's events apply in accept order, so the revision orders every applied
    // one; pending and rejected events (no revision) follow in seq order.
    listEvents: db.prepare('SELECT * FROM events WHERE job_id = ? ORDER BY revision IS NULL, revision, seq'),
    firstPending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT 1"),
    pending: db.prepare("SELECT * FROM inbox WHERE job_id = ? AND status = 'pending' ORDER BY seq LIMIT ?"),
    pendingJobs: db.prepare(`SELECT i.job_id, min(i.seq) AS first FROM inbox i JOIN jobs j ON j.id = i.job_id
      WHERE i.status = 'pending' AND j.quarantine IS NULL AND j.suspended_at IS NULL
        AND (@runner IS NULL OR j.lease_owner IS NULL OR j.lease_owner = @runner OR j.lease_until <= @now)
      GROUP BY i.job_id ORDER BY first LIMIT @limit`),
    quarantine: db.prepare('UPDATE jobs SET quarantine = ?, updated_at = ? WHERE id = ?'),
    /** A damaged row's quarantine, recorded once and never over another reason (no clock here: updated_at is kept). */
    jobsWithState: db.prepare('SELECT id FROM jobs WHERE state_value = ? AND quarantine IS NULL'),
    quarantineDamaged: db.prepare('UPDATE jobs SET quarantine = ? WHERE id = ? AND quarantine IS NULL'),
    /** `commitLanded`: the history row of that revision, recorded for that event (null-safe). */
    landed: db.prepare('SELECT 1 FROM transitions WHERE job_id = @job AND revision = @revision AND event_id IS @event'),
    history: db.prepare('SELECT * FROM transitions WHERE job_id = ? ORDER BY revision'),
  };
}

/** Effects and their attempts: start, claim, renew, finish, fail, complete by token. */
function prepareEffects(db: Database.Database) {
  return {
    insertEffect: db.prepare(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`),
    settleChild: db.prepare(`UPDATE effects SET status = 'succeeded', output = ?, updated_at = ? WHERE id = ? AND kind = 'child' AND status = 'waiting' AND active = 1`),
    deactivateAll: db.prepare(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND active = 1`),
    cancelAllTimers: db.prepare(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status IN ('scheduled', 'fired')`),
    cancelScheduledTimers: db.prepare(`UPDATE timers SET status = 'cancelled' WHERE job_id = ? AND status = 'scheduled'`),
    deactivateEffects: db.prepare(`UPDATE effects SET active = 0, token = NULL, updated_at = ?,
        status = CASE WHEN status IN ('pending', 'running', 'waiting', 'backoff') THEN 'cancelled' ELSE status END
      WHERE job_id = ? AND actor_id = ? AND active = 1`),
    getEffect: db.prepare('SELECT * FROM effects WHERE id = ?'),
    /** What a claim or an outcome needs to know of an effect before it writes. */
    effectClaimState: db.prepare('SELECT job_id, status, attempt FROM effects WHERE id = ?'),
    /** An effect's job, and whether `runner` holds its lease under `fence` (1) or not (0). */
    effectLeaseState: db.prepare(`SELECT e.job_id, EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.lease_owner = @runner AND j.lease_fence = @fence) AS held
      FROM effects e WHERE e.id = @id`),
    listEffects: db.prepare('SELECT * FROM effects WHERE job_id = ? ORDER BY created_revision, id'),
    listAttempts: db.prepare(`SELECT a.* FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
      WHERE e.job_id = ? ORDER BY e.created_revision, a.effect_id, a.attempt`),
    // Three index-ordered reads (pending by age, backoff by due time, running by claim expiry),
    // each stopping at @limit rows it may start, merged in the order the round starts them.
    dueEffects: db.prepare(`SELECT * FROM (
        SELECT * FROM (SELECT *, rowid AS r FROM effects INDEXED BY effects_pending WHERE active = 1 AND status = 'pending' AND ${DUE_FILTER}
          ORDER BY created_at, rowid LIMIT @limit)
        UNION ALL
        SELECT * FROM (SELECT *, rowid AS r FROM effects WHERE active = 1 AND status = 'backoff' AND next_run_at <= @now AND ${DUE_FILTER}
          ORDER BY next_run_at, rowid LIMIT @limit)
        UNION ALL
        SELECT * FROM (SELECT *, rowid AS r FROM effects WHERE active = 1 AND status = 'running' AND claim_expires_at <= @now AND ${DUE_FILTER}
          ORDER BY claim_expires_at, rowid LIMIT @limit))
      ORDER BY coalesce(next_run_at, created_at), r LIMIT @limit`),
    runningEffects: db.prepare(`SELECT * FROM effects WHERE active = 1 AND status = 'running' LIMIT ?`),
    // A child job's id is its invocation's effect id.
    orphanedChildren: db.prepare(`SELECT j.id FROM jobs j INDEXED BY jobs_active_children JOIN effects e ON e.id = j.id
      WHERE j.status = 'active' AND j.parent_job_id IS NOT NULL AND e.active = 0 ORDER BY j.id LIMIT ?`),
    claimEffect: db.prepare(`UPDATE effects SET status = 'running', attempt = attempt + 1, claimed_by = @runner,
        claim_expires_at = @until, next_run_at = NULL, updated_at = @now
      WHERE id = @id AND active = 1 AND (status = 'pending' OR (status = 'backoff' AND next_run_at <= @now)
        OR (status = 'running' AND (claim_expires_at <= @now OR claimed_by = @takeOver)))
        AND ${attemptsLeft('effects')}
        AND ${NOT_HELD('effects.job_id')}
      RETURNING *`),
    releaseEffect: db.prepare(`UPDATE effects SET status = 'pending', max_attempts = max_attempts + 1, claimed_by = NULL, claim_expires_at = NULL,
        next_run_at = NULL, updated_at = @at
      WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running' AND active = 1 AND unsafe = 0
        AND ${releasesLeft(SQLITE)}`),
    interruptAttempt: db.prepare(`UPDATE effect_attempts SET outcome = 'interrupted', ended_at = ?
      WHERE effect_id = ? AND attempt = ? AND outcome = 'running'`),
    insertAttempt: db.prepare(`INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, outcome) VALUES (?, ?, ?, ?, 'running')`),
    renewClaim: db.prepare(`UPDATE effects SET claim_expires_at = @until WHERE id = @id AND attempt = @attempt AND claimed_by = @runner AND status = 'running'
        AND EXISTS (SELECT 1 FROM jobs lj WHERE lj.id = effects.job_id AND lj.lease_owner = @runner)`),
    /** An activity its creating commit claims (EffectStart): written running, at its first attempt. */
    insertClaimedEffect: db.prepare(`INSERT INTO effects (id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe,
        claimed_by, claim_expires_at, created_revision, created_at, updated_at) VALUES (?, ?, ?, ?, 'activity', ?, 'running', 1, 1, ?, ?, ?, ?, ?, ?, ?)`),
    endAttempt: db.prepare(`UPDATE effect_attempts SET outcome = ?, ended_at = ?, error = ?
      WHERE effect_id = ? AND attempt = ? AND outcome IN ('running', 'waiting', 'interrupted')`),
    settleEffect: db.prepare(`UPDATE effects SET status = @status, output = @output, error = @error, next_run_at = @next,
        token = @token, claimed_by = NULL, claim_expires_at = NULL, updated_at = @at
      WHERE id = @id AND attempt = @attempt AND status = 'running' AND active = 1`),
    failEffect: db.prepare(`UPDATE effects SET status = 'failed', error = ?, token = NULL, claimed_by = NULL, claim_expires_at = NULL, updated_at = ?
      WHERE id = ? AND active = 1 AND status NOT IN ('succeeded', 'failed', 'cancelled')`),
    effectByToken: db.prepare('SELECT * FROM effects WHERE token = ?'),
    completeByToken: db.prepare(`UPDATE effects SET status = @status, output = @output, error = @error, token = NULL, updated_at = @at
      WHERE token = @token AND status = 'waiting' AND active = 1 RETURNING id, attempt`),
  };
}

/** Job leases: take, claim, renew, release, expire. */
function prepareLeases(db: Database.Database) {
  return {
    /** A new job whose create claims its first activities: this runner's lease, fence 1. */
    takeNewLease: db.prepare('UPDATE jobs SET lease_owner = @runner, lease_fence = 1, lease_until = @until WHERE id = @id AND lease_owner IS NULL'),
    claimJobLease: db.prepare(`UPDATE jobs SET ${LEASE_SET}
      WHERE id = @id AND ${LEASE_OK} RETURNING lease_fence`),
    holdsLease: db.prepare('SELECT 1 FROM jobs WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    dropClaim: db.prepare(`UPDATE effects SET claim_expires_at = ? WHERE id = ? AND attempt = ? AND status = 'running'`),
    renewLeases: db.prepare(`UPDATE jobs SET lease_until = @until WHERE lease_owner = @runner AND id IN (SELECT value FROM json_each(@ids))
      RETURNING id, lease_fence`),
    releaseLeases: db.prepare(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = @runner
      AND (@all = 1 OR id IN (SELECT value FROM json_each(@ids)))`),
    leaseHolders: db.prepare('SELECT DISTINCT lease_owner FROM jobs WHERE lease_owner IS NOT NULL AND lease_until > ? ORDER BY lease_owner'),
    expireOwnerLeases: db.prepare(`UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?
      RETURNING id, lease_fence, ? AS owner`),
    expireLeases: db.prepare(`SELECT id, lease_owner AS owner, lease_fence FROM jobs WHERE lease_owner IS NOT NULL AND lease_until <= ?`),
    freeLease: db.prepare('UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ? AND lease_fence = ?'),
    nextLeaseExpiry: db.prepare('SELECT min(lease_until) AS t FROM jobs WHERE lease_owner IS NOT NULL AND suspended_at IS NULL'),
  };
}

/** Timers, and the next time anything is due. */
function prepareTimers(db: Database.Database) {
  return {
    listTimers: db.prepare('SELECT * FROM timers WHERE job_id = ? ORDER BY due_at, id'),
    dueTimers: db.prepare(`SELECT * FROM timers WHERE status = 'scheduled' AND due_at <= ? AND ${NOT_SUSPENDED('timers.job_id')}
      ORDER BY due_at, id LIMIT ?`),
    fireTimer: db.prepare(`UPDATE timers SET status = 'fired' WHERE id = ? AND status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')}`),
    insertTimer: db.prepare(`INSERT INTO timers (id, job_id, key, kind, event, due_at, status, created_revision, created_at)
      VALUES (?, ?, ?, ?, ?, ?, 'scheduled', ?, ?)`),
    /** The timers of the keys in a JSON array (one statement however many keys a transition cancels). */
    cancelTimers: db.prepare(`UPDATE timers SET status = 'cancelled'
      WHERE job_id = ? AND key IN (SELECT value FROM json_each(?)) AND status IN ('scheduled', 'fired')`),
    deliverTimer: db.prepare(`UPDATE timers SET status = 'delivered' WHERE id = ? AND status = 'fired'`),
    // Suspended jobs wake nobody: their timers and retries wait for resume. (ORDER BY + LIMIT 1
    // walks the index in order and stops at the first row of a job that is not suspended.)
    nextTimer: db.prepare(`SELECT due_at AS t FROM timers WHERE status = 'scheduled' AND ${NOT_SUSPENDED('timers.job_id')} ORDER BY due_at LIMIT 1`),
    nextRetry: db.prepare(`SELECT next_run_at AS t FROM effects WHERE active = 1 AND status = 'backoff' AND ${NOT_HELD('effects.job_id')}
      ORDER BY next_run_at LIMIT 1`),
    nextClaimExpiry: db.prepare(`SELECT claim_expires_at AS t FROM effects WHERE active = 1 AND status = 'running' AND ${NOT_HELD('effects.job_id')}
      ORDER BY claim_expires_at LIMIT 1`),
  };
}

/** Operations on a job: cancel, progress, notes, assets, purge, suspend, resume, redrive. */
function prepareOperations(db: Database.Database) {
  return {
    requestCancel: db.prepare(`UPDATE jobs SET cancel_requested_at = ?, cancel_reason = ? WHERE id = ? AND cancel_requested_at IS NULL`),
    setProgress: db.prepare(`UPDATE jobs SET progress = @progress WHERE id = @id AND status = 'active'
        AND (@runner IS NULL OR (lease_owner = @runner AND lease_fence = @fence))`),
    addNote: db.prepare('INSERT INTO notes (job_id, kind, message, at) VALUES (?, ?, ?, ?)'),
    listNotes: db.prepare('SELECT job_id, kind, message, at FROM notes WHERE job_id = ? ORDER BY id'),
    attachAsset: db.prepare(`INSERT INTO assets (job_id, key, type, uri, size, meta, effect_id, attempt, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, key) DO NOTHING`),
    listAssets: db.prepare('SELECT * FROM assets WHERE job_id = ? ORDER BY created_at, key'),
    purge: db.prepare('DELETE FROM jobs WHERE id = ?'),
    suspend: db.prepare(`UPDATE jobs SET suspended_at = ?, suspend_reason = ? WHERE id = ? AND status = 'active' AND suspended_at IS NULL`),
    resume: db.prepare(`UPDATE jobs SET suspended_at = NULL, suspend_reason = NULL WHERE id = ? AND suspended_at IS NOT NULL`),
    redrive: db.prepare(`UPDATE effects SET status = 'pending', max_attempts = ?, error = NULL, next_run_at = NULL, token = NULL,
        claimed_by = NULL, claim_expires_at = NULL, updated_at = ?
      WHERE id = ? AND active = 1 AND status = 'failed' AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id AND j.status = 'active')`),
    purgeFinished: db.prepare(`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status <> 'active' AND updated_at < @before
        AND status IN (SELECT value FROM json_each(@statuses)) AND (@all = 1 OR owner = @owner) ORDER BY updated_at, id LIMIT @limit)
      RETURNING id`),
  };
}

/** Every statement of the store, prepared once per connection (a group per kind of row). */
export function prepare(db: Database.Database) {
  return statements({
    ...prepareJobs(db),
    ...prepareEffects(db),
    ...prepareLeases(db),
    ...prepareTimers(db),
    ...prepareOperations(db),
    ...prepareStats(db),
  });
}
