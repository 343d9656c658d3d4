import Database from 'better-sqlite3';
import { SQLITE_FEED_SQL } from '../../sql/syncDriver.ts';
import { statements } from './prepared.ts';

export { feedPage } from '../../sql/syncDriver.ts';

/** The statements of `historySince`: the history's head and a page of it. */
export function prepareFeed(db: Database.Database) {
  return statements({ head: db.prepare(SQLITE_FEED_SQL.head), page: db.prepare(SQLITE_FEED_SQL.page) });
}
