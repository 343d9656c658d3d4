-- The sqlite schema as persistence/sql/migrations/sqlite produce it (schema version 16).
-- Written by `npm run schema:dump`; test/schemaDump tests fail when it drifts from the migrations.

CREATE TABLE assets (
  job_id      TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  key         TEXT    NOT NULL,
  type        TEXT    NOT NULL,
  uri         TEXT    NOT NULL,
  size        INTEGER,
  meta        TEXT,                              -- JSON
  effect_id   TEXT,
  attempt     INTEGER,
  created_at  INTEGER NOT NULL,
  PRIMARY KEY (job_id, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE "effect_attempts" (
  effect_id   TEXT    NOT NULL REFERENCES "effects" (id) ON DELETE CASCADE,
  attempt     INTEGER NOT NULL,
  runner      TEXT,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  outcome     TEXT    NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'waiting', 'interrupted', 'stale')),
  error       TEXT,
  PRIMARY KEY (effect_id, attempt)
) STRICT, WITHOUT ROWID;

CREATE TABLE "effects" (
  id                TEXT    PRIMARY KEY,         -- the idempotency key: stable across retries and restarts
  job_id            TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  actor_id          TEXT    NOT NULL,            -- the invoke id
  src               TEXT    NOT NULL,
  kind              TEXT    NOT NULL DEFAULT 'activity' CHECK (kind IN ('activity', 'child')), -- child: a child job (id = effects.id)
  input             TEXT    NOT NULL,            -- JSON
  status            TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'waiting', 'backoff', 'succeeded', 'failed', 'cancelled')),
  active            INTEGER NOT NULL,            -- 1 while the invoking state is current
  attempt           INTEGER NOT NULL DEFAULT 0,  -- attempts started
  max_attempts      INTEGER NOT NULL,
  unsafe            INTEGER NOT NULL DEFAULT 0,  -- 1: never re-run after a crash
  next_run_at       INTEGER,
  claimed_by        TEXT,
  claim_expires_at  INTEGER,
  token             TEXT,                        -- out-of-band completion token while waiting (unique: effects_token)
  output            TEXT,
  error             TEXT,
  created_revision  INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
, attempt_runner TEXT, attempt_started_at INTEGER, attempt_ended_at INTEGER, attempt_outcome TEXT, attempt_error TEXT) STRICT;

