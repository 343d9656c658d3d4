import type { FeedPage } from '../../src/ports/store.ts';
import { toTransitionRecord, type Row } from './records.ts';

/**
 * A feed page from the rows read (`t.*` and `machine_id`, in feed order, at most `limit`) whose
 * feed position is in column `position`, after `after` up to `upto`: `next` is the last row's
 * position when the page is full, else `upto` (everything up to it was looked at). Both stores.
 */
export function feedPageOf(rows: readonly Row[], position: string, after: number, upto: number, limit: number): FeedPage {
  const records = rows.map((row) => ({ ...toTransitionRecord(row), seq: row[position] as number, machineId: row['machine_id'] as string }));
  return { records, next: records.length === limit ? records.at(-1)!.seq : Math.max(after, upto) };
}
