/**
 * The HTTP API of `spool serve` with a real HTTP client (Node's fetch) against a real server on
 * 127.0.0.1 over a SQLite file: every write needs the token; another owner's job reads as not
 * found; every kind of bad request gets `{ error: { code } }` with a sensible status and leaves
 * every row of the database as it was; and the routes do what the runtime does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import type { ActivityArgs, Runtime } from '../src/index.ts';
import { createServer, type ServerOptions, type SpoolServer } from '../src/server/index.ts';
import { Resources, dumpDatabase } from './helpers/resources.ts';
import { runSpool } from './helpers/spoolCli.ts';
import { deliveryHooks, tally, till } from './fixtures/deliveryMachines.ts';

const TOKEN = 'test-token-0123456789abcdef';

/** An activity that waits out of band for its token. */
const approval = setup({
  actors: { ask: fromPromise(async (args) => (args as unknown as ActivityArgs).defer()) },
}).createMachine({
  id: 'approval',
  initial: 'asking',
  states: { asking: { invoke: { id: 'ask', src: 'ask', onDone: 'approved', onError: 'rejected' } }, approved: { type: 'final' }, rejected: { type: 'final' } },
});

const res = new Resources();
afterEach(() => {
  deliveryHooks.broken = true;
  return res.dispose();
});

interface Api {
  runtime: Runtime;
  server: SpoolServer;
  path: string;
  dump: () => Record<string, string[]>;
  call: (method: string, route: string, init?: { body?: unknown; raw?: string; token?: string | null; headers?: Record<string, string> }) => Promise<{ status: number; body: any; headers: Headers }>;
}

