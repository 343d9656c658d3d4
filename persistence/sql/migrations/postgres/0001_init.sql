-- Spool on PostgreSQL, schema 1: the tables of SQLite schema 12 (persistence/sqlite/migrations),
-- column for column, so that the same statements (persistence/sqlite/statements.ts, in the
-- POSTGRES dialect) run on both. Migrations are append-only: never edit a released file, add the
-- next number.
--
-- Times are BIGINT milliseconds (the caller's clock, as in SQLite; leases: see PostgresStore).
-- JSON is stored as the text Spool wrote (read back byte for byte). Text compares in byte order
-- (COLLATE "C"), as SQLite's BINARY does, whatever the database's locale.

CREATE TABLE jobs (
  id                  TEXT COLLATE "C" PRIMARY KEY,
  machine_id          TEXT COLLATE "C" NOT NULL,
  machine_version     TEXT COLLATE "C" NOT NULL,
  revision            BIGINT NOT NULL CHECK (revision >= 1),
  status              TEXT COLLATE "C" NOT NULL CHECK (status IN ('active', 'done', 'error', 'stopped')),
  state_value         TEXT COLLATE "C" NOT NULL,
  state_paths         TEXT COLLATE "C" NOT NULL,
  context             TEXT NOT NULL,
  snapshot            TEXT NOT NULL,
  input               TEXT NOT NULL,
  input_hash          TEXT NOT NULL,
  idempotency_key     TEXT COLLATE "C",
  owner               TEXT COLLATE "C" NOT NULL DEFAULT '',
  quarantine          TEXT,
  progress            DOUBLE PRECISION,
  cancel_requested_at BIGINT,
  cancel_reason       TEXT,
  parent_job_id       TEXT COLLATE "C",
  parent_effect_id    TEXT COLLATE "C",
  created_at          BIGINT NOT NULL,
  updated_at          BIGINT NOT NULL,
  suspended_at        BIGINT,
  suspend_reason      TEXT,
  -- The lease: who may advance the job, its fencing token (grows with every claim), and its expiry.
  lease_owner         TEXT COLLATE "C",
  lease_fence         BIGINT NOT NULL DEFAULT 0,
  lease_until         BIGINT
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_machine ON jobs (machine_id, machine_version);
CREATE INDEX jobs_status ON jobs (status, id);
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status <> 'active';
CREATE INDEX jobs_suspended ON jobs (id) WHERE suspended_at IS NOT NULL;
CREATE INDEX jobs_lease ON jobs (lease_owner, lease_until) WHERE lease_owner IS NOT NULL;
CREATE INDEX jobs_active_versions ON jobs (owner, machine_id, machine_version) WHERE status = 'active';
CREATE INDEX jobs_quarantined ON jobs (id) WHERE quarantine IS NOT NULL;
CREATE INDEX jobs_active_children ON jobs (id) WHERE status = 'active' AND parent_job_id IS NOT NULL;

CREATE TABLE inbox (
  seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- accept order
  job_id        TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_id      TEXT COLLATE "C" NOT NULL,
  type          TEXT COLLATE "C" NOT NULL,
  payload       TEXT NOT NULL,
  payload_hash  TEXT NOT NULL,
  status        TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'applied', 'ignored', 'failed', 'rejected', 'stale')),
  source_kind   TEXT COLLATE "C" NOT NULL DEFAULT 'external' CHECK (source_kind IN ('external', 'timer', 'effect', 'self', 'cancel', 'parent', 'child')),
  source_id     TEXT COLLATE "C",
  attempt       BIGINT,
  error         TEXT,
  revision      BIGINT,
  accepted_at   BIGINT NOT NULL,
  processed_at  BIGINT,
  UNIQUE (job_id, event_id)
);
CREATE INDEX inbox_pending ON inbox (job_id, seq) WHERE status = 'pending';

CREATE TABLE timers (
  id                TEXT COLLATE "C" PRIMARY KEY,
  job_id            TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  key               TEXT COLLATE "C" NOT NULL,
  kind              TEXT COLLATE "C" NOT NULL CHECK (kind IN ('after', 'raise', 'sendTo')),
  event             TEXT NOT NULL,
  due_at            BIGINT NOT NULL,
  status            TEXT COLLATE "C" NOT NULL CHECK (status IN ('scheduled', 'fired', 'delivered', 'cancelled')),
  created_revision  BIGINT NOT NULL,
  created_at        BIGINT NOT NULL
);
CREATE INDEX timers_due ON timers (due_at) WHERE status = 'scheduled';
CREATE INDEX timers_job ON timers (job_id, key);

CREATE TABLE notes (
  id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id   TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  kind     TEXT COLLATE "C" NOT NULL,
  message  TEXT NOT NULL,
  at       BIGINT NOT NULL
);
CREATE INDEX notes_job ON notes (job_id, id);

CREATE TABLE assets (
  job_id      TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  key         TEXT COLLATE "C" NOT NULL,
  type        TEXT COLLATE "C" NOT NULL,
  uri         TEXT NOT NULL,
  size        BIGINT,
  meta        TEXT,
  effect_id   TEXT COLLATE "C",
  attempt     BIGINT,
  created_at  BIGINT NOT NULL,
  PRIMARY KEY (job_id, key)
);

