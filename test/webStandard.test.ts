/**
 * The engine on web-standard APIs: the runtime, the SQL core (`spool/sql`) and the client bundle
 * for the browser (esbuild, `platform: 'browser'`) with no Node polyfill and no Node built-in left
 * external, and the bundle runs a job, driven by the host's `tick()`, in a V8 context that has web
 * APIs only (no `process`, `Buffer`, `setImmediate` or `require`). Also: the web-standard helpers
 * that replaced Node's (src/base/bytes.ts, sha256.ts) give what Node's gave.
 */
import { createHash } from 'node:crypto';
import vm from 'node:vm';
import { build, type BuildFailure } from 'esbuild';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';
import { SqliteDriver } from '../persistence/drivers/better-sqlite3/driver.ts';
import { migrate, openDatabase } from '../persistence/drivers/better-sqlite3/open.ts';
import { WalGuard } from '../persistence/drivers/better-sqlite3/wal.ts';
import { base64urlToText, countUtf8, randomBase64url, textToBase64url, utf8Compare, utf8Length } from '../src/base/bytes.ts';
import { sha256Hex } from '../src/base/sha256.ts';
import { PROJECT_ROOT } from './helpers/resources.ts';

/** What a page or a Worker imports: the runtime (`spool`), the SQL core (`spool/sql`), the client (`spool/client`); and XState, to define a machine there. */
const ENTRY = `
export * as spool from './src/index.ts';
export * as sql from './persistence/sql/index.ts';
export * as client from './src/client/index.ts';
export { sha256Hex } from './src/base/sha256.ts';
export { setup, fromPromise } from 'xstate';
`;

