/**
 * The history feed on Postgres under concurrent writers (persistence/drivers/pg/feed.ts): a row
 * whose `seq` was taken before others' but committed after them is still seen, after them; and
 * two stores committing at once while a third follows the feed: every history row seen exactly
 * once, in growing positions, none skipped.
 */
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { setup } from 'xstate';
import type { FeedRecord, Runtime } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';
import { dbArgFor } from './helpers/stores.ts';

const ping = setup({}).createMachine({ id: 'ping', initial: 'on', states: { on: { on: { PING: { actions: () => undefined } } } } });

const res = new Resources();
afterEach(() => res.dispose());

/** A runtime on its own PostgresStore (its own pool) on the database standing for `path`. */
async function runtimeOn(path: string): Promise<Runtime> {
  return res.runtime({ store: await res.sqlite(path), machines: [ping], recover: false });
}

/** A raw connection to the database standing for `path`, closed after the test. */
async function rawClient(path: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: await dbArgFor(path) });
  await client.connect();
  res.track({ close: () => client.end() });
  return client;
}

/** Read the feed from `after` until a page moves the cursor no further. */
async function drain(runtime: Runtime, after: number, into: FeedRecord[]): Promise<number> {
  for (;;) {
    const page = await runtime.historySince(after, { limit: 7 });
    into.push(...page.records);
    if (page.next === after) return after;
    after = page.next;
  }
}

describe('PostgresStore: the history feed under concurrent writers', () => {
  it('sees a row committed after rows whose seq is higher, after them (a reader never moves past it)', async () => {
    const path = res.dbPath();
    const runtime = await runtimeOn(path);
    const job = await runtime.start('ping', {});
    const seen: FeedRecord[] = [];
    let cursor = await drain(runtime, 0, seen);
    // A writer takes its seq first and commits last (as a slow transaction of another host would).
    const slow = await rawClient(path);
    await slow.query('BEGIN');
    const taken = await slow.query<{ seq: string }>(
      `INSERT INTO transitions (seq, job_id, revision, event_type, payload, to_value, outcome, at)
       VALUES (nextval('transitions_seq'), $1, 100, 'SLOW', '{}', '"on"', 'applied', 0) RETURNING seq`,
      [job.id],
    );
    await runtime.send(job.id, { type: 'PING' });
    cursor = await drain(runtime, cursor, seen);
    expect(seen.map((r) => r.revision)).toEqual([1, 2]);
    const fast = (await runtime.history(job.id)).at(-1)!;
    expect(fast.revision).toBe(2);
    await slow.query('COMMIT');
    await drain(runtime, cursor, seen);
    // The slow row's seq is below the PING row's, yet the reader that had passed the PING row sees it.
    expect(seen.map((r) => r.revision)).toEqual([1, 2, 100]);
    expect(Number(taken.rows[0]!.seq)).toBeLessThan(Number((await slow.query('SELECT seq FROM transitions WHERE revision = 2')).rows[0].seq));
    const positions = seen.map((r) => r.seq);
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
  });

  it('two stores committing at once while a third follows: every row seen exactly once, in growing positions', async () => {
    const path = res.dbPath();
    const writers = [await runtimeOn(path), await runtimeOn(path)];
    const reader = await runtimeOn(path);
    const seen: FeedRecord[] = [];
    let cursor = 0;
    let writing = true;
    const follow = (async () => {
      while (writing) cursor = await drain(reader, cursor, seen);
      cursor = await drain(reader, cursor, seen);
    })();
    const jobsOf = await Promise.all(
      writers.map(async (runtime) => {
        const ids: string[] = [];
        await Promise.all(
          Array.from({ length: 6 }, async () => {
            const job = await runtime.start('ping', {});
            ids.push(job.id);
            for (let i = 0; i < 8; i++) await runtime.send(job.id, { type: 'PING' });
          }),
        );
        return ids;
      }),
    );
    writing = false;
    await follow;
    const expected: string[] = [];
    for (const id of jobsOf.flat()) for (const r of await reader.history(id)) expected.push(`${id}:${r.revision}`);
    expect(expected).toHaveLength(2 * 6 * 9);
    const keys = seen.map((r) => `${r.jobId}:${r.revision}`);
    expect(new Set(keys).size).toBe(keys.length); // no duplicate
    expect([...keys].sort()).toEqual([...expected].sort()); // no gap
    const positions = seen.map((r) => r.seq);
    for (let i = 1; i < positions.length; i++) expect(positions[i]!).toBeGreaterThan(positions[i - 1]!);
    // Each job's rows in its revision order.
    for (const id of jobsOf.flat()) {
      const revisions = seen.filter((r) => r.jobId === id).map((r) => r.revision);
      expect(revisions).toEqual([...revisions].sort((a, b) => a - b));
    }
  });
});