CREATE TABLE schedules (
  id               TEXT COLLATE "C" PRIMARY KEY,
  owner            TEXT COLLATE "C" NOT NULL DEFAULT '',
  machine_id       TEXT COLLATE "C" NOT NULL,
  input            TEXT NOT NULL,
  cron             TEXT,
  timezone         TEXT,
  every_ms         BIGINT CHECK (every_ms IS NULL OR every_ms > 0),
  overlap          TEXT COLLATE "C" NOT NULL CHECK (overlap IN ('skip', 'buffer-one', 'allow-all', 'cancel-previous')),
  catch_up         TEXT NOT NULL,
  grace_ms         BIGINT NOT NULL CHECK (grace_ms >= 0),
  start_at         BIGINT,
  next_due_at      BIGINT,
  buffered_due_at  BIGINT,
  last_due_at      BIGINT,
  last_job_id      TEXT COLLATE "C",
  missed           BIGINT NOT NULL DEFAULT 0,
  revision         BIGINT NOT NULL CHECK (revision >= 1),
  created_at       BIGINT NOT NULL,
  updated_at       BIGINT NOT NULL,
  CHECK ((cron IS NULL) <> (every_ms IS NULL))
);
CREATE INDEX schedules_due ON schedules (owner, next_due_at) WHERE next_due_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (owner) WHERE buffered_due_at IS NOT NULL;

-- One row per handled occurrence: its key makes an occurrence fire at most once across hosts.
CREATE TABLE schedule_occurrences (
  schedule_id  TEXT COLLATE "C" NOT NULL,
  due_at       BIGINT NOT NULL,
  outcome      TEXT COLLATE "C" NOT NULL CHECK (outcome IN ('started', 'skipped', 'failed')),
  job_id       TEXT COLLATE "C",
  reason       TEXT,
  at           BIGINT NOT NULL,
  UNIQUE (schedule_id, due_at)
);

-- An event id a caller could name is recorded at most once per job, by this key (SQLite schema 10).
CREATE TABLE event_keys (
  job_id    TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_id  TEXT COLLATE "C" NOT NULL,
  revision  BIGINT,
  PRIMARY KEY (job_id, event_id)
);

-- The history. `seq` comes from a sequence: unique and growing, but concurrent writers make rows
-- visible out of seq order, so this store offers no `historySince` (the port's feed).
CREATE SEQUENCE transitions_seq;
CREATE TABLE transitions (
  seq          BIGINT PRIMARY KEY,
  job_id       TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  revision     BIGINT NOT NULL,
  event_id     TEXT COLLATE "C",
  event_type   TEXT COLLATE "C" NOT NULL,
  payload      TEXT NOT NULL,
  from_value   TEXT,
  to_value     TEXT NOT NULL,
  outcome      TEXT COLLATE "C" NOT NULL CHECK (outcome IN ('started', 'applied', 'ignored', 'failed', 'migrated', 'stale')),
  error        TEXT,
  at           BIGINT NOT NULL,
  runner       TEXT COLLATE "C",
  fence        BIGINT,
  payload_hash TEXT,
  event_keyed  BIGINT,
  UNIQUE (job_id, revision)
);

CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, 'external', NULL, NULL,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;

CREATE TABLE effects (
  id                TEXT COLLATE "C" PRIMARY KEY,
  job_id            TEXT COLLATE "C" NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  actor_id          TEXT COLLATE "C" NOT NULL,
  src               TEXT COLLATE "C" NOT NULL,
  kind              TEXT COLLATE "C" NOT NULL DEFAULT 'activity' CHECK (kind IN ('activity', 'child')),
  input             TEXT NOT NULL,
  status            TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'running', 'waiting', 'backoff', 'succeeded', 'failed', 'cancelled')),
  active            INTEGER NOT NULL,
  attempt           INTEGER NOT NULL DEFAULT 0,
  max_attempts      INTEGER NOT NULL,
  unsafe            INTEGER NOT NULL DEFAULT 0,
  next_run_at       BIGINT,
  claimed_by        TEXT COLLATE "C",
  claim_expires_at  BIGINT,
  token             TEXT COLLATE "C",
  output            TEXT,
  error             TEXT,
  created_revision  BIGINT NOT NULL,
  created_at        BIGINT NOT NULL,
  updated_at        BIGINT NOT NULL,
  rowid             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE  -- insertion order, as SQLite's rowid
);
CREATE UNIQUE INDEX effects_token ON effects (token) WHERE token IS NOT NULL;
CREATE INDEX effects_job ON effects (job_id, actor_id);
CREATE INDEX effects_due ON effects (status, next_run_at) WHERE active = 1;
CREATE INDEX effects_pending ON effects (created_at, rowid) WHERE active = 1 AND status = 'pending';

CREATE TABLE effect_attempts (
  effect_id   TEXT COLLATE "C" NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
  attempt     INTEGER NOT NULL,
  runner      TEXT COLLATE "C",
  started_at  BIGINT NOT NULL,
  ended_at    BIGINT,
  outcome     TEXT COLLATE "C" NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'waiting', 'interrupted', 'stale')),
  error       TEXT,
  PRIMARY KEY (effect_id, attempt)
);
