/**
 * The history feed: every job's commits of one owner in one growing order (the history's global
 * `seq`), a page at a time after a cursor. What the all-jobs event stream of `spool serve` reads.
 */
import type { FeedPage, JobStore, TransitionOutcome } from '../ports/store.ts';
import { ValidationError } from '../base/errors.ts';
import { requireOptions } from './intake.ts';

/** Which commits a page of the feed holds, and how many at most (1-1000, default 100). */
export interface HistoryFeedOptions {
  limit?: number;
  machineId?: string;
  jobId?: string;
  outcomes?: TransitionOutcome[];
}

/** One page after `after` (a record's `seq`; 0 from the start), its options checked first. */
export async function readHistoryFeed(store: JobStore, owner: string | null, after: number, filter: HistoryFeedOptions): Promise<FeedPage> {
  const { limit = 100, ...rest } = requireOptions(filter, 'historySince', ['limit', 'machineId', 'jobId', 'outcomes']);
  if (!Number.isSafeInteger(after) || after < 0) throw new ValidationError('historySince: after must be a non-negative integer (a seq).');
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError('historySince: limit must be an integer from 1 to 1000.');
  if (!store.historySince) throw new ValidationError(`historySince: the store ${store.description} keeps no global order of commits.`);
  // A filter that matches little reads at most this many seqs per page.
  return store.historySince(after, limit, limit * 100, { ...rest, owner });
}
