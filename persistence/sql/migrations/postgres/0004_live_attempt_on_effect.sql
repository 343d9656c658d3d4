-- Spool Postgres schema 4, the same change as SQLite schema 14: an activity's running attempt
-- lives on its effect row (who runs it, since when), and its effect_attempts row is written once,
-- when it ends (or is recorded interrupted). The `attempts` view reads every attempt back.
-- Migrations are append-only: never edit a released file, add the next number.

ALTER TABLE effects ADD COLUMN attempt_runner TEXT COLLATE "C";  -- the runner of attempt `attempt` (kept after it ends)
ALTER TABLE effects ADD COLUMN attempt_started_at BIGINT;        -- ... and when it was claimed

-- A running attempt of an existing database moves onto its effect row.
UPDATE effects SET attempt_runner = a.runner, attempt_started_at = a.started_at
  FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt AND a.outcome = 'running';
DELETE FROM effect_attempts USING effects e
  WHERE effect_attempts.outcome = 'running' AND e.id = effect_attempts.effect_id AND e.attempt = effect_attempts.attempt;

-- Every attempt of an effect, with its effect's job (a filter on job_id reaches both parts).
CREATE VIEW attempts AS
  SELECT a.effect_id, a.attempt, a.runner, a.started_at, a.ended_at, a.outcome, a.error, e.job_id
    FROM effect_attempts a JOIN effects e ON e.id = a.effect_id
  UNION ALL
  SELECT id, attempt, attempt_runner, attempt_started_at, NULL::bigint, 'running'::text, NULL::text, job_id FROM effects
    WHERE attempt_started_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM effect_attempts a WHERE a.effect_id = effects.id AND a.attempt = effects.attempt);
