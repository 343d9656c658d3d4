import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { SqliteStore, type SqliteStoreOptions } from '../../persistence/drivers/better-sqlite3/index.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../src/index.ts';
import type { JobStore } from '../../src/ports/store.ts';
import { storeUnderTest } from './asyncStore.ts';
import { dropDatabaseFor, ON_POSTGRES, openUnderTest } from './stores.ts';

/** `.vitest-tmp/` at the project root (gitignored). */
export const TMP_ROOT = fileURLToPath(new URL('../../.vitest-tmp/', import.meta.url));
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Everything a test opens: temp dirs, stores, runtimes, raw connections. `dispose()` (run it in
 * `afterEach`) closes whatever the test left open, newest first, checks that every SQLite handle
 * is really closed, and deletes the temp dirs.
 */
export class Resources {
  readonly #closers: Array<() => Promise<void> | void> = [];
  readonly #handles: Database.Database[] = [];
  readonly #dirs: string[] = [];
  /** With SPOOL_TEST_STORE=postgres: the paths whose databases to drop at the end. */
  readonly #databases = new Set<string>();

  /** A fresh directory `.vitest-tmp/<random>/`. */
  tempDir(): string {
    const dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
    mkdirSync(dir, { recursive: true });
    this.#dirs.push(dir);
    return dir;
  }

  /** A path for a database file in a fresh temp dir. */
  dbPath(name = 'spool.db'): string {
    return join(this.tempDir(), name);
  }

  /**
   * A SQLite store on `path` (behind the asynchronous boundary when the run asks for it: see
   * {@link storeUnderTest}); with `SPOOL_TEST_STORE=postgres`, a PostgresStore on the database
   * standing for `path` (stores.ts).
   */
  async sqlite(path: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
    const store = await openUnderTest(path, options, async () => storeUnderTest(await SqliteStore.open(path, options)));
    if (!ON_POSTGRES) this.#handles.push(store.db);
    else this.#databases.add(path);
    this.#closers.push(() => store.close());
    return store;
  }

  /** A raw better-sqlite3 connection (for hand edits and independent reads). */
  raw(path: string, options: Database.Options = {}): Database.Database {
    const db = new Database(path, options);
    this.#handles.push(db);
    this.#closers.push(() => {
      if (db.open) db.close();
    });
    return db;
  }

  /** createRuntime, closed at the end of the test. */
  async runtime(options: RuntimeOptions): Promise<Runtime> {
    this.track(options.store);
    const runtime = await createRuntime(options);
    this.#closers.push(() => runtime.close());
    return runtime;
  }

  track<T extends JobStore | { close(): Promise<void> }>(closeable: T): T {
    this.#closers.push(() => closeable.close());
    return closeable;
  }

  async dispose(): Promise<void> {
    const errors: unknown[] = [];
    for (const close of this.#closers.splice(0).reverse()) {
      try {
        await close();
      } catch (error) {
        errors.push(error);
      }
    }
    for (const path of this.#databases) await dropDatabaseFor(path).catch((error: unknown) => errors.push(error));
    this.#databases.clear();
    const open = this.#handles.splice(0).filter((db) => db.open);
    for (const dir of this.#dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    if (open.length > 0) errors.push(new Error(`${open.length} SQLite handle(s) still open after close`));
    if (errors.length > 0) throw errors.length === 1 ? errors[0] : new AggregateError(errors, 'cleanup failed');
  }
}

/** Every row of every table, sorted, as text: compare before/after to prove nothing was written. */
export function dumpDatabase(db: Database.Database): Record<string, string[]> {
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all() as { name: string }[];
  const out: Record<string, string[]> = {};
  for (const { name } of tables) {
    out[name] = (db.prepare(`SELECT * FROM "${name}"`).all() as unknown[]).map((r) => JSON.stringify(r)).sort();
  }
  // sqlite_sequence holds the inbox AUTOINCREMENT counter: an accepted-then-rolled-back row would move it.
  const seq = db.prepare("SELECT name FROM sqlite_master WHERE name = 'sqlite_sequence'").get();
  if (seq) out['sqlite_sequence'] = (db.prepare('SELECT * FROM sqlite_sequence').all() as unknown[]).map((r) => JSON.stringify(r)).sort();
  return out;
}

export { dumpStore } from './dumpStore.ts';
