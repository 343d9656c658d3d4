-- Spool schema 1: jobs, their durable inbox, their history.
-- Migrations are append-only: never edit a released file, add the next number.

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
) STRICT;

CREATE UNIQUE INDEX jobs_idempotency ON jobs (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_machine ON jobs (machine_id, machine_version);
CREATE INDEX jobs_status ON jobs (status, id);

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

CREATE INDEX inbox_pending ON inbox (job_id, seq) WHERE status = 'pending';

CREATE TABLE transitions (
  job_id      TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  revision    INTEGER NOT NULL,
  event_id    TEXT,
  event_type  TEXT    NOT NULL,
  payload     TEXT    NOT NULL,                  -- JSON, sensitive fields redacted
  from_value  TEXT,                              -- JSON
  to_value    TEXT    NOT NULL,                  -- JSON
  outcome     TEXT    NOT NULL CHECK (outcome IN ('started', 'applied', 'ignored', 'failed', 'migrated', 'stale')),
  error       TEXT,                              -- JSON ErrorInfo
  at          INTEGER NOT NULL,
  PRIMARY KEY (job_id, revision)
) STRICT, WITHOUT ROWID;