CREATE TABLE event_keys (
  job_id    TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_id  TEXT    NOT NULL,
  revision  INTEGER,                               -- the history row that records it, or NULL: its inbox row does
  PRIMARY KEY (job_id, event_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE history_seq_floor (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL
) STRICT;

CREATE TABLE inbox (
  seq           INTEGER PRIMARY KEY,              -- accept order (rowid: no sequence table write per event)
  job_id        TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_id      TEXT    NOT NULL,
  type          TEXT    NOT NULL,
  payload       TEXT    NOT NULL,                -- JSON (sensitive fields redacted once processed)
  payload_hash  TEXT    NOT NULL,
  status        TEXT    NOT NULL CHECK (status IN ('pending', 'applied', 'ignored', 'failed', 'rejected', 'stale')),
  source_kind   TEXT    NOT NULL DEFAULT 'external' CHECK (source_kind IN ('external', 'timer', 'effect', 'self', 'cancel', 'parent', 'child')),
  source_id     TEXT,                            -- the timer or effect that produced this event
  attempt       INTEGER,                         -- the effect attempt that produced it
  error         TEXT,                            -- JSON ErrorInfo
  revision      INTEGER,
  accepted_at   INTEGER NOT NULL,
  processed_at  INTEGER,
  UNIQUE (job_id, event_id)
) STRICT;

CREATE TABLE jobs (
  id               TEXT    PRIMARY KEY,
  machine_id       TEXT    NOT NULL,
  machine_version  TEXT    NOT NULL,
  revision         INTEGER NOT NULL CHECK (revision >= 1),
  status           TEXT    NOT NULL CHECK (status IN ('active', 'done', 'error', 'stopped')),
  state_value      TEXT    NOT NULL,             -- JSON
  state_paths      TEXT    NOT NULL,             -- '|a|a.b|' for list --state
  context          TEXT    NOT NULL,             -- JSON
  snapshot         TEXT    NOT NULL,             -- XState persisted snapshot, JSON
  input            TEXT    NOT NULL,             -- JSON
  input_hash       TEXT    NOT NULL,
  idempotency_key  TEXT,
  owner            TEXT    NOT NULL DEFAULT '',  -- '' = unscoped
  quarantine       TEXT,                         -- reason, or NULL
  progress         REAL,                         -- 0-100, or NULL
  cancel_requested_at INTEGER,
  cancel_reason    TEXT,
  parent_job_id    TEXT,                         -- a child job: the job that invoked it
  parent_effect_id TEXT,                         -- ... and the invocation (effects.id) it settles
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL
, suspended_at INTEGER, suspend_reason TEXT, lease_owner TEXT, lease_fence INTEGER NOT NULL DEFAULT 0, lease_until INTEGER) STRICT;

CREATE TABLE notes (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id   TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  kind     TEXT    NOT NULL,
  message  TEXT    NOT NULL,
  at       INTEGER NOT NULL
) STRICT;

CREATE TABLE schedule_occurrences (
  schedule_id  TEXT    NOT NULL,
  due_at       INTEGER NOT NULL,
  outcome      TEXT    NOT NULL CHECK (outcome IN ('started', 'skipped', 'failed')),
  job_id       TEXT,
  reason       TEXT,
  at           INTEGER NOT NULL,
  UNIQUE (schedule_id, due_at)
) STRICT;

CREATE TABLE schedules (
  id               TEXT    PRIMARY KEY,
  owner            TEXT    NOT NULL DEFAULT '',  -- '' = unscoped; its jobs get the same owner
  machine_id       TEXT    NOT NULL,
  input            TEXT    NOT NULL,             -- JSON, validated when the schedule was written
  cron             TEXT,                         -- a cron expression, or NULL for an interval
  timezone         TEXT,                         -- the IANA zone the cron expression is read in
  every_ms         INTEGER CHECK (every_ms IS NULL OR every_ms > 0),
  overlap          TEXT    NOT NULL CHECK (overlap IN ('skip', 'buffer-one', 'allow-all', 'cancel-previous')),
  catch_up         TEXT    NOT NULL,             -- JSON: "skip-missed" | "run-once" | {"runEach": n}
  grace_ms         INTEGER NOT NULL CHECK (grace_ms >= 0),
  start_at         INTEGER,                      -- no occurrence before; an interval's anchor (NULL: the epoch)
  next_due_at      INTEGER,                      -- the earliest occurrence not handled yet; NULL: none will come
  buffered_due_at  INTEGER,                      -- buffer-one: the occurrence waiting for the previous run to end
  last_due_at      INTEGER,                      -- the latest occurrence handled
  last_job_id      TEXT,                         -- the job of the latest started occurrence ("the previous run")
  missed           INTEGER NOT NULL DEFAULT 0,   -- occurrences dropped by the catch-up policy
  revision         INTEGER NOT NULL CHECK (revision >= 1),
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  CHECK ((cron IS NULL) <> (every_ms IS NULL))
) STRICT;

CREATE TABLE spool_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT;

CREATE TABLE timers (
  id                TEXT    PRIMARY KEY,         -- job id, key and scheduling revision
  job_id            TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  key               TEXT    NOT NULL,            -- XState's send id (after id, raise/sendTo id)
  kind              TEXT    NOT NULL CHECK (kind IN ('after', 'raise', 'sendTo')),
  event             TEXT    NOT NULL,            -- JSON event delivered when due
  due_at            INTEGER NOT NULL,            -- absolute deadline
  status            TEXT    NOT NULL CHECK (status IN ('scheduled', 'fired', 'delivered', 'cancelled')),
  created_revision  INTEGER NOT NULL,
  created_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE "transitions" (
  seq          INTEGER PRIMARY KEY,                -- the global order (rowid): see above
  job_id       TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  revision     INTEGER NOT NULL,
  event_id     TEXT,
  event_type   TEXT    NOT NULL,
  payload      TEXT    NOT NULL,                   -- JSON, sensitive fields redacted
  from_value   TEXT,                               -- JSON
  to_value     TEXT    NOT NULL,                   -- JSON
  outcome      TEXT    NOT NULL CHECK (outcome IN ('started', 'applied', 'ignored', 'failed', 'migrated', 'stale')),
  error        TEXT,                               -- JSON ErrorInfo
  at           INTEGER NOT NULL,
  runner       TEXT,
  fence        INTEGER,
  payload_hash TEXT,                               -- schema 7: an event applied as it was accepted
  event_keyed  INTEGER, source_kind TEXT, source_id TEXT, attempt INTEGER,                            -- schema 7, no longer written (schema 10)
  UNIQUE (job_id, revision)
) STRICT;

CREATE VIEW attempts AS
  SELECT a.effect_id, a.attempt, a.runner, a.started_at, a.ended_at, a.outcome, a.error, e.job_id
    FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
  UNION ALL
  SELECT id, attempt, attempt_runner, attempt_started_at, attempt_ended_at, coalesce(attempt_outcome, 'running'), attempt_error, job_id
    FROM effects WHERE attempt_started_at IS NOT NULL;

CREATE INDEX effects_due ON effects (status, next_run_at) WHERE active = 1;

CREATE INDEX effects_job ON effects (job_id, actor_id);

CREATE INDEX effects_pending ON effects (src, created_at) WHERE active = 1 AND status = 'pending';

CREATE UNIQUE INDEX effects_token ON effects (token) WHERE token IS NOT NULL;

CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, coalesce(source_kind, 'external'), source_id, attempt,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;

CREATE INDEX inbox_pending ON inbox (job_id, seq) WHERE status = 'pending';

CREATE INDEX jobs_active_children ON jobs (id) WHERE status = 'active' AND parent_job_id IS NOT NULL;

CREATE INDEX jobs_active_versions ON jobs (owner, machine_id, machine_version) WHERE status = 'active';

CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status <> 'active';

CREATE UNIQUE INDEX jobs_idempotency ON jobs (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE INDEX jobs_lease ON jobs (lease_owner, lease_until) WHERE lease_owner IS NOT NULL;

CREATE INDEX jobs_machine ON jobs (machine_id, machine_version);

CREATE INDEX jobs_quarantined ON jobs (id) WHERE quarantine IS NOT NULL;

CREATE INDEX jobs_status ON jobs (status, id);

CREATE INDEX jobs_suspended ON jobs (id) WHERE suspended_at IS NOT NULL;

CREATE INDEX notes_job ON notes (job_id, id);

CREATE INDEX schedules_buffered ON schedules (owner) WHERE buffered_due_at IS NOT NULL;

CREATE INDEX schedules_due ON schedules (owner, next_due_at) WHERE next_due_at IS NOT NULL;

CREATE INDEX timers_due ON timers (due_at) WHERE status = 'scheduled';

CREATE INDEX timers_job ON timers (job_id, key);

CREATE TRIGGER transitions_seq_keep_floor BEFORE DELETE ON transitions FOR EACH ROW
  WHEN OLD.seq = (SELECT max(seq) FROM transitions)
BEGIN
  INSERT INTO history_seq_floor (id, seq) VALUES (1, OLD.seq)
    ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq);
END;
