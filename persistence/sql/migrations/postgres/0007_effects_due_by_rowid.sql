-- Spool Postgres schema 7: due effects indexed by status, then due time, then insertion order
-- (the order the batch claim and the poll read backoff rows in: `ORDER BY next_run_at, rowid`),
-- replacing schema 1's `effects_due (status, next_run_at)`. SQLite's index ends with the rowid
-- already. Without it, a claim sorted every due backoff row to take the oldest few: with retries
-- waiting behind a backlog, a thousand rows and 10k buffer hits per claim.
-- Migrations are append-only: never edit a released file, add the next number.

DROP INDEX effects_due;
CREATE INDEX effects_due ON effects (status, next_run_at, rowid) WHERE active = 1;
