-- Spool schema 11: a global, growing sequence over history rows (the all-jobs event stream).
-- Migrations are append-only: never edit a released file, add the next number.

-- Every history row written from now on gets `seq`, one more than the highest ever given, in the
-- transaction that writes it. Writers are serialised, so rows become visible in `seq` order: a
-- reader that has seen `seq` n has seen every committed row below it (`JobStore.historySince`).
-- Rows written before this schema keep a NULL seq (their jobs' own history still has them).
ALTER TABLE transitions ADD COLUMN seq INTEGER;
CREATE UNIQUE INDEX transitions_seq ON transitions (seq) WHERE seq IS NOT NULL;

-- The highest seq of a deleted row (a purged job's), when it was the highest there was: a seq
-- is never given twice, even after its row is gone. Written only when that row is deleted.
CREATE TABLE history_seq_floor (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL
) STRICT;

CREATE TRIGGER transitions_seq_assign AFTER INSERT ON transitions FOR EACH ROW
BEGIN
  UPDATE transitions
     SET seq = max(coalesce((SELECT max(seq) FROM transitions WHERE seq IS NOT NULL), 0),
                   coalesce((SELECT seq FROM history_seq_floor WHERE id = 1), 0)) + 1
   WHERE job_id = NEW.job_id AND revision = NEW.revision;
END;

CREATE TRIGGER transitions_seq_keep_floor BEFORE DELETE ON transitions FOR EACH ROW
  WHEN OLD.seq IS NOT NULL AND OLD.seq = (SELECT max(seq) FROM transitions WHERE seq IS NOT NULL)
BEGIN
  INSERT INTO history_seq_floor (id, seq) VALUES (1, OLD.seq)
    ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq);
END;
