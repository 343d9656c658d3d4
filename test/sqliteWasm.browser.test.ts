/**
 * Spool on sqlite-wasm in a real headless Chromium (Debian's, through playwright-core): a Worker
 * bundled for the browser (esbuild, `platform: 'browser'`, no Node shim) opens the store on OPFS
 * through the SAH-pool VFS, served from 127.0.0.1 without COOP/COEP headers. The store contract
 * (test/store.contract.ts, unchanged) runs inside the Worker, each case reported back; and jobs a
 * host-driven runtime started there survive a page reload and go on where they were, a timer set
 * before the reload firing once after it, with the host driving tick(). Every wait is on an answer
 * from the Worker, never on the clock: the runtime's clock is the one the test sets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserForTests } from './helpers/browser.ts';
import { bundleWorker, openWasmPage, type WasmPage } from './helpers/wasmPage.ts';
import type { CaseResult } from './browser/vitestShim.ts';

const BROWSER = browserForTests();
const T0 = 1_700_000_000_000;

let worker: { code: string; inputs: string[] };
let wasm: WasmPage;

beforeAll(async () => {
  if (BROWSER === null) return;
  worker = await bundleWorker('test/browser/sqliteWasmWorker.ts');
  wasm = await openWasmPage(BROWSER, worker.code);
  await wasm.rpc('wipe');
});

afterAll(async () => {
  await wasm?.close();
});

describe.skipIf(BROWSER === null)('sqlite-wasm in a browser Worker, on OPFS', () => {
  it('bundles for the browser with no Node built-in and no Node database library', () => {
    expect(worker.inputs).toEqual(expect.arrayContaining(['persistence/drivers/sqlite-wasm/driver.ts', 'persistence/sql/SqlStore.ts', 'src/runtime/runtime.ts', 'test/store.contract.ts']));
    expect(worker.inputs.filter((i) => /^node:|node_modules\/(better-sqlite3|bindings|pg)\/|^persistence\/drivers\/(better-sqlite3|pg)\//.test(i))).toEqual([]);
  });

  it('passes the store contract inside the Worker, case by case', async () => {
    const results = await wasm.rpc<CaseResult[]>('contract');
    const failed = results.filter((r) => !r.ok).map((r) => `${r.name}: ${r.error}`);
    expect(failed).toEqual([]);
    // Every case of the suite ran, each once (the count grows with the suite).
    expect(results.length).toBeGreaterThanOrEqual(30);
    expect(new Set(results.map((r) => r.name)).size).toBe(results.length);
    expect(wasm.errors).toEqual([]);
  });

  it('keeps the jobs a runtime started across a page reload: they go on where they were, and a timer set before it fires once after it, on the host\'s tick()', async () => {
    const path = '/reload.db';
    const opened = await wasm.rpc<{ description: string; files: string[] }>('open', { path, at: T0 });
    expect(opened.description).toBe('sqlite-wasm:opfs-sahpool:/reload.db');
    const [armed, idle, rang] = await wasm.rpc<string[]>('start', { count: 3 });
    expect(await wasm.rpc('send', { jobId: rang, type: 'ARM' })).toBe('applied');
    expect(await wasm.rpc('tick', { at: T0 + 60_000 })).toMatchObject({ timersFired: 1 }); // `rang` rings before the reload
    expect(await wasm.rpc('tick', { at: T0 + 70_000 })).toMatchObject({ timersFired: 0 });
    expect(await wasm.rpc('send', { jobId: armed, type: 'ARM' })).toBe('applied'); // due at T0 + 130 s
    const before = await wasm.rpc<unknown[]>('jobs');

    await wasm.reload(); // the Worker dies with the page, nothing closed
    const reopened = await wasm.rpc<{ files: string[] }>('open', { path, at: T0 + 71_000 });
    expect(reopened.files).toContain(path);
    expect(await wasm.rpc('jobs')).toEqual(before);

    // The host drives time: nothing is due before the armed job's minute, it rings once at it, once only.
    expect(await wasm.rpc('tick', { at: T0 + 100_000 })).toMatchObject({ timersFired: 0 });
    expect(await wasm.rpc('tick', { at: T0 + 130_000 })).toMatchObject({ timersFired: 1 });
    expect(await wasm.rpc('tick', { at: T0 + 200_000 })).toMatchObject({ timersFired: 0 });
    const after = new Map((await wasm.rpc<{ id: string; value: unknown; context: unknown }[]>('jobs')).map((j) => [j.id, j]));
    expect(after.get(armed!)).toMatchObject({ value: 'rang', context: { rings: 1 } });
    expect(after.get(rang!)).toMatchObject({ value: 'rang', context: { rings: 1 } });
    expect(after.get(idle!)).toMatchObject({ value: 'idle', context: { rings: 0 } });
    expect((await wasm.rpc<string[]>('history', { jobId: armed })).filter((t) => t.includes('xstate.after'))).toHaveLength(1);

    // And the jobs take events after the reload.
    expect(await wasm.rpc('send', { jobId: idle, type: 'ARM' })).toBe('applied');
    expect(await wasm.rpc('tick', { at: T0 + 260_000 })).toMatchObject({ timersFired: 1 });
    expect(await wasm.rpc('jobs')).toEqual(expect.arrayContaining([expect.objectContaining({ id: idle, value: 'rang', context: { rings: 1 } })]));
    expect(wasm.errors).toEqual([]);
  });
});
