-- Spool Postgres schema 6, the same change as SQLite schema 16: the pending effects indexed by
-- src, then age, then insertion order (the order the claim and the poll read them in, per src),
-- replacing schema 1's `effects_pending (created_at, rowid)`.
-- Migrations are append-only: never edit a released file, add the next number.

DROP INDEX effects_pending;
CREATE INDEX effects_pending ON effects (src, created_at, rowid) WHERE active = 1 AND status = 'pending';
