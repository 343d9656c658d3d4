-- Spool schema 6: a restart that does not read every waiting job.
-- Migrations are append-only: never edit a released file, add the next number.

-- Recovery lists the (machine, version) pairs of active jobs by stepping through this index (one
-- probe per pair, not one row per job) and counts each pair only up to a bound.
CREATE INDEX jobs_active_versions ON jobs (owner, machine_id, machine_version) WHERE status = 'active';
-- Recovery re-checks quarantined jobs (they may be released): found without scanning the others.
CREATE INDEX jobs_quarantined ON jobs (id) WHERE quarantine IS NOT NULL;
