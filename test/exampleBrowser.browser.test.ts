/**
 * examples/browser in a real headless Chromium: built by its npm script (esbuild), served from its
 * dist/ by its own static server on 127.0.0.1, it runs the approval flow of machines/ in a Worker
 * over SQLite on the origin's private file system. A job started from the page is drawn with its
 * state marked (the dashboard's diagram code), is still there in the same state after a reload,
 * and reaches its final state when an event is sent; a machine the example never saw (a module
 * written here, given to the build) runs the same way, its durable timer fired by the Worker's
 * own ticks after a reload. Every wait is on the DOM, never on the clock.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserForTests } from './helpers/browser.ts';
import { PROJECT_ROOT, Resources } from './helpers/resources.ts';
import { CHROMIUM_ARGS } from './helpers/wasmPage.ts';

const BROWSER = browserForTests();
const EXAMPLE = join(PROJECT_ROOT, 'examples', 'browser');
const SHOTS = join(PROJECT_ROOT, 'test-output', 'screenshots');
const run = promisify(execFile);

const res = new Resources();
let browser: Browser;
const servers: ChildProcess[] = [];

/** The example's static server on `dir`, on a free port: its address, from its first line. */
async function serve(dir: string): Promise<string> {
  const child = spawn(process.execPath, [join(EXAMPLE, 'serve.mjs'), dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  servers.push(child);
  const [line] = await Promise.race([
    new Promise<string[]>((resolve) => createInterface({ input: child.stdout! }).once('line', (l) => resolve([l]))),
    new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`serve.mjs exited with ${code}`)))),
  ]);
  expect(line).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
  return line!;
}

/** A fresh browser context (its own private file system) on the page at `url`, its errors and foreign requests collected. */
async function open(url: string): Promise<{ page: Page; errors: string[]; foreign: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const errors: string[] = [];
  const foreign: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(url)) foreign.push(r.url());
  });
  page.on('response', (r) => {
    if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(url);
  await ready(page);
  return { page, errors, foreign };
}

/** The Worker opened its database and said so. */
async function ready(page: Page): Promise<void> {
  await page.waitForSelector('#status[data-ready="true"]');
}

const current = (state: string) => `#job-diagram [data-state="${state}"].is-current`;

/** Start a job of `machineId` from the page's form (its example input, or `input`); its id once the page shows it. */
async function startJob(page: Page, machineId: string, input?: unknown): Promise<string> {
  await page.selectOption('#machine', machineId);
  if (input !== undefined) await page.fill('#input', JSON.stringify(input));
  await page.click('#start-job');
  const view = await page.waitForSelector('#job-view[data-job]');
  return (await view.getAttribute('data-job'))!;
}

async function send(page: Page, type: string): Promise<void> {
  await page.click(`#send [data-event="${type}"]`);
  await page.click('#send-event');
}

async function reload(page: Page, jobId: string): Promise<void> {
  await page.reload();
  await ready(page);
  await page.waitForSelector(`#job-view[data-job="${jobId}"]`);
  await page.waitForSelector(`.job-row[data-job="${jobId}"]`);
}

beforeAll(async () => {
  if (BROWSER === null) return;
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: BROWSER, args: CHROMIUM_ARGS });
});

afterAll(async () => {
  for (const child of servers) child.kill();
  await browser?.close();
  await res.dispose();
});

describe.skipIf(BROWSER === null)('examples/browser in Chromium', () => {
  it('runs the approval flow in a Worker: drawn with its state, kept across reloads, moved on to its final state', async () => {
    await run('npm', ['run', '--silent', 'example:browser'], { cwd: PROJECT_ROOT });
    const { page, errors, foreign } = await open(await serve(join(EXAMPLE, 'dist')));

    const jobId = await startJob(page, 'approval-flow');
    await page.waitForSelector(current('approval-flow.pending'));
    // The dashboard's drawing: every state and transition of the machine, and its zoom bar.
    expect(await page.locator('#job-diagram svg.spool-diagram .state[data-state]').count()).toBeGreaterThanOrEqual(5);
    expect(await page.locator('#job-diagram .edge[data-event="APPROVE"]').count()).toBe(1);
    expect(await page.locator('#job-diagram .zoom-bar').count()).toBe(1);
    expect(await page.locator(current('approval-flow.approved')).count()).toBe(0);
    expect(new URL(page.url()).hash).toBe(`#job=${jobId}`);

    await reload(page, jobId);
    await page.waitForSelector(current('approval-flow.pending'));
    expect(await page.getAttribute('#job-view', 'data-status')).toBe('active');
    expect(await page.textContent('#job-context')).toContain('Expense report #42');

    await send(page, 'APPROVE');
    await page.waitForSelector(current('approval-flow.approved'));
    await page.waitForSelector('#job-diagram .edge.is-taken[data-source="approval-flow.pending"][data-event="APPROVE"]');
    await page.waitForSelector(`#job-view[data-job="${jobId}"][data-final="true"][data-status="done"]`);
    expect(await page.locator(current('approval-flow.pending')).count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'example-browser.png'), fullPage: true });

    // The final state is what the database kept.
    await reload(page, jobId);
    await page.waitForSelector(current('approval-flow.approved'));
    await page.waitForSelector(`#job-view[data-final="true"]`);
    expect(await page.locator('.job-row').count()).toBe(1);

    // One tab holds the database: a second one says so, and the first goes on.
    const second = await page.context().newPage();
    await second.goto(page.url());
    await second.waitForSelector('#status.error-text');
    expect(await second.textContent('#status')).toMatch(/could not start: The database is held by another tab/);
    await second.close();
    await startJob(page, 'approval-flow');
    await page.waitForSelector(current('approval-flow.pending'));
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.context().close();
  });

  it('runs a machine it never saw, given to the build: its durable timer fires from the Worker\'s ticks after a reload', async () => {
    const dir = res.tempDir();
    const module = join(dir, 'doorbell.ts');
    writeFileSync(module, [
      "import { setup } from 'xstate';",
      '/** Rings for three seconds, then is answered: a durable `after` timer. */',
      "export const doorbell = setup({}).createMachine({",
      "  id: 'doorbell',",
      "  initial: 'idle',",
      "  states: { idle: { on: { RING: 'ringing' } }, ringing: { after: { 3000: 'answered' } }, answered: { type: 'final' } },",
      '});',
      '',
    ].join('\n'));
    await run('npm', ['run', '--silent', 'example:browser', '--', '--machines', module, '--outdir', join(dir, 'dist')], { cwd: PROJECT_ROOT });
    const { page, errors, foreign } = await open(await serve(join(dir, 'dist')));
    expect(await page.locator('#machine option').allTextContents()).toEqual(['doorbell@1']);

    const jobId = await startJob(page, 'doorbell');
    await page.waitForSelector(current('doorbell.idle'));
    await reload(page, jobId);
    await page.waitForSelector(current('doorbell.idle'));

    await send(page, 'RING');
    await page.waitForSelector(current('doorbell.ringing'));
    // The timer is in the database: the page (and its Worker) going away does not lose it.
    await reload(page, jobId);
    await page.waitForSelector(current('doorbell.answered'));
    await page.waitForSelector('#job-diagram .edge.is-taken[data-source="doorbell.ringing"][data-target="doorbell.answered"]');
    await page.waitForSelector(`#job-view[data-job="${jobId}"][data-final="true"]`);
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.context().close();
  });
});
