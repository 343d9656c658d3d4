/**
 * A Worker in a page of headless Chromium (Debian's, through playwright-core), for the
 * sqlite-wasm tests and the bench's browser section: `entry` bundled with esbuild for the browser
 * (`platform: 'browser'`, no Node shim; 'vitest' resolved to test/browser/vitestShim.ts), served
 * over HTTP on 127.0.0.1 with sqlite-wasm's .wasm file and a page that starts the Worker (no
 * COOP/COEP headers: the OPFS SAH-pool VFS needs none). `rpc` calls the Worker (test/browser/rpc.ts).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { chromium, type Browser, type Page } from 'playwright-core';
import { PROJECT_ROOT } from './resources.ts';

const require = createRequire(import.meta.url);

/** The flags the project launches Chromium with (as test/dashboard.browser.test.ts does). */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const PAGE = `<!doctype html><meta charset="utf-8"><title>spool worker</title><link rel="icon" href="data:,"><script type="module">
const worker = new Worker('/worker.js', { type: 'module' });
const pending = new Map();
let next = 0;
let ready;
window.workerReady = new Promise((resolve) => (ready = resolve));
worker.onmessage = (e) => {
  if (e.data.ready) return ready(true);
  const call = pending.get(e.data.id);
  pending.delete(e.data.id);
  if (e.data.ok) call.resolve(e.data.value);
  else call.reject(new Error(e.data.error));
};
worker.onerror = (e) => { window.workerError = String(e.message); ready(false); };
window.rpc = (cmd, args) => new Promise((resolve, reject) => {
  const id = next++;
  pending.set(id, { resolve, reject });
  worker.postMessage({ id, cmd, args });
});
</script>`;

/** The Worker bundle of `entry` (a path from the project's root). */
export async function bundleWorker(entry: string): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    entryPoints: [join(PROJECT_ROOT, entry)],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
    alias: { vitest: join(PROJECT_ROOT, 'test/browser/vitestShim.ts') },
  });
  return { code: result.outputFiles[0]!.text, inputs: Object.keys(result.metafile.inputs) };
}

export interface WasmPage {
  page: Page;
  url: string;
  /** Call the Worker: `handlers[cmd](args)` there (test/browser/rpc.ts). */
  rpc<T = unknown>(cmd: string, args?: unknown): Promise<T>;
  /** Reload the page (the Worker dies with it; a new one starts) and wait for the new Worker. */
  reload(): Promise<void>;
  /** What the page and the Worker reported as errors. */
  errors: string[];
  close(): Promise<void>;
}

/** Serve `code` as the Worker of a page and open it in Chromium at `browserPath`. */
export async function openWasmPage(browserPath: string, code: string): Promise<WasmPage> {
  const wasmDir = join(dirname(require.resolve('@sqlite.org/sqlite-wasm/package.json')), 'dist');
  const files: Record<string, { type: string; body: string | Buffer }> = {
    '/': { type: 'text/html', body: PAGE },
    '/worker.js': { type: 'text/javascript', body: code },
    '/sqlite3.wasm': { type: 'application/wasm', body: readFileSync(join(wasmDir, 'sqlite3.wasm')) },
  };
  const server: Server = createServer((req, res) => {
    const file = files[new URL(req.url ?? '/', 'http://x').pathname];
    if (!file) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-store' }).end(file.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  let browser: Browser | undefined;
  try {
    browser = await chromium.launch({ executablePath: browserPath, args: CHROMIUM_ARGS });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    const started = async () => {
      const ok = await page.evaluate(() => (globalThis as unknown as { workerReady: Promise<boolean> }).workerReady);
      if (!ok) throw new Error(`the Worker failed to start: ${await page.evaluate(() => (globalThis as unknown as { workerError?: string }).workerError)}`);
    };
    await page.goto(url);
    await started();
    const opened = browser;
    return {
      page,
      url,
      errors,
      rpc: (cmd, args) => page.evaluate(([c, a]) => (globalThis as unknown as { rpc: (c: string, a: unknown) => Promise<never> }).rpc(c, a), [cmd, args] as const),
      reload: async () => {
        await page.reload();
        await started();
      },
      close: async () => {
        await opened.close();
        await new Promise((resolve) => server.close(resolve));
      },
    };
  } catch (error) {
    await browser?.close();
    server.close();
    throw error;
  }
}
