/**
 * The history feed on Postgres (`JobStore.historySince`), by `transitions.feed_pos` (schema 2).
 *
 * A history row's `seq` comes from a sequence, and concurrent writers commit out of seq order: a
 * reader that moved past seq n could later meet a committed n-1. So writers leave `feed_pos` NULL
 * and pay nothing; a reader first runs the {@link SEQUENCER}: under a transaction-scoped advisory
 * lock it numbers every committed row that has no position, in seq order, from
 * `history_feed_head`. Runs are serialised (the lock) and each sees only rows committed before it
 * took the lock, so a run's positions are all above every earlier run's and become visible at
 * once, when it commits: the positions a reader sees are always every position given so far
 * (less purged rows), and a reader that passes `next` back never skips a row nor sees one twice.
 * Positions are stored, so the all-jobs stream's event ids survive a restart.
 */
import type pg from 'pg';
import type { FeedPage, HistoryFeedFilter } from '../../../src/ports/queries.ts';
import { feedPageOf } from '../../sql/feed.ts';
import type { Row } from '../../sql/records.ts';

/** The advisory lock key of the sequencer (any fixed number other than the migration's). */
const SEQUENCER_LOCK = 7_270_517;

/** At most this many rows numbered per sequencer run (a run that numbers as many runs again). */
const SEQUENCER_BATCH = 10_000;

/** Whether any committed history row waits for a position (cheap: a partial index). */
const UNSEQUENCED = 'SELECT EXISTS (SELECT 1 FROM transitions WHERE feed_pos IS NULL) AS any';

/** Number the committed rows without a position, in seq order, after the highest position given. */
const SEQUENCER = `WITH todo AS (
    SELECT seq, row_number() OVER (ORDER BY seq) AS n
      FROM (SELECT seq FROM transitions WHERE feed_pos IS NULL ORDER BY seq LIMIT $1) s
  ), head AS (
    UPDATE history_feed_head SET pos = pos + (SELECT count(*) FROM todo) WHERE id = 1
    RETURNING pos - (SELECT count(*) FROM todo) AS base
  )
  UPDATE transitions t SET feed_pos = head.base + todo.n
    FROM todo, head WHERE t.seq = todo.seq AND t.feed_pos IS NULL`;

const HEAD = 'SELECT pos FROM history_feed_head WHERE id = 1';

const PAGE = `SELECT t.*, j.machine_id FROM transitions t JOIN jobs j ON j.id = t.job_id
  WHERE t.feed_pos > $1 AND t.feed_pos <= $2
    AND ($3::int = 1 OR j.owner = $4::text) AND ($5::text IS NULL OR j.machine_id = $5::text) AND ($6::text IS NULL OR t.job_id = $6::text)
    AND ($7::text[] IS NULL OR t.outcome = ANY ($7::text[]))
  ORDER BY t.feed_pos LIMIT $8`;

/** Give a position to every history row committed before this call (see the module's comment). */
export async function sequenceHistory(pool: pg.Pool): Promise<void> {
  const pending = await pool.query<{ any: boolean }>({ name: 'feed_unsequenced', text: UNSEQUENCED });
  if (!pending.rows[0]?.any) return;
  for (;;) {
    const numbered = await inTransaction(pool, 'BEGIN', async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SEQUENCER_LOCK]);
      // A statement of its own: its snapshot is taken after the lock, so it sees every earlier run.
      return (await client.query({ name: 'feed_sequencer', text: SEQUENCER, values: [SEQUENCER_BATCH] })).rowCount ?? 0;
    });
    if (numbered < SEQUENCER_BATCH) return;
  }
}

/** One page of the feed after position `after`, scanning at most `scan` positions; the head and the page from one snapshot. */
export async function readFeedPage(pool: pg.Pool, after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
  await sequenceHistory(pool);
  return inTransaction(pool, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', async (client) => {
    const head = Number((await client.query<{ pos: number }>({ name: 'feed_head', text: HEAD })).rows[0]?.pos ?? 0);
    const upto = Math.min(head, after + scan);
    const rows = (
      await client.query<Row>({
        name: 'feed_page',
        text: PAGE,
        values: [after, upto, filter.owner === undefined ? 1 : 0, filter.owner ?? '', filter.machineId ?? null, filter.jobId ?? null, filter.outcomes ?? null, limit],
      })
    ).rows;
    return feedPageOf(rows, 'feed_pos', after, upto, limit);
  });
}

/** Run `fn` in a transaction on a connection of its own (rolled back if it throws). */
async function inTransaction<T>(pool: pg.Pool, begin: string, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: unknown;
  try {
    await client.query(begin);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
    throw error;
  } finally {
    client.release(broken instanceof Error ? broken : undefined);
  }
}
