-- Spool schema 15: an effect's latest attempt lives on its row, ended or not; an effect_attempts
-- row is written once, when a claim starts the next attempt. Migrations are append-only: never
-- edit a released file, add the next number.

-- Schema 14 kept only the running attempt on the effect row, and inserted its row when it ended:
-- still one insert of a second table (and its primary key) in the commit of every step. Now the
-- statement that records the outcome on the effect row records the attempt's end there too
-- (outcome, end, error), and the attempt's row is written by the claim of the next attempt (a
-- retry, a takeover), which rewrites the effect row anyway. Most activities succeed at their
-- first attempt: they never write an effect_attempts row. The `attempts` view reads both.

ALTER TABLE effects ADD COLUMN attempt_ended_at INTEGER;
ALTER TABLE effects ADD COLUMN attempt_outcome TEXT;  -- NULL: running (else an effect_attempts outcome)
ALTER TABLE effects ADD COLUMN attempt_error TEXT;    -- JSON ErrorInfo

-- The end of an effect's latest attempt that may still change (waiting for its token, or
-- interrupted with a late outcome to come) moves onto the effect row; the others keep their row,
-- and the effect row then names no attempt of its own.
UPDATE effects SET
    (attempt_runner, attempt_started_at, attempt_ended_at, attempt_outcome, attempt_error) =
      (SELECT a.runner, a.started_at, a.ended_at, a.outcome, a.error FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt)
  WHERE id IN (SELECT effect_id FROM effect_attempts WHERE outcome IN ('waiting', 'interrupted'))
    AND EXISTS (SELECT 1 FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt AND a.outcome IN ('waiting', 'interrupted'));
UPDATE effects SET attempt_runner = NULL, attempt_started_at = NULL
  WHERE attempt_started_at IS NOT NULL AND attempt_outcome IS NULL
    AND EXISTS (SELECT 1 FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt);
DELETE FROM effect_attempts WHERE outcome IN ('waiting', 'interrupted')
  AND EXISTS (SELECT 1 FROM effects e WHERE e.id = effect_attempts.effect_id AND e.attempt = effect_attempts.attempt);

DROP VIEW attempts;
-- Every attempt of an effect, with its effect's job (a filter on job_id reaches both parts).
CREATE VIEW attempts AS
  SELECT a.effect_id, a.attempt, a.runner, a.started_at, a.ended_at, a.outcome, a.error, e.job_id
    FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
  UNION ALL
  SELECT id, attempt, attempt_runner, attempt_started_at, attempt_ended_at, coalesce(attempt_outcome, 'running'), attempt_error, job_id
    FROM effects WHERE attempt_started_at IS NOT NULL;
