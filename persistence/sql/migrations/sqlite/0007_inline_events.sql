-- Spool schema 7: an event applied in the commit that accepts it is recorded once, in history.
-- Migrations are append-only: never edit a released file, add the next number.

-- An external event that is applied the moment it is accepted (nothing queued before it, the job
-- free) has no inbox row: its history row is its record. `payload_hash` marks such a row (NULL on
-- every other history row) and keeps the hash a repeated event id is compared with.
ALTER TABLE transitions ADD COLUMN payload_hash TEXT;

-- How such an event is found by id. An id Spool made up names the revision it was applied at
-- (`r<revision>.<uuid>`): found by the primary key, no index entry to write. Any other id
-- (`event_keyed = 1`) has an entry in this unique index.
ALTER TABLE transitions ADD COLUMN event_keyed INTEGER;
CREATE UNIQUE INDEX transitions_event_key ON transitions (job_id, event_id) WHERE event_keyed = 1;

-- Every accepted event of every job, whichever table holds it: the inbox (queued events and the
-- runtime's own) and the history rows of events applied as they were accepted (seq NULL).
CREATE VIEW events AS
  SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
         error, revision, accepted_at, processed_at
    FROM inbox
  UNION ALL
  SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, 'external', NULL, NULL,
         error, revision, at, at
    FROM transitions WHERE payload_hash IS NOT NULL;
