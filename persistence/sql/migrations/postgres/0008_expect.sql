-- Spool Postgres schema 8: spool_expect(ok), which fails the statement it is in, with SQLSTATE
-- SPX01, unless `ok` is true. A step's commit is sent whole, its COMMIT included, before the
-- answer to its first statement (the attempt's end and the job's update) has come back: the rest
-- was written as if that statement did what it was expected to, and that statement itself fails
-- unless it did (persistence/drivers/pg/pairs.ts, `expectedPairOf`). The transaction is then rolled
-- back and run again, waiting for each answer (persistence/drivers/pg/deferred.ts, "Sent ahead").
-- Migrations are append-only: never edit a released file, add the next number.

CREATE OR REPLACE FUNCTION spool_expect(ok boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'spool: a commit sent ahead of its answers found the job not as it expected; it runs again'
      USING ERRCODE = 'SPX01';
  END IF;
  RETURN TRUE;
END
$$;
