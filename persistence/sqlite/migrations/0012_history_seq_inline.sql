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
