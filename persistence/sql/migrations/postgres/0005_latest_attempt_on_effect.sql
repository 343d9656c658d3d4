-- Spool Postgres schema 5, the same change as SQLite schema 15: an effect's latest attempt lives
-- on its row, ended or not (outcome, end, error recorded by the statement that records the
-- outcome); its effect_attempts row is written once, when a claim starts the next attempt.
-- Migrations are append-only: never edit a released file, add the next number.

ALTER TABLE effects ADD COLUMN attempt_ended_at BIGINT;
ALTER TABLE effects ADD COLUMN attempt_outcome TEXT COLLATE "C";  -- NULL: running (else an effect_attempts outcome)
ALTER TABLE effects ADD COLUMN attempt_error TEXT;                -- JSON ErrorInfo

-- The end of an effect's latest attempt that may still change (waiting, interrupted) moves onto
-- the effect row; the others keep their row, and the effect row then names no attempt of its own.
UPDATE effects SET attempt_runner = a.runner, attempt_started_at = a.started_at, attempt_ended_at = a.ended_at,
    attempt_outcome = a.outcome, attempt_error = a.error
  FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt AND a.outcome IN ('waiting', 'interrupted');
UPDATE effects SET attempt_runner = NULL, attempt_started_at = NULL
  WHERE attempt_started_at IS NOT NULL AND attempt_outcome IS NULL
    AND EXISTS (SELECT 1 FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt);
DELETE FROM effect_attempts USING effects e
  WHERE effect_attempts.outcome IN ('waiting', 'interrupted') AND e.id = effect_attempts.effect_id AND e.attempt = effect_attempts.attempt;

DROP VIEW attempts;
-- Every attempt of an effect, with its effect's job (a filter on job_id reaches both parts).
CREATE VIEW attempts AS
  SELECT a.effect_id, a.attempt, a.runner, a.started_at, a.ended_at, a.outcome, a.error, e.job_id
    FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
  UNION ALL
  SELECT id, attempt, attempt_runner, attempt_started_at, attempt_ended_at, coalesce(attempt_outcome, 'running'), attempt_error, job_id
    FROM effects WHERE attempt_started_at IS NOT NULL;
