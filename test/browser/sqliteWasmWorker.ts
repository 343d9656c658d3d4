/**
 * The Worker of test/sqliteWasm.browser.test.ts: Spool on sqlite-wasm on OPFS (the SAH-pool VFS)
 * in a browser Worker. `contract` runs the store contract (test/store.contract.ts, unchanged:
 * 'vitest' is test/browser/vitestShim.ts in this bundle) on a fresh OPFS database per case;
 * `open`, `start`, `send`, `jobs`, `tick` drive a host-driven runtime on one OPFS database across
 * page reloads, on a clock the test sets.
 */
import { assign, setup } from 'xstate';
import { openSqliteWasmStore, type SqliteWasmStore } from '../../persistence/drivers/sqlite-wasm/index.ts';
import { createRuntime, type Runtime } from '../../src/index.ts';
import { newJob, storeContract } from '../store.contract.ts';
import type { SpoolError } from '../../src/base/errors.ts';
import { opfsOnce } from './opfs.ts';
import { serveRpc } from './rpc.ts';
import { runCases } from './vitestShim.ts';

/** A reminder: armed by ARM, it rings once a minute later (an `after` timer), counting its rings. */
export const reminder = setup({
  types: { context: {} as { rings: number }, events: {} as { type: 'ARM' } },
}).createMachine({
  id: 'reminder',
  initial: 'idle',
  context: { rings: 0 },
  states: {
    idle: { on: { ARM: 'armed' } },
    armed: { after: { 60_000: { target: 'rang', actions: assign({ rings: ({ context }) => context.rings + 1 }) } } },
    rang: { on: { ARM: 'armed' } },
  },
});

/** The module and the pool, made once. */
const opfs = opfsOnce('spool-test');

let now = 0;
const clock = { now: () => now };
let store: SqliteWasmStore | undefined;
let runtime: Runtime | undefined;

let contractCase = 0;
storeContract('SqliteWasmStore (OPFS SAH pool, in a Worker)', async () => {
  const { sqlite3, pool } = await opfs();
  const path = `/contract-${++contractCase}.db`;
  const opened = await openSqliteWasmStore({ sqlite3, pool, path });
  return {
    store: opened,
    dispose: () => {
      if (opened.db.isOpen()) throw new Error('the suite left the store open');
      pool.unlink(path);
    },
  };
});

serveRpc({
  contract: async () => {
    await opfs();
    return runCases();
  },
  /** Open the runtime on the database `path` of the pool (what a page does when it loads). */
  open: async ({ path, at }: { path: string; at: number }) => {
    now = at;
    const o = await opfs();
    store = await openSqliteWasmStore({ sqlite3: o.sqlite3, pool: o.pool, path, clock });
    runtime = await createRuntime({ store, machines: [reminder], clock, hostDriven: true });
    return { schemaVersion: store.schemaVersion, description: store.description, files: o.pool.getFileNames() };
  },
  start: async ({ count }: { count: number }) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await runtime!.start('reminder', {})).id);
    return ids;
  },
  send: async ({ jobId, type }: { jobId: string; type: 'ARM' }) => (await runtime!.send(jobId, { type })).status,
  jobs: async () =>
    (await runtime!.list()).map((j) => ({ id: j.id, value: j.value, context: j.context, status: j.status })).sort((a, b) => a.id.localeCompare(b.id)),
  /** The job's history: each transition's event type and target. */
  history: async ({ jobId }: { jobId: string }) => (await store!.history(jobId)).map((t) => `${t.eventType} -> ${JSON.stringify(t.to)}`),
  tick: async ({ at }: { at: number }) => {
    now = at;
    return runtime!.tick();
  },
  /** Open stores on new databases of the pool until one is refused: that refusal (its code and details), the stores closed after. */
  fill: async () => {
    const { sqlite3, pool } = await opfs();
    const opened: SqliteWasmStore[] = [];
    try {
      for (let i = 1; i <= 2 * pool.getCapacity(); i++) {
        try {
          const s = await openSqliteWasmStore({ sqlite3, pool, path: `/fill-${i}.db` });
          opened.push(s);
          await s.createJob(newJob(`j${i}`)); // a write: the journal takes a file too
        } catch (error) {
          const e = error as SpoolError;
          return { opened: opened.length, name: e.name, code: e.code, details: e.details, message: e.message };
        }
      }
      return { opened: opened.length };
    } finally {
      for (const s of opened) {
        await s.close();
        pool.unlink(s.path);
      }
    }
  },
  /** Open another application's database, and a newer Spool's: each refusal's code, and what the foreign one holds after. */
  refusals: async () => {
    const { sqlite3, pool } = await opfs();
    const codeOf = (p: Promise<unknown>) => p.then(() => null, (e: SpoolError) => e.code);
    const raw = new pool.OpfsSAHPoolDb('/foreign.db');
    raw.exec('CREATE TABLE another_apps_notes (x)');
    raw.close();
    const foreign = await codeOf(openSqliteWasmStore({ sqlite3, pool, path: '/foreign.db' }));
    const check = new pool.OpfsSAHPoolDb('/foreign.db');
    const tables = check.selectValues('SELECT name FROM sqlite_master');
    check.close();
    const spool = await openSqliteWasmStore({ sqlite3, pool, path: '/newer.db' });
    spool.db.exec("INSERT INTO spool_migrations VALUES (9999, '9999_future.sql', 0)");
    await spool.close();
    const newer = await codeOf(openSqliteWasmStore({ sqlite3, pool, path: '/newer.db' }));
    for (const path of ['/foreign.db', '/newer.db']) pool.unlink(path);
    return { foreign, tables, newer };
  },
  wipe: async () => {
    const { pool } = await opfs();
    await pool.wipeFiles();
    return pool.getFileNames();
  },
});
