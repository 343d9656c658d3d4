-- Spool schema 12: the history is kept in seq order; a row's seq is its key, written by its INSERT.
-- Migrations are append-only: never edit a released file, add the next number.

-- Schema 11 gave each history row its global seq in an AFTER INSERT trigger (the row written, then
-- updated) and kept the seq in a second index beside the (job_id, revision) key. Here the seq is
-- the table's rowid: the store's INSERT computes it (one more than the highest given, or than
-- history_seq_floor's after a purge; HISTORY_SEQ in SqliteStore.ts), new rows are appended at the
-- end of the table, and (job_id, revision), a job's history in order, is the secondary index.
-- One row write and two B-trees per history row instead of two writes and three.
--
-- Rows written before schema 11 had no seq: they get negative ones here (below every seq the feed
-- gives, `historySince` starts after 0), so they stay out of the all-jobs feed as before.

DROP VIEW events;
DROP TRIGGER transitions_seq_assign;
DROP TRIGGER transitions_seq_keep_floor;
DROP INDEX transitions_seq;

CREATE TABLE transitions_by_seq (
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
  event_keyed  INTEGER,                            -- schema 7, no longer written (schema 10)
  UNIQUE (job_id, revision)
) STRICT;

INSERT INTO transitions_by_seq (seq, job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at,
    runner, fence, payload_hash, event_keyed)
  SELECT coalesce(seq, -row_number() OVER (ORDER BY seq IS NOT NULL, job_id, revision)), job_id, revision, event_id, event_type,
         payload, from_value, to_value, outcome, error, at, runner, fence, payload_hash, event_keyed
    FROM transitions;
DROP TABLE transitions;
ALTER TABLE transitions_by_seq RENAME TO transitions;

-- The highest seq of a deleted row (a purged job's), when it was the highest there was: a seq
-- is never given twice, even after its row is gone (as in schema 11).
CREATE TRIGGER transitions_seq_keep_floor BEFORE DELETE ON transitions FOR EACH ROW
  WHEN OLD.seq = (SELECT max(seq) FROM transitions)
BEGIN
  INSERT INTO history_seq_floor (id, seq) VALUES (1, OLD.seq)
    ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq);
END;

-- As in schema 7: every accepted event of every job, whichever table holds it.
CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, 'external', NULL, NULL,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;

-- An effect's completion token is unique among the tokens there are: a partial index of the
-- waiting effects that have one, instead of schema 2's UNIQUE column, whose index took an entry
-- (a NULL) for every effect ever created, one more page written by every commit that creates one.
-- SQLite drops a constraint only by rebuilding the table; effect_attempts is rebuilt with it, so
-- that dropping the old effects table cascades to no attempt row.
CREATE TABLE effects_12 (
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
) STRICT;
INSERT INTO effects_12 SELECT id, job_id, actor_id, src, kind, input, status, active, attempt, max_attempts, unsafe, next_run_at,
    claimed_by, claim_expires_at, token, output, error, created_revision, created_at, updated_at
  FROM effects;

CREATE TABLE effect_attempts_12 (
  effect_id   TEXT    NOT NULL REFERENCES effects_12 (id) ON DELETE CASCADE,
  attempt     INTEGER NOT NULL,
  runner      TEXT,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  outcome     TEXT    NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'waiting', 'interrupted', 'stale')),
  error       TEXT,
  PRIMARY KEY (effect_id, attempt)
) STRICT, WITHOUT ROWID;
INSERT INTO effect_attempts_12 SELECT effect_id, attempt, runner, started_at, ended_at, outcome, error FROM effect_attempts;

DROP TABLE effect_attempts;
DROP TABLE effects;
-- Renaming the new effects table renames effect_attempts_12's reference to it as well.
ALTER TABLE effects_12 RENAME TO effects;
ALTER TABLE effect_attempts_12 RENAME TO effect_attempts;

CREATE UNIQUE INDEX effects_token ON effects (token) WHERE token IS NOT NULL;
CREATE INDEX effects_job ON effects (job_id, actor_id);
CREATE INDEX effects_due ON effects (status, next_run_at) WHERE active = 1;
CREATE INDEX effects_pending ON effects (created_at) WHERE active = 1 AND status = 'pending';
