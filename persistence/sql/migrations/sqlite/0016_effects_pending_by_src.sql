-- Spool schema 16: the pending effects indexed by src, then age.
-- Migrations are append-only: never edit a released file, add the next number.

-- Schema 8's `effects_pending (created_at)` gave every pending effect in age order, whatever its
-- src. A batch claim that may take no attempt of a src (at its `activityConcurrency`, or not run
-- by a scoped remote worker) read past every pending row of that src to reach the rows it could
-- take: 2.5 ms at a backlog of 1k, 31 ms at 10k. Keyed by src first, the claim reads the oldest
-- rows of each src it may take, and the poll the oldest of each src that has pending rows (found
-- by seeking from one src to the next): the cost grows with the srcs, not with the backlog.
-- The index replaces schema 8's (one B-tree written per effect, as before).
DROP INDEX effects_pending;
CREATE INDEX effects_pending ON effects (src, created_at) WHERE active = 1 AND status = 'pending';
