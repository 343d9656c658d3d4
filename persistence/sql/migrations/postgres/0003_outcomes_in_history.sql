-- Spool Postgres schema 3, the same change as SQLite schema 13: an activity's outcome applied in
-- the commit that ends its attempt is recorded by its history row alone, as an event applied as it
-- is accepted already is. Its history row keeps where the event came from (the effect and the
-- attempt), and the `events` view reads them back from it. Outcomes recorded on their own (queued
-- behind other events, or after a refused commit) keep their inbox row as before.
-- (Numbered 3: number 2 is taken by the history feed, 0002_history_feed.sql. The runner applies
-- every file above the database's highest version, in order; numbers need not be contiguous.)
-- Migrations are append-only: never edit a released file, add the next number.

ALTER TABLE transitions ADD COLUMN source_kind TEXT COLLATE "C";  -- NULL: an external event (or no event)
ALTER TABLE transitions ADD COLUMN source_id TEXT COLLATE "C";    -- the effect whose attempt produced the event
ALTER TABLE transitions ADD COLUMN attempt BIGINT;                -- ... and which attempt

DROP VIEW events;
CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, coalesce(source_kind, 'external'), source_id, attempt,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;
