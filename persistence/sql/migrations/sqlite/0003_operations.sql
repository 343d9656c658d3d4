-- Spool schema 3: operations on work that is dead, stuck or unwanted.
-- Migrations are append-only: never edit a released file, add the next number.

-- A suspended job keeps accepting events (they stay pending) but processes none, fires no
-- timers (they stay scheduled with their deadlines) and starts no activity attempts until it is
-- resumed. NULL: not suspended.
ALTER TABLE jobs ADD COLUMN suspended_at INTEGER;
ALTER TABLE jobs ADD COLUMN suspend_reason TEXT;

-- Retention (`purge --older-than`) reads finished jobs by age.
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status <> 'active';
-- `list --suspended` and the suspension checks of the worker's queries.
CREATE INDEX jobs_suspended ON jobs (id) WHERE suspended_at IS NOT NULL;
