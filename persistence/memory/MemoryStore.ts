import { SqliteStore } from '../drivers/better-sqlite3/SqliteStore.ts';

/**
 * The in-memory store: the SQLite store on a private `:memory:` database. It runs the same SQL,
 * schema and migrations as the file store, so it keeps the same contract by construction; only
 * durability differs (nothing survives `close()` or the process, and no other connection can
 * open it). Opened synchronously: a `:memory:` database has no file to lock, no WAL and no other
 * process to wait for.
 *
 * @example
 * const runtime = await createRuntime({ store: new MemoryStore(), machines });
 */
export class MemoryStore extends SqliteStore {
  constructor() {
    super(':memory:', {}, 'memory');
  }
}
