-- Spool on PostgreSQL, schema 2: the history feed (`JobStore.historySince`, the all-jobs stream).
-- Migrations are append-only: never edit a released file, add the next number.
--
-- `seq` (schema 1) comes from a sequence: unique, but concurrent writers commit out of seq order,
-- so a reader that has seen seq n may later meet a committed n-1. The feed reads by `feed_pos`
-- instead: writers leave it NULL (they pay nothing); the feed's reader first runs the sequencer
-- (persistence/postgres/feed.ts), which, under a transaction-scoped advisory lock, numbers every
-- committed row that has none, in seq order, from `history_feed_head`. Sequencer runs are
-- serialised and see only committed rows, so positions become visible in increasing order: a
-- reader never skips one. Positions are stored (SSE ids survive a restart) and never given twice
-- (the head only grows, even when the rows holding the highest are purged).
ALTER TABLE transitions ADD COLUMN feed_pos BIGINT;
CREATE UNIQUE INDEX transitions_feed_pos ON transitions (feed_pos) WHERE feed_pos IS NOT NULL;
CREATE INDEX transitions_unsequenced ON transitions (seq) WHERE feed_pos IS NULL;

CREATE TABLE history_feed_head (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  pos BIGINT NOT NULL
);

-- Rows already there are numbered in seq order now (the migration runs under the migration lock).
UPDATE transitions t SET feed_pos = n.pos
  FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS pos FROM transitions) n
 WHERE t.seq = n.seq;
INSERT INTO history_feed_head (id, pos) SELECT 1, count(*) FROM transitions;
