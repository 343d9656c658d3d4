-- Spool schema 5: job leases with fencing tokens.
-- Migrations are append-only: never edit a released file, add the next number.

-- A runner (one runtime in one process) that advances a job or runs its activities holds the
-- job's lease: its id, a fencing token that grows with every claim, and an expiry renewed by
-- heartbeat. Every commit and every attempt outcome checks owner and token in its own
-- transaction. A free lease has lease_owner NULL; the fence is kept so the next claim grows it.
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_fence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN lease_until INTEGER;
CREATE INDEX jobs_lease ON jobs (lease_owner, lease_until) WHERE lease_owner IS NOT NULL;

-- The history records which runner made each commit and under which fence: the audit that no
-- job was ever advanced by two owners at once reads these two columns.
ALTER TABLE transitions ADD COLUMN runner TEXT;
ALTER TABLE transitions ADD COLUMN fence INTEGER;
