import Database from 'better-sqlite3';
import type { FeedPage, HistoryFeedFilter } from '../../../src/ports/store.ts';
import type { Row } from '../../sql/records.ts';
import { feedPageOf } from '../../sql/feed.ts';
import { statements } from './prepared.ts';

/** The statements of `historySince`: the history's head and a page of it. */
export function prepareFeed(db: Database.Database) {
  return statements({
    head: db.prepare('SELECT max(seq) AS seq FROM transitions'),
    page: db.prepare(`SELECT t.*, j.machine_id FROM transitions t JOIN jobs j ON j.id = t.job_id
      WHERE t.seq > @after AND t.seq <= @upto
        AND (@all = 1 OR j.owner = @owner) AND (@machine IS NULL OR j.machine_id = @machine) AND (@job IS NULL OR t.job_id = @job)
        AND (@outcomes IS NULL OR t.outcome IN (SELECT value FROM json_each(@outcomes)))
      ORDER BY t.seq LIMIT @limit`),
  });
}

/** One page of the history feed after `after`, scanning at most `scan` seqs; run it in one read transaction (the head and the page agree). */
export function feedPage(s: ReturnType<typeof prepareFeed>, after: number, limit: number, scan: number, filter: HistoryFeedFilter): FeedPage {
  const head = ((s.head.get() as { seq: number | null }).seq ?? 0);
  const upto = Math.min(head, after + scan);
  const rows = s.page.all({
    after,
    upto,
    all: filter.owner === undefined ? 1 : 0,
    owner: filter.owner ?? '',
    machine: filter.machineId ?? null,
    job: filter.jobId ?? null,
    outcomes: filter.outcomes === undefined ? null : JSON.stringify(filter.outcomes),
    limit,
  }) as Row[];
  return feedPageOf(rows, 'seq', after, upto, limit);
}
