/**
 * Following the durable history feed from the terminal (`spool tail`, `spool show --watch`,
 * `spool inspect`): every job's commits, made by any process, in commit order, until stopped. It
 * reads the history a page at a time (`Runtime.historySince`) and waits on the store's change
 * signal between pages. The all-jobs event stream reads the same feed.
 */
import type { FeedRecord, Runtime } from '../index.ts';
import { ChangeSignal } from '../server/changes.ts';

/** What the history feed can be filtered by (machine, job, outcomes, page size). */
export type FeedFilter = NonNullable<Parameters<Runtime['historySince']>[1]>;

/** The highest seq written so far (a scan that keeps no row): follow from here to see only new commits. */
export async function headSeq(runtime: Runtime): Promise<number> {
  let cursor = 0;
  for (;;) {
    const page = await runtime.historySince(cursor, { limit: 1000, outcomes: [] });
    if (page.next === cursor) return cursor;
    cursor = page.next;
  }
}

/**
 * Hand each page of records after `cursor` that `filter` selects to `onPage`, in commit order,
 * waiting for the next commit (this process's, or another's through the store's change counter)
 * when there is none, until `signal` aborts or `onPage` resolves true.
 */
export async function followFeed(
  runtime: Runtime,
  cursor: number,
  filter: FeedFilter,
  signal: AbortSignal,
  onPage: (records: readonly FeedRecord[]) => boolean | void | Promise<boolean | void>,
): Promise<void> {
  const changes = new ChangeSignal(runtime, 100);
  try {
    while (!signal.aborted) {
      const seen = changes.version;
      const page = await runtime.historySince(cursor, filter);
      if (page.records.length > 0 && (await onPage(page.records)) === true) return;
      const moved = page.next !== cursor;
      cursor = page.next;
      if (!moved) await changes.wait(seen, 1000, signal);
    }
  } finally {
    changes.close();
  }
}

/** `followFeed` a record at a time: hand every commit after `from` to `each`, until `signal` aborts. */
export async function followHistory(
  runtime: Runtime,
  from: number,
  filter: FeedFilter,
  signal: AbortSignal,
  each: (record: FeedRecord) => void | Promise<void>,
): Promise<void> {
  await followFeed(runtime, from, filter, signal, async (records) => {
    for (const r of records) await each(r);
  });
}
