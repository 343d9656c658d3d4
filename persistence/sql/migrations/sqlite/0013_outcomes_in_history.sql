-- Spool schema 13: an activity's outcome applied in the commit that ends its attempt is recorded
-- by its history row alone, as an event applied as it is accepted already is (schema 7).
-- Migrations are append-only: never edit a released file, add the next number.

-- Until now such an outcome also wrote an inbox row (status applied) in that commit: one more
-- row and two more B-trees (the inbox and its (job_id, event_id) key) in the commit of every
-- step of every job. Its history row now keeps where the event came from (the effect and the
-- attempt), and the `events` view reads them back from it. Outcomes recorded on their own (queued
-- behind other events, or after a refused commit) keep their inbox row as before; the attempt's
-- end, written in the same commit, keeps an outcome from being applied twice.

ALTER TABLE transitions ADD COLUMN source_kind TEXT;  -- NULL: an external event (or no event)
ALTER TABLE transitions ADD COLUMN source_id TEXT;    -- the effect whose attempt produced the event
ALTER TABLE transitions ADD COLUMN attempt INTEGER;   -- ... and which attempt

DROP VIEW events;
CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, coalesce(source_kind, 'external'), source_id, attempt,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;
