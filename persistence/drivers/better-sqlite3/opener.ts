import { resolve } from 'node:path';
import { SqliteStore } from './SqliteStore.ts';

/** `openStore`'s registration of this driver: a file path (`:memory:` included), resolved against `cwd`. */
export async function openSqlite(db: string, options: { cwd?: string; synchronous?: 'FULL' | 'NORMAL' }): Promise<SqliteStore> {
  const path = db === ':memory:' ? db : resolve(options.cwd ?? process.cwd(), db);
  return SqliteStore.open(path, options.synchronous ? { synchronous: options.synchronous } : {});
}
