-- Spool schema 2: durable effects (activities and their attempts), durable timers,
-- notes (visible explanations) and assets.

CREATE TABLE effects (
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
  token             TEXT UNIQUE,                 -- out-of-band completion token while waiting
  output            TEXT,
  error             TEXT,
  created_revision  INTEGER NOT NULL,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX effects_job ON effects (job_id, actor_id);
CREATE INDEX effects_due ON effects (status, next_run_at) WHERE active = 1;

CREATE TABLE effect_attempts (
  effect_id   TEXT    NOT NULL REFERENCES effects (id) ON DELETE CASCADE,
  attempt     INTEGER NOT NULL,
  runner      TEXT,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  outcome     TEXT    NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'waiting', 'interrupted', 'stale')),
  error       TEXT,
  PRIMARY KEY (effect_id, attempt)
) STRICT, WITHOUT ROWID;

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
CREATE INDEX timers_due ON timers (due_at) WHERE status = 'scheduled';
CREATE INDEX timers_job ON timers (job_id, key);

CREATE TABLE notes (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id   TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  kind     TEXT    NOT NULL,
  message  TEXT    NOT NULL,
  at       INTEGER NOT NULL
) STRICT;
CREATE INDEX notes_job ON notes (job_id, id);

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
