-- Spool schema 12: a history row's seq is written by the INSERT that writes the row.
-- Migrations are append-only: never edit a released file, add the next number.

-- Schema 11 gave the seq in an AFTER INSERT trigger: one more statement per history row, and the
-- row written twice (inserted, then updated with its seq). The store's INSERT now computes the
-- same value itself (one more than the highest given, or than history_seq_floor's after a purge;
-- see HISTORY_SEQ in SqliteStore.ts), so the row is written once. The rest of schema 11 stays: the
-- unique index on seq (the feed's order, and the proof a seq is never given twice) and the floor
-- kept when the row holding the highest seq is deleted. A row written without a seq (by hand)
-- simply stays out of the feed.
DROP TRIGGER transitions_seq_assign;