async function open(options: { owner?: string; server?: Partial<ServerOptions> } = {}): Promise<Api> {
  const path = res.dbPath();
  const store = await res.sqlite(path);
  const runtime = await res.runtime({ store, machines: [jobLifecycle, approval, tally, till], owner: options.owner ?? null });
  const server = res.track(await createServer({ runtime, port: 0, token: TOKEN, bodyLimitBytes: 4096, ...options.server }));
  const raw = res.raw(path, { readonly: true });
  const call: Api['call'] = async (method, route, init = {}) => {
    const token = init.token === undefined ? TOKEN : init.token;
    const headers: Record<string, string> = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...init.headers };
    const body = init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body));
    const response = await fetch(`${server.url}${route}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : JSON.parse(text), headers: response.headers };
  };
  return { runtime, server, path, dump: () => dumpDatabase(raw), call };
}

/** A job-lifecycle job in processing, and a deferred approval with its token. */
async function fixtures(api: Api): Promise<{ jobId: string; token: string; approvalId: string }> {
  const { body } = await api.call('POST', '/api/machines/job-lifecycle/jobs', { body: { input: { name: 'resize', items: 2 }, jobId: 'job-1' } });
  await api.call('POST', '/api/jobs/job-1/events', { body: { type: 'START' } });
  const approvalJob = await api.runtime.start('approval', {}, { jobId: 'approval-1' });
  await api.runtime.idle();
  const effects = (await api.call('GET', '/api/jobs/approval-1/effects')).body.effects as { token: string | null }[];
  return { jobId: body.job.id as string, token: effects[0]!.token!, approvalId: approvalJob.id };
}

describe('spool serve: the JSON API', () => {
  it('refuses every write without the token, or with another one, and writes nothing', async () => {
    const api = await open();
    const { jobId, token } = await fixtures(api);
    const writes: [string, unknown][] = [
      ['/api/machines/job-lifecycle/jobs', { input: { name: 'x' } }],
      [`/api/jobs/${jobId}/events`, { type: 'PROGRESS', percent: 50 }],
      [`/api/jobs/${jobId}/cancel`, {}],
      [`/api/jobs/${jobId}/retry`, {}],
      [`/api/jobs/${jobId}/retry-as-new`, {}],
      [`/api/jobs/${jobId}/suspend`, {}],
      [`/api/jobs/${jobId}/resume`, {}],
      [`/api/tokens/${token}/complete`, { output: { ok: true } }],
      [`/api/tokens/${token}/fail`, { error: { message: 'no' } }],
      ['/api/machines/tally/jobs/cart-1/events', { input: { label: 'x' }, event: { type: 'ADD', n: 1 } }],
      [`/api/jobs/${jobId}/events/some-event/redeliver`, {}],
    ];
    const before = api.dump();
    for (const [route, body] of writes) {
      for (const auth of [null, 'wrong-token-0123456789', '']) {
        const r = await api.call('POST', route, { body, token: auth });
        expect([route, r.status, r.body.error.code]).toEqual([route, 401, 'SPOOL_UNAUTHORIZED']);
      }
      const basic = await api.call('POST', route, { body, token: null, headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` } });
      expect(basic.status).toBe(401);
    }
    expect(api.dump()).toEqual(before);
    // The same write with the token goes through: the token is what was missing.
    const sent = await api.call('POST', `/api/jobs/${jobId}/events`, { body: { type: 'PROGRESS', percent: 50 } });
    expect(sent).toMatchObject({ status: 200, body: { status: 'applied', job: { progress: 50 } } });
  });

  it('gives every bad request a JSON error with its code and status, and leaves every row as it was', async () => {
    const api = await open();
    const { jobId } = await fixtures(api);
    await api.runtime.start('job-lifecycle', { name: 'done' }, { jobId: 'finished' });
    await api.runtime.send('finished', { type: 'CANCEL' });
    const before = api.dump();
    const stateBefore = await api.runtime.get(jobId);
    const cases: [string, string, { body?: unknown; raw?: string; headers?: Record<string, string> }, number, string][] = [
      ['POST', `/api/jobs/${jobId}/events`, { raw: '{"type":"PROGRESS",' }, 400, 'SPOOL_BAD_JSON'],
      ['POST', `/api/jobs/${jobId}/events`, { raw: '[1,2]' }, 400, 'SPOOL_BAD_JSON'],
      ['POST', `/api/jobs/${jobId}/events`, { body: { type: 'PROGRESS', percent: 1, pad: 'x'.repeat(5000) } }, 413, 'SPOOL_PAYLOAD_TOO_LARGE'],
      ['GET', '/api/nothing-here', {}, 404, 'SPOOL_ROUTE_NOT_FOUND'],
      ['POST', '/api/nothing-here', { body: {} }, 404, 'SPOOL_ROUTE_NOT_FOUND'],
      ['DELETE', `/api/jobs/${jobId}`, {}, 405, 'SPOOL_METHOD_NOT_ALLOWED'],
      ['PUT', '/api/machines/job-lifecycle/jobs', { body: {} }, 405, 'SPOOL_METHOD_NOT_ALLOWED'],
      ['GET', '/api/machines/no-such-machine', {}, 404, 'SPOOL_UNKNOWN_MACHINE'],
      ['POST', '/api/machines/no-such-machine/jobs', { body: { input: {} } }, 404, 'SPOOL_UNKNOWN_MACHINE'],
      ['GET', '/api/jobs/no-such-job', {}, 404, 'SPOOL_NOT_FOUND'],
      ['GET', '/api/jobs/no-such-job/history', {}, 404, 'SPOOL_NOT_FOUND'],
      ['POST', '/api/jobs/no-such-job/events', { body: { type: 'START' } }, 404, 'SPOOL_NOT_FOUND'],
      ['POST', `/api/jobs/${jobId}/events`, { body: { type: 'NO_SUCH_EVENT' } }, 400, 'SPOOL_UNKNOWN_EVENT'],
      ['POST', `/api/jobs/${jobId}/events`, { body: { type: 'PROGRESS', percent: 500 } }, 400, 'SPOOL_INVALID'],
      ['POST', `/api/jobs/${jobId}/cancel`, { body: { reason: 'x', force: true } }, 400, 'SPOOL_INVALID'],
      ['POST', '/api/jobs/finished/events', { body: { type: 'START' } }, 409, 'SPOOL_TERMINAL'],
      ['POST', '/api/tokens/not-a-token/complete', { body: {} }, 409, 'SPOOL_BAD_TOKEN'],
      ['GET', '/api/jobs?limit=0', {}, 400, 'SPOOL_INVALID'],
      ['GET', '/api/jobs?colour=red', {}, 400, 'SPOOL_INVALID'],
      ['GET', `/api/jobs/${jobId}/stream`, { headers: { 'last-event-id': 'yesterday' } }, 400, 'SPOOL_INVALID'],
      ['GET', '/api/stream?kind=exploded', {}, 400, 'SPOOL_INVALID'],
    ];
    for (const [method, route, init, status, code] of cases) {
      const r = await api.call(method, route, init);
      expect([method, route, r.status, r.body?.error?.code, typeof r.body?.error?.message]).toEqual([method, route, status, code, 'string']);
      if (status === 405) expect(r.headers.get('allow')).toMatch(/GET|POST/);
      expect(api.dump()).toEqual(before);
    }
    expect(await api.runtime.get(jobId)).toEqual(stateBefore);
  });

  it('limits a body sent without a length too (chunked), and writes nothing', async () => {
    const api = await open();
    const { jobId } = await fixtures(api);
    const before = api.dump();
    const chunk = new TextEncoder().encode(`{"type":"PROGRESS","percent":1,"pad":"${'x'.repeat(6000)}"}`);
    const body = new ReadableStream<Uint8Array>({ start: (c) => (c.enqueue(chunk), c.close()) });
    const r = await fetch(`${api.server.url}/api/jobs/${jobId}/events`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body, duplex: 'half' } as RequestInit);
    expect(r.status).toBe(413);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('SPOOL_PAYLOAD_TOO_LARGE');
    expect(api.dump()).toEqual(before);
  });

  it("reads another owner's job as not found, everywhere, and writes nothing to it", async () => {
    const api = await open({ owner: 'acme' });
    const other = await res.runtime({ store: await res.sqlite(api.path), machines: [jobLifecycle], owner: 'globex', recover: false });
    await other.start('job-lifecycle', { name: 'theirs' }, { jobId: 'theirs' });
    const mine = await api.call('POST', '/api/machines/job-lifecycle/jobs', { body: { input: { name: 'mine' }, jobId: 'mine' } });
    expect(mine.status).toBe(201);
    const before = api.dump();
    for (const route of ['/api/jobs/theirs', '/api/jobs/theirs/history', '/api/jobs/theirs/events', '/api/jobs/theirs/timers', '/api/jobs/theirs/stream']) {
      const r = await api.call('GET', route);
      expect([route, r.status, r.body.error.code]).toEqual([route, 404, 'SPOOL_NOT_FOUND']);
    }
    for (const [route, body] of [['/api/jobs/theirs/events', { type: 'START' }], ['/api/jobs/theirs/cancel', {}], ['/api/jobs/theirs/suspend', {}], ['/api/jobs/theirs/retry-as-new', {}]] as const) {
      const r = await api.call('POST', route, { body });
      expect([route, r.status, r.body.error.code]).toEqual([route, 404, 'SPOOL_NOT_FOUND']);
    }
    // Starting under their id is no way in either: the id is taken, and theirs stays theirs.
    expect(api.dump()).toEqual(before);
    expect((await api.call('GET', '/api/jobs')).body.jobs.map((j: { id: string }) => j.id)).toEqual(['mine']);
    expect((await other.get('theirs')).revision).toBe(1);
  });

  it('starts, sends, lists by page, shows every record, suspends, resumes, cancels and settles tokens', async () => {
    const api = await open();
    const { jobId, token, approvalId } = await fixtures(api);
    const again = await api.call('POST', '/api/machines/job-lifecycle/jobs', { body: { input: { name: 'resize', items: 2 }, jobId: 'job-1' } });
    expect(again).toMatchObject({ status: 200, body: { created: false, job: { id: 'job-1', value: 'processing' } } });
    const repeat = await api.call('POST', `/api/jobs/${jobId}/events`, { body: { type: 'PROGRESS', percent: 20 }, headers: { 'idempotency-key': 'hook-1' } });
    const twice = await api.call('POST', `/api/jobs/${jobId}/events`, { body: { type: 'PROGRESS', percent: 20 }, headers: { 'idempotency-key': 'hook-1' } });
    expect([repeat.body.duplicate, twice.body.duplicate, twice.body.revision]).toEqual([false, true, repeat.body.revision]);

    const page1 = await api.call('GET', '/api/jobs?limit=1');
    const page2 = await api.call('GET', `/api/jobs?limit=1&after=${page1.body.next}`);
    expect([...page1.body.jobs, ...page2.body.jobs].map((j: { id: string }) => j.id)).toEqual(['approval-1', 'job-1']);
    expect((await api.call('GET', '/api/jobs?machine=job-lifecycle&state=processing')).body.jobs.map((j: { id: string }) => j.id)).toEqual(['job-1']);

    const shown = await api.call('GET', `/api/jobs/${jobId}`);
    expect(shown.body).toMatchObject({ job: { id: jobId, value: 'processing' }, waitingFor: expect.arrayContaining(['FINISH', 'PROGRESS']), stuck: false });
    const history = (await api.call('GET', `/api/jobs/${jobId}/history`)).body.history;
    expect(history).toEqual(JSON.parse(JSON.stringify(await api.runtime.history(jobId))));
    for (const part of ['events', 'effects', 'attempts', 'timers', 'assets', 'notes']) {
      expect(Array.isArray((await api.call('GET', `/api/jobs/${approvalId}/${part}`)).body[part])).toBe(true);
    }

    expect((await api.call('POST', `/api/jobs/${jobId}/suspend`, { body: { reason: 'look' } })).body.job.suspended).toMatchObject({ reason: 'look' });
    expect((await api.call('POST', `/api/jobs/${jobId}/resume`)).body.job.suspended).toBeNull();
    const cancelled = await api.call('POST', `/api/jobs/${jobId}/cancel`, { body: { reason: 'enough' } });
    expect(cancelled.body.job).toMatchObject({ final: true, value: 'cancelled' });

    const settled = await api.call('POST', `/api/tokens/${token}/complete`, { body: { output: { ok: true } } });
    expect(settled).toMatchObject({ status: 200, body: { job: { id: approvalId, value: 'approved', final: true } } });

    const machines = (await api.call('GET', '/api/machines')).body.machines as { id: string; events: { type: string; schema: any }[]; root: { states: { key: string }[] } }[];
    const lifecycle = machines.find((m) => m.id === 'job-lifecycle')!;
    expect(lifecycle.root.states.map((s) => s.key)).toEqual(expect.arrayContaining(['queued', 'processing', 'completed']));
    expect(lifecycle.events.find((e) => e.type === 'PROGRESS')!.schema.properties.percent).toMatchObject({ type: 'number', maximum: 100 });
    expect((await api.call('GET', '/api/stats')).body.jobs.length).toBeGreaterThan(0);
  });

  it('start-or-send and redeliver, with their refusals', async () => {
    const api = await open();
    const route = '/api/machines/tally/jobs/cart-1/events';
    const created = await api.call('POST', route, { body: { input: { label: 'x' }, event: { type: 'ADD', n: 2 }, eventId: 'e1' } });
    expect(created).toMatchObject({ status: 201, body: { created: true, status: 'applied', job: { id: 'cart-1', context: { total: 2 } } } });
    const again = await api.call('POST', route, { body: { input: { label: 'x' }, event: { type: 'ADD', n: 2 } }, headers: { 'idempotency-key': 'e1' } });
    expect(again).toMatchObject({ status: 200, body: { created: false, duplicate: true } });
    expect((await api.call('POST', route, { body: { event: { type: 'ADD', n: 1 }, extra: 1 } })).body.error.code).toBe('SPOOL_INVALID');
    expect((await api.call('POST', '/api/machines/nope/jobs/x/events', { body: { event: { type: 'ADD', n: 1 } } })).status).toBe(404);

    await api.runtime.start('till', {}, { jobId: 'till-1' });
    // A failed outcome is refused as one, whichever route sent it, carrying the outcome.
    const failed = await api.call('POST', '/api/jobs/till-1/events', { body: { type: 'PAY', amount: 1 }, headers: { 'idempotency-key': 'pay' } });
    expect(failed).toMatchObject({ status: 422, body: { error: { code: 'SPOOL_EVENT_FAILED', outcome: { status: 'failed', eventId: 'pay', job: { id: 'till-1', value: 'open' } } } } });
    expect(failed.body.error.message).toMatch(/^Event pay failed on job till-1 \(/);
    const repeated = await api.call('POST', '/api/jobs/till-1/events', { body: { type: 'PAY', amount: 1 }, headers: { 'idempotency-key': 'pay' } });
    expect(repeated).toMatchObject({ status: 422, body: { error: { outcome: { duplicate: true } } } });
    const createdFailed = await api.call('POST', '/api/machines/till/jobs/till-2/events', { body: { input: {}, event: { type: 'PAY', amount: 1 }, eventId: 'pay2' } });
    expect(createdFailed).toMatchObject({ status: 422, body: { error: { code: 'SPOOL_EVENT_FAILED', outcome: { created: true, status: 'failed' } } } });
    const stillBroken = await api.call('POST', '/api/jobs/till-2/events/pay2/redeliver', { body: {} });
    expect(stillBroken).toMatchObject({ status: 422, body: { error: { code: 'SPOOL_EVENT_FAILED', outcome: { eventId: 'redeliver~pay2' } } } });
    const notFailed = await api.call('POST', '/api/jobs/cart-1/events/e1/redeliver', { body: {} });
    expect(notFailed).toMatchObject({ status: 409, body: { error: { code: 'SPOOL_REDELIVERY_REFUSED', reason: 'not-failed' } } });
    expect((await api.call('POST', '/api/jobs/till-1/events/pay/redeliver', { body: { force: 'yes' } })).status).toBe(400);
    deliveryHooks.broken = false;
    const redelivered = await api.call('POST', '/api/jobs/till-1/events/pay/redeliver', { body: {} });
    expect(redelivered).toMatchObject({ status: 200, body: { status: 'applied', eventId: 'redeliver~pay', job: { value: 'paid' } } });
  });

  it('starts a batch in one call: every job in order with whether this call created it; a bad item or too many start none', async () => {
    const api = await open({ server: { bodyLimitBytes: 1024 * 1024 } });
    const route = '/api/machines/tally/jobs/batch';
    await api.call('POST', '/api/machines/tally/jobs', { body: { input: { label: 'a' }, idempotencyKey: 'k-a' } });
    const first = await api.call('POST', route, { body: { items: [
      { input: { label: 'a' }, idempotencyKey: 'k-a' },
      { input: { label: 'b' }, jobId: 'b-1' },
      { input: { label: 'c' } },
      { input: { label: 'b' }, jobId: 'b-1' },
    ] } });
    expect(first.status).toBe(201);
    const items = first.body.items as { created: boolean; job: { id: string; context: { label: string } } }[];
    expect(items.map((i) => [i.created, i.job.context.label])).toEqual([[false, 'a'], [true, 'b'], [true, 'c'], [false, 'b']]);
    expect(items[1]!.job.id).toBe('b-1');
    expect(items[3]!.job.id).toBe('b-1');
    // The whole batch again: every job found, none created, 200.
    const again = await api.call('POST', route, { body: { items: [{ input: { label: 'b' }, jobId: 'b-1' }] } });
    expect(again).toMatchObject({ status: 200, body: { items: [{ created: false, job: { id: 'b-1' } }] } });
    expect(await api.call('POST', route, { body: { items: [] } })).toMatchObject({ status: 200, body: { items: [] } });

    const before = api.dump();
    const good = { input: { label: 'ok' } };
    const cases: [unknown, number, string, RegExp, Record<string, unknown>][] = [
      [{ items: [good, { input: { label: 7 } }] }, 400, 'SPOOL_INVALID', /^startMany item 1: Invalid input for tally/, { item: 1 }],
      [{ items: [good, { input: { label: 'x' }, jobID: 'j' }] }, 400, 'SPOOL_INVALID', /^startMany item 1: startMany item: unknown option jobID/, { item: 1 }],
      [{ items: [good, null] }, 400, 'SPOOL_INVALID', /^startMany item 1: A startMany item must be an object/, { item: 1 }],
      [{ items: [good, { input: { label: 'other' }, idempotencyKey: 'k-a' }] }, 409, 'SPOOL_IDEMPOTENCY_CONFLICT', /^startMany item 1: A job with idempotency key "k-a" already exists/, { item: 1 }],
      [{ items: good }, 400, 'SPOOL_INVALID', /takes an array of items/, {}],
      [{}, 400, 'SPOOL_INVALID', /takes an array of items/, {}],
      [{ items: [good], extra: 1 }, 400, 'SPOOL_INVALID', /Unknown field\(s\) extra; this route takes items/, {}],
      [{ items: Array.from({ length: 1001 }, () => good) }, 400, 'SPOOL_INVALID', /at most 1000 items \(got 1001\)/, { items: 1001, limit: 1000 }],
    ];
    for (const [body, status, code, message, details] of cases) {
      const r = await api.call('POST', route, { body });
      expect([r.status, r.body.error.code, r.body.error.item]).toEqual([status, code, details['item']]);
      expect(r.body.error).toMatchObject({ message: expect.stringMatching(message), ...details });
      expect(api.dump()).toEqual(before);
    }
    expect((await api.call('POST', '/api/machines/nope/jobs/batch', { body: { items: [good] } })).body.error.code).toBe('SPOOL_UNKNOWN_MACHINE');
    expect((await api.call('POST', route, { body: { items: [good] }, token: null })).status).toBe(401);
    expect(api.dump()).toEqual(before);
    // At the limit, one commit's worth goes through.
    const full = await api.call('POST', route, { body: { items: Array.from({ length: 1000 }, (_, n) => ({ input: { label: `n${n}` } })) } });
    expect([full.status, full.body.items.length, full.body.items.every((i: { created: boolean }) => i.created)]).toEqual([201, 1000, true]);
  });

  it('spool serve on a port another server holds: one SPOOL_USAGE line, exit 1', async () => {
    const api = await open();
    const port = new URL(api.server.url).port;
    const run = await runSpool(['--db', api.path, 'serve', '--port', port, '--token', TOKEN], res.tempDir());
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^spool: SPOOL_USAGE: Port ${port} on 127.0.0.1 is in use`));
  });
});
