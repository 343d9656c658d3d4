/**
 * The dashboard in a real headless Chromium (Debian's /usr/bin/chromium, driven by
 * playwright-core), against a real `spool serve` (createServer) over a SQLite file: it lists jobs
 * with their counts; a job's page draws its diagram and moves the current state when an event is
 * sent through the API; send, cancel, retry and settling a token work from the page; a machine's
 * page draws the counts. Every wait is on the DOM, never on the clock. The page loads nothing from
 * any other origin. Screenshots of the main pages go to test-output/screenshots/.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import type { Runtime } from '../src/index.ts';
import { createServer, type SpoolServer } from '../src/server/index.ts';
import { setup } from 'xstate';
import { z } from 'zod';
import { approval, charge, chargeHook, fulfilment } from './fixtures/dashboardMachines.ts';
import { deliveryHooks, till } from './fixtures/deliveryMachines.ts';
import { PROJECT_ROOT, Resources } from './helpers/resources.ts';
import { browserForTests } from './helpers/browser.ts';

const TOKEN = 'dashboard-test-token-0123456789';
const SHOTS = join(PROJECT_ROOT, 'test-output', 'screenshots');

const BROWSER = browserForTests();

/** A start form's fields: an int without bounds (zod gives it the safe-integer ones), a short string. */
const formCheck = {
  machine: setup({}).createMachine({ id: 'form-check', initial: 'open', states: { open: {} } }),
  input: z.strictObject({ label: z.string(), count: z.number().int() }),
};
const res = new Resources();
let runtime: Runtime;
let dbPath: string;
let server: SpoolServer;
let browser: Browser;
const foreign: string[] = [];
const pageErrors: string[] = [];

