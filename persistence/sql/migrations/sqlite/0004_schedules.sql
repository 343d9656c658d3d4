-- Spool schema 4: schedules (cron expressions and intervals that start jobs) and their occurrences.
-- Migrations are append-only: never edit a released file, add the next number.

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
CREATE INDEX schedules_due ON schedules (owner, next_due_at) WHERE next_due_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (owner) WHERE buffered_due_at IS NOT NULL;

-- One row per handled occurrence. Its key is what makes an occurrence fire at most once across
-- processes: the row is inserted in the same transaction as the job it starts (whose id is derived
-- from the schedule id and the due time). Rows outlive their schedule (no foreign key), so
-- re-creating a schedule under the same id never fires one of its occurrences twice.
CREATE TABLE schedule_occurrences (
  schedule_id  TEXT    NOT NULL,
  due_at       INTEGER NOT NULL,
  outcome      TEXT    NOT NULL CHECK (outcome IN ('started', 'skipped', 'failed')),
  job_id       TEXT,
  reason       TEXT,
  at           INTEGER NOT NULL,
  UNIQUE (schedule_id, due_at)
) STRICT;
