-- Spool schema 8: due activities found in order without sorting every pending one.
-- Migrations are append-only: never edit a released file, add the next number.

-- `dueEffects` reads pending effects oldest first: this index gives that order, so a round reads
-- only as many rows as it can start, however many wait (it sorted all of them before).
CREATE INDEX effects_pending ON effects (created_at) WHERE active = 1 AND status = 'pending';
