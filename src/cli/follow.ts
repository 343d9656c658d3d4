/**
 * Following the durable history feed from the terminal (`spool tail`, `spool inspect`): every
 * job's commits, made by any process, in commit order, until stopped. It reads the history a
 * page at a time (`Runtime.historySince`) and waits on the store's change signal between pages.
 */
import type { FeedRecord, Runtime } from '../index.ts';
import { ChangeSignal } from '../server/changes.ts';

/** The highest seq written so far (a scan that keeps no row): follow from here to see only new commits. */
export async function headSeq(runtime: Runtime): Promise<number> {
  let cursor = 0;
  for (;;) {
    const page = await runtime.historySince(cursor, { limit: 1000, outcomes: [] });
    if (page.next === cursor) return cursor;
    cursor = page.next;
  }
}

/** Hand every commit after `from` that `filter` selects to `each`, in order, until `signal` aborts. */
export async function followHistory(
  runtime: Runtime,
  from: number,
  filter: Parameters<Runtime['historySince']>[1],
  signal: AbortSignal,
  each: (record: FeedRecord) => void | Promise<void>,
): Promise<void> {
  const changes = new ChangeSignal(runtime, 100);
  try {
    let cursor = from;
    while (!signal.aborted) {
      const seen = changes.version;
      const page = await runtime.historySince(cursor, filter);
      for (const r of page.records) await each(r);
      const moved = page.next !== cursor;
      cursor = page.next;
      if (!moved) await changes.wait(seen, 1000, signal);
    }
  } finally {
    changes.close();
  }
}
