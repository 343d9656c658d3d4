/**
 * The store on sqlite-wasm (persistence/drivers/sqlite-wasm), in Node on an in-memory database:
 * the JobStore contract (store.contract.ts; the other contract suites run on it in the
 * `sqlite-wasm` project of vitest.config.ts), and what the driver adds: its option checks, and
 * SQLite's faults as Spool's typed errors, as the better-sqlite3 driver maps them. In a browser
 * Worker on OPFS: sqliteWasm.browser.test.ts.
 */
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteWasmStore, SqliteWasmStore } from '../persistence/drivers/sqlite-wasm/index.ts';
import { DatabaseDamagedError, StorageFullError, ValidationError } from '../src/base/errors.ts';
import { Resources } from './helpers/resources.ts';
import { sqliteWasmContractStore } from './helpers/stores.ts';
import { newJob, storeContract } from './store.contract.ts';

storeContract('SqliteWasmStore (memory)', sqliteWasmContractStore);

const res = new Resources();
afterEach(() => res.dispose());

async function memoryStore(): Promise<SqliteWasmStore> {
  return res.track((await sqliteWasmContractStore()).store);
}

describe('openSqliteWasmStore', () => {
  it('refuses options it cannot use with a ValidationError naming the option, opening nothing', async () => {
    const sqlite3 = await sqlite3InitModule();
    const refused = async (options: unknown) => {
      const error = await openSqliteWasmStore(options as never).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      return (error as ValidationError).details;
    };
    expect(await refused({})).toMatchObject({ option: 'sqlite3' });
    expect(await refused({ sqlite3, synchronous: 'normal' })).toMatchObject({ option: 'synchronous' });
    expect(await refused({ sqlite3, path: '/spool.db' })).toMatchObject({ option: 'path' });
    expect(await refused({ sqlite3, pool: {} })).toMatchObject({ option: 'pool' });
    expect(await refused({ sqlite3, busyTimeoutMs: 5 })).toMatchObject({ option: 'busyTimeoutMs' });
  });

  it('opens migrated, at the schema version the better-sqlite3 store reaches, FULL by default', async () => {
    const store = await memoryStore();
    const sqlite = await res.sqlite(res.dbPath());
    expect(store.schemaVersion).toBe(sqlite.schemaVersion);
    expect(store.synchronous).toBe('FULL');
    expect(store.description).toBe('sqlite-wasm::memory:');
  });
});

describe('SQLite faults on sqlite-wasm', () => {
  it('a full database is StorageFullError, and the write that met it changed nothing', async () => {
    const store = await memoryStore();
    await store.createJob(newJob('first'));
    const pages = store.db.selectValue('PRAGMA page_count') as number;
    store.db.exec(`PRAGMA max_page_count = ${pages + 1}`);
    const big = newJob('big', { input: { blob: 'x'.repeat(64 * 1024) } });
    const error = await store.createJob(big).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(StorageFullError);
    expect((error as StorageFullError).details).toMatchObject({ driverCode: 'SQLITE_FULL' });
    expect(await store.getJob('big')).toBeUndefined();
    expect((await store.getJob('first'))?.id).toBe('first');
  });

  it('a constraint at an entry point (a schema it does not hold) is DatabaseDamagedError, with the extended code', async () => {
    const store = await memoryStore();
    await store.createJob(newJob('a'));
    // A trigger the schema does not have, refusing every note.
    store.db.exec("CREATE TRIGGER no_notes BEFORE INSERT ON notes BEGIN SELECT RAISE(ABORT, 'no notes'); END");
    const error = await store.addNote({ jobId: 'a', kind: 'info', message: 'hi', at: 1 }).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseDamagedError);
    expect((error as DatabaseDamagedError).details).toMatchObject({ driverCode: 'SQLITE_CONSTRAINT_TRIGGER' });
    expect(await store.listNotes('a')).toEqual([]);
  });

  it('a missing table is DatabaseDamagedError saying which', async () => {
    const store = await memoryStore();
    store.db.exec('DROP TABLE notes');
    const error = await store.listNotes('a').then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseDamagedError);
    expect((error as DatabaseDamagedError).details).toMatchObject({ driverCode: 'SQLITE_ERROR' });
    expect((error as Error).message).toContain('no such table: notes');
  });
});
