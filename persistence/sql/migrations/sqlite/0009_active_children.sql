-- Spool schema 9: active child jobs, for the recovery of orphans.
-- Migrations are append-only: never edit a released file, add the next number.

-- A child job is stopped after the commit in which its parent left the invoking state (or ended).
-- A crash between the two leaves it active under an inactive invocation: recovery finds such
-- jobs through this index (active child jobs only, so it stays small) and stops them.
CREATE INDEX jobs_active_children ON jobs (id) WHERE status = 'active' AND parent_job_id IS NOT NULL;
