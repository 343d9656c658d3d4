/**
 * `spool/client` as built (dist/) in a real headless Chromium (test/helpers/browser.ts), against a
 * real `spool serve` (createServer) over a SQLite file: the page imports the client's modules
 * from the server's origin (served to the page by the test), starts and drives a job, follows
 * its stream, waits for it, and catches a refusal as the same error class. Nothing of Node is
 * there, so this is the proof that the client needs only fetch and streams. Every wait is on
 * the page's own promises.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { createServer, type SpoolServer } from '../src/server/index.ts';
import { browserForTests } from './helpers/browser.ts';
import { PROJECT_ROOT, Resources } from './helpers/resources.ts';

const TOKEN = 'browser-client-token-0123456789';
const BROWSER = browserForTests();
const res = new Resources();
let server: SpoolServer;
let browser: Browser;

beforeAll(async () => {
  if (BROWSER === null) return;
  const store = await res.sqlite(res.dbPath());
  const runtime = await res.runtime({ store, machines: [jobLifecycle] });
  server = res.track(await createServer({ runtime, port: 0, token: TOKEN }));
  browser = await chromium.launch({ executablePath: BROWSER, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
});

afterAll(async () => {
  await browser?.close();
  await res.dispose();
});

describe.skipIf(BROWSER === null)('spool/client in a browser', () => {
  it('starts, sends, tails and waits for a job, and catches a refusal as its class', async () => {
    const page = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    // The page and the built modules, served at the server's origin (the page's writes are same-origin).
    await page.route(`${server.url}/client-under-test/**`, (route) => {
      const path = new URL(route.request().url()).pathname.replace('/client-under-test/', '');
      if (path === 'index.html') {
        const load = "import * as client from './src/client/index.js'; window.spoolClient = client;";
        return route.fulfill({ contentType: 'text/html', body: `<!doctype html><title>client</title><script type="module">${load}</script>` });
      }
      return route.fulfill({ contentType: 'text/javascript', body: readFileSync(join(PROJECT_ROOT, 'dist', path), 'utf8') });
    });
    await page.goto(`${server.url}/client-under-test/index.html`);
    await page.waitForFunction(() => 'spoolClient' in globalThis);
    const result = await page.evaluate(
      async ({ url, token }) => {
        const { createClient, JobNotFoundError } = (globalThis as unknown as { spoolClient: typeof import('../src/client/index.ts') }).spoolClient;
        const spool = createClient<[typeof jobLifecycle]>({ url, token });
        const job = await spool.start('job-lifecycle', { name: 'in a page', items: 1 });
        const tail = spool.tail(job.id);
        await tail.whenConnected();
        await spool.send(job.id, { type: 'START' });
        await spool.send(job.id, { type: 'ITEM_DONE' });
        const done = await spool.waitFor(job.id, (j) => j.final);
        const revisions: number[] = [];
        for await (const row of tail) revisions.push(row.revision);
        const missing = await spool.get('nope').catch((e: unknown) => e);
        const node = typeof (globalThis as { process?: unknown }).process;
        return { value: done.value, revisions, notFound: missing instanceof JobNotFoundError, code: (missing as { code: string }).code, node };
      },
      { url: server.url, token: TOKEN },
    );
    expect(result).toEqual({ value: 'completed', revisions: [1, 2, 3], notFound: true, code: 'SPOOL_NOT_FOUND', node: 'undefined' });
    expect(errors).toEqual([]);
  }, 60_000);
});