beforeAll(async () => {
  if (BROWSER === null) return;
  mkdirSync(SHOTS, { recursive: true });
  dbPath = res.dbPath();
  const store = await res.sqlite(dbPath);
  runtime = await res.runtime({ store, machines: [jobLifecycle, approval, charge, fulfilment, till, formCheck] });
  server = res.track(await createServer({ runtime, port: 0, token: TOKEN }));
  browser = await chromium.launch({
    executablePath: BROWSER,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  await res.dispose();
});

/** A page with the token handed over as `spool serve` prints it (or none). */
async function open(path: string, options: { token?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  page.on('request', (r) => {
    if (!r.url().startsWith(server.url) && !r.url().startsWith('data:')) foreign.push(r.url());
  });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  if (options.token !== false) {
    await page.goto(`${server.url}/#token=${TOKEN}`);
    await page.waitForSelector('.token-button.unlocked');
  }
  await page.goto(`${server.url}${path}`);
  return page;
}

async function api(method: string, route: string, body?: unknown): Promise<any> {
  const r = await fetch(`${server.url}${route}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  return r.json();
}

const current = (state: string) => `.diagram [data-state="${state}"].is-current`;

describe('finding the browser', () => {
  it('skips with a printed reason when there is none, and fails when SPOOL_TEST_BROWSER=required', () => {
    const printed: string[] = [];
    const missing = { SPOOL_TEST_BROWSER_PATH: join(PROJECT_ROOT, 'no-such-chromium') };
    expect(browserForTests(missing, (l) => printed.push(l))).toBeNull();
    expect(printed.join('\n')).toMatch(/skipping the dashboard's browser tests: no browser at .*no-such-chromium/);
    expect(() => browserForTests({ ...missing, SPOOL_TEST_BROWSER: 'required' }, () => undefined)).toThrow(/SPOOL_TEST_BROWSER=required, but no browser at/);
    expect(browserForTests({ SPOOL_TEST_BROWSER_PATH: process.execPath })).toBe(process.execPath);
  });
});

describe.skipIf(BROWSER === null)('the dashboard in Chromium', () => {
  it('lists jobs with their counts by machine and state, from Spool alone', async () => {
    await runtime.start('job-lifecycle', { name: 'resize', items: 0 }, { jobId: 'list-1' });
    await runtime.start('job-lifecycle', { name: 'thumbs' }, { jobId: 'list-2' });
    await runtime.send('list-2', { type: 'START' });
    await runtime.start('fulfilment', { items: 2, total: 10 }, { jobId: 'order-1' });
    const page = await open('/');
    await page.waitForSelector('tr[data-job="list-1"]');
    await page.waitForSelector('tr[data-job="order-1"]');
    expect(await page.textContent('tr[data-job="list-2"]')).toContain('processing');
    const card = page.locator('.machine-card', { hasText: 'job-lifecycle' });
    expect(await card.locator('.count-chip', { hasText: 'queued' }).textContent()).toMatch(/queued\s*1/);
    // A count filters the table.
    await card.locator('.count-chip', { hasText: 'processing' }).click();
    // Waited for by selectors: a predicate as a string would be polled by eval, which the page's CSP refuses.
    await page.waitForSelector('tr[data-job="list-1"]', { state: 'detached' });
    await page.waitForSelector('tr[data-job="order-1"]', { state: 'detached' });
    await page.waitForSelector('tr[data-job="list-2"]');
    expect(await page.locator('tr[data-job]').count()).toBe(1);
    expect(new URL(page.url()).search).toContain('state=processing');
    await page.click('button:has-text("Clear")');
    await page.waitForSelector('tr[data-job="list-1"]');
    await page.screenshot({ path: join(SHOTS, 'jobs.png'), fullPage: true });
    expect(foreign).toEqual([]);
    await page.context().close();
  });

  it("draws a job's diagram and moves the current state when an event is sent through the API", async () => {
    await runtime.start('job-lifecycle', { name: 'live' }, { jobId: 'live-1' });
    const page = await open('/jobs/live-1');
    await page.waitForSelector(current('job-lifecycle.queued'));
    await page.waitForSelector('.live[data-stream="live"]');
    expect(await page.locator('.diagram .edge').count()).toBeGreaterThan(5);
    await api('POST', '/api/jobs/live-1/events', { type: 'START' });
    await page.waitForSelector(current('job-lifecycle.processing'));
    expect(await page.locator(current('job-lifecycle.queued')).count()).toBe(0);
    await page.waitForSelector('.diagram .edge.is-taken[data-source="job-lifecycle.queued"][data-event="START"]');
    await page.waitForSelector('.timeline li[data-revision="2"]');
    await api('POST', '/api/jobs/live-1/events', { type: 'PROGRESS', percent: 30 });
    await page.waitForSelector('.timeline li[data-revision="3"]');
    await page.screenshot({ path: join(SHOTS, 'job.png'), fullPage: true });

    // Nested and parallel states are boxes in boxes; both regions' states are current.
    await runtime.start('fulfilment', { items: 1, total: 5 }, { jobId: 'order-2' });
    await page.goto(`${server.url}/jobs/order-2`);
    await page.waitForSelector(current('fulfilment.open.payment.unpaid'));
    await page.waitForSelector(current('fulfilment.open.packing.waiting'));
    expect(await page.locator('.diagram .state-region').count()).toBe(2);
    await api('POST', '/api/jobs/order-2/events', { type: 'PACK' });
    await page.waitForSelector(current('fulfilment.open.packing.packed'));
    expect(await page.locator(current('fulfilment.open.payment.unpaid')).count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'job-parallel.png'), fullPage: true });
    await page.context().close();
  });

  it('rides out a server restart: the page says it is reconnecting, keeps what it showed, then catches up', async () => {
    await runtime.start('job-lifecycle', { name: 'restart' }, { jobId: 'restart-1' });
    let own = res.track(await createServer({ runtime, port: 0, token: TOKEN }));
    const port = Number(new URL(own.url).port);
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${own.url}/jobs/restart-1`);
    await page.waitForSelector('.live[data-stream="live"]');
    await page.waitForSelector(current('job-lifecycle.queued'));
    await own.close();
    await page.waitForSelector('.live[data-stream="reconnecting"]');
    await runtime.send('restart-1', { type: 'START' });
    await page.waitForSelector('.problem:not([hidden])');
    expect(await page.locator(current('job-lifecycle.queued')).count()).toBe(1);
    own = res.track(await createServer({ runtime, port, token: TOKEN }));
    await page.waitForSelector(current('job-lifecycle.processing'));
    await page.waitForSelector('.live[data-stream="live"]');
    await page.waitForSelector('.problem[hidden]', { state: 'attached' });
    await context.close();
  });

  it('sends events from the page, with a form built from the event schema', async () => {
    await runtime.start('job-lifecycle', { name: 'send' }, { jobId: 'send-1' });
    const page = await open('/jobs/send-1');
    await page.click('button.event-button[data-event="START"]');
    await page.waitForSelector(current('job-lifecycle.processing'));
    await page.click('button.event-button[data-event="PROGRESS"]');
    // The schema's bounds are the field's: 140 is refused before anything is sent.
    await page.fill('form.event-form[data-event="PROGRESS"] input[name="percent"]', '140');
    // A live update (a commit: an event the state ignores) draws the page again; the open form
    // and what was typed in it stay.
    await runtime.send('send-1', { type: 'START' });
    await page.waitForSelector('.timeline li.tl-ignored');
    expect(await page.inputValue('form.event-form[data-event="PROGRESS"] input[name="percent"]')).toBe('140');
    await page.click('form.event-form[data-event="PROGRESS"] button.primary');
    await page.waitForSelector('form.event-form[data-event="PROGRESS"] input[name="percent"]:invalid');
    expect((await runtime.get('send-1')).progress).toBe(0);
    await page.fill('form.event-form[data-event="PROGRESS"] input[name="percent"]', '40');
    await page.click('form.event-form[data-event="PROGRESS"] button.primary');
    await page.waitForSelector('.meta-progress .pct:has-text("40%")');
    expect((await runtime.get('send-1')).progress).toBe(40);
    // FAIL has a required reason: the form holds it back until it is filled in.
    await page.click('button.event-button[data-event="FAIL"]');
    await page.click('form.event-form[data-event="FAIL"] button.primary');
    await page.waitForSelector('form.event-form[data-event="FAIL"] [name="reason"]:invalid');
    expect((await runtime.get('send-1')).value).toBe('processing');
    await page.click('button.event-button[data-event="FINISH"]');
    await page.waitForSelector(current('job-lifecycle.completed'));
    await page.waitForSelector('.live[data-stream="final"]');
    expect(await runtime.get('send-1')).toMatchObject({ value: 'completed', final: true });
    await page.context().close();
  });

  it('cancels from the page', async () => {
    await runtime.start('job-lifecycle', { name: 'cancel' }, { jobId: 'cancel-1' });
    const page = await open('/jobs/cancel-1');
    await page.waitForSelector(current('job-lifecycle.queued'));
    await page.click('[data-action="cancel-job"]');
    await page.fill('.confirm input', 'not needed');
    // A live update (an event the state ignores) draws the page again: the confirm step stays
    // open, with the reason typed, and the field keeps the focus.
    await runtime.send('cancel-1', { type: 'FINISH' });
    await page.waitForSelector('.timeline li.tl-ignored');
    expect(await page.inputValue('.confirm input')).toBe('not needed');
    expect(await page.evaluate('document.activeElement?.matches(".confirm input") ?? false')).toBe(true);
    await page.click('[data-action="confirm"]');
    await page.waitForSelector(current('job-lifecycle.cancelled'));
    expect(await runtime.get('cancel-1')).toMatchObject({ value: 'cancelled', cancel: { reason: 'not needed' } });
    await page.context().close();
  });

  it('holds back a job whose row is damaged, offering Purge (not Cancel), and purges it from the page', async () => {
    await runtime.start('job-lifecycle', { name: 'damaged' }, { jobId: 'damaged-1' });
    const raw = res.raw(dbPath);
    raw.prepare(`UPDATE jobs SET snapshot = '{"value": broken' WHERE id = 'damaged-1'`).run();
    raw.close();
    const page = await open('/jobs/damaged-1');
    const held = await page.waitForSelector('[data-held="damaged"]');
    expect(await held.textContent()).toContain('Held back: damaged');
    expect(await page.$('[data-action="cancel-job"]')).toBeNull();
    expect(await page.textContent('body')).not.toContain('accepts no event');
    await page.click('[data-action="purge-job"]');
    await page.click('[data-action="confirm"]');
    await page.waitForSelector('.toast-ok:has-text("purge: purged")');
    await expect(runtime.get('damaged-1')).rejects.toMatchObject({ code: 'SPOOL_NOT_FOUND' });
    await page.context().close();
  });

  it('retries a failed activity from the page', async () => {
    chargeHook.run = async () => {
      throw new Error('card declined');
    };
    await runtime.start('charge', {}, { jobId: 'charge-1' });
    await runtime.idle();
    expect((await runtime.details('charge-1')).effects[0]).toMatchObject({ status: 'failed' });
    chargeHook.run = async () => ({ receipt: 'r-2' });
    const page = await open('/jobs/charge-1');
    await page.waitForSelector('tr[data-effect] .effect-failed');
    await page.click('[data-action="retry"]');
    await page.waitForSelector(current('charge.charged'));
    expect((await runtime.get('charge-1')).value).toBe('charged');
    await page.context().close();
  });

  it('settles a waiting token from the page', async () => {
    await runtime.start('approval', {}, { jobId: 'approve-1' });
    await runtime.idle();
    const page = await open('/jobs/approve-1');
    await page.waitForSelector('.settle [data-action="complete"]');
    await page.screenshot({ path: join(SHOTS, 'job-token.png'), fullPage: true });
    await page.fill('.settle textarea', '{"approvedBy":"ada"}');
    // A live update while the output is typed (a commit that changes nothing) keeps it.
    await runtime.send('approve-1', { type: 'PING' });
    await page.waitForSelector('.timeline li:has-text("PING")');
    expect(await page.inputValue('.settle textarea')).toBe('{"approvedBy":"ada"}');
    await page.click('.settle [data-action="complete"]');
    await page.waitForSelector(current('approval.approved'));
    expect(await runtime.get('approve-1')).toMatchObject({ value: 'approved', final: true });
    await page.context().close();
  });

  it('asks for the token before a write when the tab has none, and a wrong one changes nothing', async () => {
    await runtime.start('job-lifecycle', { name: 'locked' }, { jobId: 'locked-1' });
    const page = await open('/jobs/locked-1', { token: false });
    await page.waitForSelector('.token-button.locked');
    await page.click('button.event-button[data-event="START"]');
    await page.waitForSelector('#token-dialog[open]');
    await page.fill('#token-input', 'wrong-token-0123456789');
    await page.click('#token-form button.primary');
    await page.waitForSelector('.toast-error:has-text("Wrong token")');
    expect((await runtime.get('locked-1')).revision).toBe(1);
    await page.context().close();
  });

  it('takes the token from the URL `spool serve` prints, keeps it for every tab and out of the address bar', async () => {
    const own = res.track(await createServer({ runtime, port: 0 }));
    expect(own.tokenGenerated).toBe(true);
    expect(own.dashboardUrl).toBe(`${own.url}/#token=${encodeURIComponent(own.token)}`);
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(own.dashboardUrl);
    await page.waitForSelector('.token-button.unlocked');
    expect(page.url()).toBe(`${own.url}/`);
    expect(await page.evaluate('localStorage.getItem("spool.token")')).toBe(own.token);
    // A second tab has it too: it is not read-only.
    const second = await context.newPage();
    await second.goto(`${own.url}/`);
    await second.waitForSelector('.token-button.unlocked');
    await context.close();
    await own.close();
  });

  it('on a server whose reads need the token, asks for it and then shows the jobs', async () => {
    await runtime.start('job-lifecycle', { name: 'gated' }, { jobId: 'gated-1' });
    const own = res.track(await createServer({ runtime, port: 0, token: TOKEN, readsNeedToken: true }));
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${own.url}/`);
    await page.waitForSelector('#token-dialog[open]');
    await page.fill('#token-input', TOKEN);
    await page.click('#token-form button.primary');
    await page.waitForSelector('tr[data-job="gated-1"]');
    await context.close();
    await own.close();
  });

  it('serves its own scripts and styles, under a policy that allows no other origin', async () => {
    const page = await fetch(`${server.url}/jobs/anything`);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    const assets = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const path of assets) {
      expect(path.startsWith('/dashboard/')).toBe(true);
      expect((await fetch(`${server.url}${path}`)).status).toBe(200);
    }
    expect((await fetch(`${server.url}/dashboard/app.js`)).headers.get('content-type')).toMatch(/^text\/javascript/);
    const missing = await fetch(`${server.url}/dashboard/nope.js`);
    expect([missing.status, ((await missing.json()) as any).error.code]).toEqual([404, 'SPOOL_ROUTE_NOT_FOUND']);
    expect((await fetch(`${server.url}/dashboard/..%2Fdashboard.ts`)).status).toBe(404);
    const svg = await fetch(`${server.url}/api/machines/fulfilment/diagram`);
    expect(svg.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(await svg.text()).toContain('data-state="fulfilment.open.payment"');
    expect(((await (await fetch(`${server.url}/api/machines/nope/diagram`)).json()) as any).error.code).toBe('SPOOL_UNKNOWN_MACHINE');
    expect(((await (await fetch(`${server.url}/api/jobs/nope/marks`)).json()) as any).error.code).toBe('SPOOL_NOT_FOUND');
    expect(await api('GET', '/api/jobs/order-1/marks')).toMatchObject({ machineId: 'fulfilment', version: '1', active: expect.arrayContaining(['fulfilment.open.payment.unpaid']), taken: [] });
  });

  it('zooms the statechart, redelivers a failed event, and builds one-line fields without the safe-integer bound', async () => {
    deliveryHooks.broken = true;
    await runtime.start('till', {}, { jobId: 'till-1' });
    expect((await runtime.send('till-1', { type: 'PAY', amount: 1 }, { eventId: 'pay' })).status).toBe('failed');
    deliveryHooks.broken = false;
    const page = await open('/jobs/till-1');
    await page.waitForSelector('button[data-action="redeliver"][data-event-id="pay"]');
    const chart = page.locator('#job-diagram svg');
    const fit = (await chart.boundingBox())!.width;
    await page.click('#job-diagram button[data-zoom="in"]');
    await page.click('#job-diagram button[data-zoom="in"]');
    expect((await chart.boundingBox())!.width).toBeGreaterThan(fit * 1.2);
    await page.click('#job-diagram button[data-zoom="fit"]');
    expect((await chart.boundingBox())!.width).toBeCloseTo(fit, 0);
    await page.click('button[data-action="redeliver"]');
    await page.waitForSelector('.toast:has-text("redeliver PAY: applied")');
    expect((await runtime.get('till-1')).value).toBe('paid');
    await page.context().close();

    const form = await open('/machines/form-check');
    await form.waitForSelector('form.start-form input#input-label');
    expect(await form.textContent('form.start-form')).not.toContain('9007199254740991');
    expect(await form.locator('form.start-form textarea').count()).toBe(0);
    expect(await form.getAttribute('input#input-count', 'max')).toBeNull();
    expect(pageErrors).toEqual([]);
    await form.context().close();
  });

  it("draws a machine's diagram with the count of jobs in each state", async () => {
    const page = await open('/machines/fulfilment');
    await page.waitForSelector('#machine-diagram .count[data-state="fulfilment.open"]');
    const counts = await page.$$eval('#machine-diagram .count', (els) => Object.fromEntries(els.map((e) => [e.getAttribute('data-state'), Number(e.getAttribute('data-count'))])));
    const stats = (await runtime.stats()).jobs.filter((r) => r.machineId === 'fulfilment').reduce((n, r) => n + r.count, 0);
    expect(counts['fulfilment.open']).toBe(stats);
    expect(counts['fulfilment.open.packing.packed']).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'machine.png'), fullPage: true });
    // A click on a state lists its jobs.
    await page.click('#machine-diagram .state[data-state="fulfilment.open.packing.packed"]');
    await page.waitForSelector('tr[data-job="order-2"]');
    expect(await page.locator('tr[data-job]').count()).toBe(1);
    expect(pageErrors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.context().close();
  });
});
