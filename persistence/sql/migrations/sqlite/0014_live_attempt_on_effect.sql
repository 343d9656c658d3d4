-- Spool schema 14: an activity's running attempt lives on its effect row; an effect_attempts row
-- is written once, when the attempt ends. Migrations are append-only: never edit a released file,
-- add the next number.

-- Until now a claim inserted an attempt row ('running') and the attempt's end updated it: two
-- writes of a second table (and its primary key) per attempt, in two commits. Now the claim, which
-- writes the effect row anyway, also writes who runs the attempt and since when; the attempt's end
-- inserts its row (started_at, ended_at, outcome) in the commit that records the outcome, and the
-- recovery of a crashed attempt inserts its 'interrupted' row then. The `attempts` view reads every
-- attempt back: the ended rows, and the running one from its effect row.

ALTER TABLE effects ADD COLUMN attempt_runner TEXT;         -- the runner of attempt `attempt` (kept after it ends)
ALTER TABLE effects ADD COLUMN attempt_started_at INTEGER;  -- ... and when it was claimed

-- A running attempt of an existing database moves onto its effect row.
UPDATE effects SET
    attempt_runner = (SELECT a.runner FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt),
    attempt_started_at = (SELECT a.started_at FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt)
  WHERE id IN (SELECT effect_id FROM effect_attempts WHERE outcome = 'running');
DELETE FROM effect_attempts WHERE outcome = 'running'
  AND EXISTS (SELECT 1 FROM effects e WHERE e.id = effect_attempts.effect_id AND e.attempt = effect_attempts.attempt);

-- Every attempt of an effect, with its effect's job (a filter on job_id reaches both parts).
CREATE VIEW attempts AS
  SELECT a.effect_id, a.attempt, a.runner, a.started_at, a.ended_at, a.outcome, a.error, e.job_id
    FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
  UNION ALL
  SELECT id, attempt, attempt_runner, attempt_started_at, NULL, 'running', NULL, job_id FROM effects
    WHERE attempt_started_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt);