function bundle(contents: string, format: 'esm' | 'iife' = 'esm') {
  return build({
    stdin: { contents, resolveDir: PROJECT_ROOT, sourcefile: 'web-entry.ts', loader: 'ts' },
    bundle: true,
    platform: 'browser',
    format,
    ...(format === 'iife' ? { globalName: 'web' } : {}),
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
}

let built: ReturnType<typeof bundle> | undefined;
/** One browser build of the entry for the tests here (it takes a second or two). */
const browserBundle = () => (built ??= bundle(ENTRY, 'iife'));

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('the engine on web-standard APIs', () => {
  it('the runtime, the SQL core and the client bundle for the browser: no Node built-in, no Node database library among the inputs or in the code', async () => {
    const result = await browserBundle();
    expect(result.errors).toEqual([]);
    const inputs = Object.keys(result.metafile.inputs);
    // The check sees the engine, the SQL core and the client.
    for (const part of ['src/runtime/runtime.ts', 'src/step/attempts.ts', 'persistence/sql/SqlStore.ts', 'persistence/sql/migrationTexts.ts', 'src/client/index.ts']) expect(inputs).toContain(part);
    expect(inputs.filter((i) => /^node:|node_modules\/(better-sqlite3|bindings|pg)\//.test(i) || /^persistence\/drivers\//.test(i))).toEqual([]);
    const code = result.outputFiles[0]!.text;
    expect(code).not.toMatch(/(require\(|import\(|from\s*)["'](node:)?(fs|os|path|crypto|url|events|timers|stream|buffer|child_process)["']/);
    // Nor Node's globals (the context test below runs the paths a job takes without them).
    expect(code).not.toMatch(/(?<![.\w$])Buffer\b|__dirname|__filename|\brequire\(/);
  });

  it('the same build fails on a Node built-in: nothing is polyfilled or left external', async () => {
    for (const builtin of ['node:crypto', 'node:fs', 'os']) {
      const error = (await bundle(`${ENTRY}\nimport '${builtin}';`).then(() => undefined, (e: unknown) => e)) as BuildFailure | undefined;
      expect(error?.errors.map((e) => e.text)).toEqual([expect.stringContaining(`Could not resolve "${builtin}"`)]);
    }
  });

  it('runs a job in a V8 context with web APIs only: a timer and a retried activity, each driven by the host\'s tick()', async () => {
    const code = (await browserBundle()).outputFiles[0]!.text;
    // The host hands the SQL core a driver (here better-sqlite3 on :memory:, from outside the
    // context, as a Worker's host hands it a WebAssembly SQLite); everything else runs inside.
    const db = openDatabase(':memory:', 5000);
    const version = migrate(db, ':memory:', 0);
    const driver = new SqliteDriver(db, ':memory:', 'memory', version, new WalGuard(db, ':memory:'));
    closers.push(() => driver.close());
    // A browser's timers: numbered handles, with no unref.
    const handles = new Map<number, ReturnType<typeof setTimeout>>();
    let next = 0;
    let intervals = 0;
    const web = {
      console, crypto, TextEncoder, TextDecoder, btoa, atob, URL, AbortController, AbortSignal, EventTarget, Event, structuredClone, queueMicrotask,
      setTimeout: (fn: () => void, ms?: number) => (handles.set(++next, setTimeout(fn, ms)), next),
      clearTimeout: (id: number) => (clearTimeout(handles.get(id)), handles.delete(id)),
      setInterval: (fn: () => void, ms?: number) => (intervals++, handles.set(++next, setInterval(fn, ms)), next),
      clearInterval: (id: number) => (clearInterval(handles.get(id)), handles.delete(id)),
      driver,
    };
    closers.push(() => handles.forEach((h) => clearTimeout(h)));
    const context = vm.createContext(web);
    vm.runInContext(code, context);
    const run = vm.runInContext(
      `(async () => {
        const { spool, sql, setup, fromPromise } = web;
        const missing = ['process', 'Buffer', 'setImmediate', 'require', 'global'].filter((name) => typeof globalThis[name] !== 'undefined');
        class WebStore extends sql.SqlStore { constructor(d) { super(d); } }
        let time = 1_000_000;
        const clock = { now: () => time };
        let calls = 0;
        const machine = setup({
          actors: { charge: fromPromise(async ({ input }) => { calls += 1; if (calls === 1) throw new spool.RetryableError('card network busy'); return { charged: input.amount }; }) },
        }).createMachine({
          id: 'web-order',
          initial: 'waiting',
          context: ({ input }) => ({ amount: input.amount }),
          states: {
            waiting: { after: { 5000: 'charging' } },
            charging: { invoke: { src: 'charge', input: ({ context }) => ({ amount: context.amount }), onDone: 'paid' } },
            paid: { type: 'final' },
          },
          output: ({ context }) => ({ amount: context.amount }),
        });
        const runtime = await spool.createRuntime({ store: new WebStore(driver), machines: [machine], clock, hostDriven: true });
        const finished = [];
        let firstFinished;
        const first = new Promise((resolve) => (firstFinished = resolve));
        runtime.subscribe((e) => { if (e.type === 'activity.finished') finished.push(e.outcome), firstFinished(); });
        const ticks = [];
        const job = await runtime.start('web-order', { amount: 42 });
        ticks.push(await runtime.tick());
        time += 5000;
        ticks.push(await runtime.tick());
        await first;
        const effect = (await runtime.details(job.id)).effects[0];
        const retry = { status: effect.status, attempt: effect.attempt, after: effect.nextRunAt - time };
        time = effect.nextRunAt;
        ticks.push(await runtime.tick());
        const done = await runtime.waitFor(job.id, (j) => j.final, { timeoutMs: 10_000 });
        const result = { missing, finished, runnerId: runtime.runnerId, jobId: job.id, ticks, retry, value: done.value, output: done.output, calls, effectId: effect.id };
        await runtime.close();
        return JSON.stringify(result);
      })()`,
      context,
    ) as Promise<string>;
    const result = JSON.parse(await run) as Record<string, unknown>;
    expect(result).toMatchObject({ missing: [], value: 'paid', output: { amount: 42 }, calls: 2, finished: ['retrying', 'succeeded'], retry: { status: 'backoff', attempt: 1 } });
    // Host-driven: the runtime started no interval of its own.
    expect(intervals).toBe(0);
    expect(result['runnerId']).toMatch(/^web\/[0-9a-f]{8}\/[0-9a-f]{8}$/);
    expect(result['jobId']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // Nothing due; the timer fired (its transition's commit starts the first attempt); the retry, due, started by the tick.
    expect(result['ticks']).toEqual([{ timersFired: 0, activitiesStarted: 0 }, { timersFired: 1, activitiesStarted: 0 }, { timersFired: 0, activitiesStarted: 1 }]);
    // The backoff's jitter hashed with @noble/hashes in the context is the one Node's sha256 gives (a replay computes the same schedule).
    const unit = createHash('sha256').update(`${result['effectId'] as string}:1`).digest().readUInt32BE(0) / 0xffffffff;
    expect((result['retry'] as { after: number }).after).toBe(Math.round(1000 + (unit * 2 - 1) * 0.1 * 1000));
  });
});

describe('the web-standard helpers give what Node gave', () => {
  const texts = ['', 'plain ascii', 'é', '€ and 𝄞', '\u{10FFFF}', '\uD800 lone high', 'lone low \uDC00', 'mixed 日本語 🎉 text', 'z', '\uFFFF', '\u{10000}'];

  it('sha256Hex: Node\'s digest, and @noble/hashes\' (the path off Node) the same', () => {
    for (const text of texts.filter((t) => !/[\uD800-\uDFFF]/u.test(t))) {
      const node = createHash('sha256').update(text).digest('hex');
      expect(sha256Hex(text)).toBe(node);
      expect(bytesToHex(sha256(utf8ToBytes(text)))).toBe(node);
    }
  });

  it('utf8Length (countUtf8 off Node) is Buffer.byteLength, lone surrogates included', () => {
    for (const text of texts) expect([utf8Length(text), countUtf8(text)], JSON.stringify(text)).toEqual([Buffer.byteLength(text), Buffer.byteLength(text)]);
  });

  it('utf8Compare orders as UTF-8 bytes do (SQLite\'s BINARY collation), where UTF-16 order differs', () => {
    for (const a of texts) for (const b of texts) expect(utf8Compare(a, b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`).toBe(Buffer.compare(Buffer.from(a), Buffer.from(b)));
    // The case UTF-16 order gets wrong: a supplementary character sorts after U+FFFF in UTF-8.
    expect('\u{10000}' < '\uFFFF').toBe(true);
    expect(utf8Compare('\u{10000}', '\uFFFF')).toBe(1);
  });

  it('base64url: Buffer\'s encoding, round-tripped; anything else refused', () => {
    for (const text of texts.filter((t) => !/[\uD800-\uDFFF]/u.test(t))) {
      expect(textToBase64url(text)).toBe(Buffer.from(text).toString('base64url'));
      expect(base64urlToText(textToBase64url(text))).toBe(text);
    }
    expect(() => base64urlToText('a+b/')).toThrow();
    expect(() => base64urlToText('%%')).toThrow();
    expect(() => base64urlToText(Buffer.from([0xff, 0xfe]).toString('base64url'))).toThrow(); // not UTF-8
    const ids = new Set(Array.from({ length: 100 }, () => randomBase64url(12)));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });
});
