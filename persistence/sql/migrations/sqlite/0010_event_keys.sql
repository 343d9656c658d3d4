-- Spool schema 10: an event id is recorded at most once per job, by a key, not by looking first.
-- Migrations are append-only: never edit a released file, add the next number.

-- Every event a caller could name (source 'external') has one row here, whichever table holds the
-- event: its inbox row (queued, `revision` NULL) or its history row (applied as it was accepted,
-- `revision` = the history row's). A second record of the same (job, event id) is a primary key
-- violation, which the store reads as a duplicate. The runtime's own events (timers, activity
-- outcomes, self-sends, parent and child deliveries, cancel) live only in the inbox, whose own
-- UNIQUE (job_id, event_id) keeps them; their ids are reserved (`spool.`, `timer~`, `effect~`, ...),
-- so they never meet a caller's.
--
-- One exception keeps the common send as cheap as before: an id the runtime made up
-- (`r<revision>.<uuid v7>`) applied at the revision it names is keyed by the history's primary
-- key (job_id, revision) and gets no row here (see docs/ARCHITECTURE.md, "The store contract").
CREATE TABLE event_keys (
  job_id    TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  event_id  TEXT    NOT NULL,
  revision  INTEGER,                               -- the history row that records it, or NULL: its inbox row does
  PRIMARY KEY (job_id, event_id)
) STRICT, WITHOUT ROWID;

-- The keys already recorded (OR IGNORE: a file that somehow holds an id twice still opens; the
-- crash audit reports such a file).
INSERT OR IGNORE INTO event_keys (job_id, event_id, revision)
  SELECT job_id, event_id, revision FROM transitions WHERE event_keyed = 1;
INSERT OR IGNORE INTO event_keys (job_id, event_id, revision)
  SELECT job_id, event_id, NULL FROM inbox WHERE source_kind = 'external';

-- The key table replaces the history's event key index; `event_keyed` is no longer written.
DROP INDEX transitions_event_key;
