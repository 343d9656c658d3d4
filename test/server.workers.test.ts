/**
 * The worker routes of `spool serve` (docs/remote-workers.md) with a real HTTP client against a
 * real server over a SQLite file: a claim long-polls until a commit brings work; each dispatch's
 * attempt token names its claim; completions are applied as a local attempt's outcome is, once
 * (the same token again is answered as already accepted); a malformed, edited or stale token is
 * refused with its code and changes nothing; a worker token reaches the worker routes only, and
 * only its activities.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../src/index.ts';
import { createServer, type SpoolServer } from '../src/server/index.ts';
import { Resources, dumpDatabase } from './helpers/resources.ts';
import { remoteOrder } from './fixtures/remoteMachines.ts';
import { runRemoteWorker, type RemoteWorkerEvent } from '../src/client/index.ts';
import { VirtualClock } from '../src/testing/index.ts';

const TOKEN = 'test-token-0123456789abcdef';
const WORKER = 'worker-token-0123456789abcdef';
const SHIPPER = 'shipper-token-0123456789abcdef';

const res = new Resources();
afterEach(() => res.dispose());

interface Api {
  runtime: Runtime;
  server: SpoolServer;
  dump: () => Record<string, string[]>;
  call: (route: string, body?: unknown, token?: string, method?: string) => Promise<{ status: number; body: any }>;
}

/**
 * A server over a runtime on a SQLite file. `serving`: the runtime as `spool serve --worker-token`
 * opens it (it applies events and runs the worker loop, with every activity's concurrency 0 here),
 * on a VirtualClock that only the test moves.
 */
async function open(serving?: { clock: VirtualClock }): Promise<Api> {
  const path = res.dbPath();
  const runtime = serving
    ? await res.runtime({ store: await res.sqlite(path, { clock: serving.clock }), clock: serving.clock, machines: [remoteOrder], runEffects: true, activityConcurrency: { charge: 0, ship: 0 } })
    : await res.runtime({ store: await res.sqlite(path), machines: [remoteOrder], runEffects: false });
  const workerTokens = [{ token: WORKER, activities: null }, { token: SHIPPER, activities: ['ship'] }];
  const server = res.track(await createServer({ runtime, port: 0, token: TOKEN, workerTokens }));
  const raw = res.raw(path, { readonly: true });
  const call: Api['call'] = async (route, body, token = WORKER, method = 'POST') => {
    const response = await fetch(`${server.url}${route}`, { method, headers: { authorization: `Bearer ${token}` }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : JSON.parse(text) };
  };
  return { runtime, server, dump: () => dumpDatabase(raw), call };
}

describe('spool serve: the worker routes', () => {
  it('a claim waits for a commit, then each attempt is dispatched with its token, applied once, and a resent completion is answered as accepted', async () => {
    const api = await open();
    // Waiting before any job exists: the start's commit wakes it (no clock involved).
    const waiting = api.call('/api/workers/claim', { slots: 4, activities: ['charge', 'ship'], waitMs: 30_000 });
    await api.runtime.start('remote-order', { amount: 5 }, { jobId: 'o1' });
    const claimed = await waiting;
    expect(claimed.status).toBe(200);
    const [charge] = claimed.body.dispatches;
    expect(charge).toMatchObject({ jobId: 'o1', machineId: 'remote-order', activity: 'charge', attempt: 1, input: { amount: 5 } });
    expect(charge.token).toMatch(/^sat1\./);

    expect((await api.call('/api/workers/heartbeat', { token: charge.token })).status).toBe(200);
    expect((await api.call('/api/workers/progress', { token: charge.token, percent: 40 })).status).toBe(200);
    expect((await api.call('/api/workers/assets', { token: charge.token, asset: { type: 'receipt', uri: 'receipt://1' } })).body).toEqual({ attached: true });
    const done = await api.call('/api/workers/complete', { token: charge.token, output: { charged: 5 } });
    expect(done).toEqual({ status: 200, body: { accepted: true, duplicate: false, outcome: 'succeeded', retryAt: null } });
    const job = await api.runtime.get('o1');
    expect(job.value).toBe('shipping');
    expect(job.progress).toBe(40);

    // Sent again (a worker that lost the answer): accepted, applied once.
    const before = api.dump();
    const again = await api.call('/api/workers/complete', { token: charge.token, output: { charged: 5 } });
    expect(again.body).toMatchObject({ accepted: true, duplicate: true, outcome: 'succeeded' });
    expect(api.dump()).toEqual(before);

    const [ship] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    expect(ship).toMatchObject({ activity: 'ship', idempotencyKey: expect.any(String) });
    await api.call('/api/workers/complete', { token: ship.token, output: { shipped: true } });
    const final = await api.runtime.get('o1');
    expect(final).toMatchObject({ value: 'done', status: 'done', context: { charged: { charged: 5 }, shipped: { shipped: true } } });
    const history = await api.runtime.history('o1');
    expect(history.filter((h) => h.eventType === 'xstate.done.actor.charge')).toHaveLength(1);
    expect((await api.runtime.details('o1')).assets.map((a) => a.uri)).toEqual(['receipt://1']);
  });

  it('a runtime that runs its activities remotely holds no job lease for them: each next activity is claimable at once, its clock never moved', async () => {
    const clock = new VirtualClock();
    const api = await open({ clock });
    const started = clock.now();
    await api.runtime.start('remote-order', { amount: 6 }, { jobId: 'l1' });
    // Claimed at once: the start's commit took no lease for an activity this runtime never runs.
    const [charge] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    expect(charge).toMatchObject({ jobId: 'l1', activity: 'charge', attempt: 1 });
    await api.call('/api/workers/complete', { token: charge.token, output: { charged: 6 } });
    expect((await api.runtime.get('l1')).value).toBe('shipping');
    // The commit that applied charge's outcome created ship: claimable now, not once a lease expires.
    const [ship] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    expect(ship).toMatchObject({ jobId: 'l1', activity: 'ship', attempt: 1 });
    await api.call('/api/workers/complete', { token: ship.token, output: { shipped: true } });
    expect(await api.runtime.get('l1')).toMatchObject({ value: 'done', status: 'done' });
    expect(clock.now()).toBe(started);
  });

  it('a failure is retried as a local one is; a malformed, edited or stale token is refused with its code and changes nothing; a cancel is told by the heartbeat', async () => {
    const api = await open();
    await api.runtime.start('remote-order', { amount: 1 }, { jobId: 'o2' });
    const [first] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    const failed = await api.call('/api/workers/fail', { token: first.token, error: { message: 'declined', retryAfterMs: 0 } });
    expect(failed.body).toMatchObject({ accepted: true, duplicate: false, outcome: 'retrying' });
    const [second] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    expect(second).toMatchObject({ activity: 'charge', attempt: 2, idempotencyKey: first.idempotencyKey });

    const before = api.dump();
    const malformed = await api.call('/api/workers/complete', { token: 'sat1.bm90LWpzb24', output: 1 });
    expect(malformed).toMatchObject({ status: 400, body: { error: { code: 'SPOOL_BAD_ATTEMPT_TOKEN' } } });
    expect((await api.call('/api/workers/heartbeat', { token: 42 })).body.error.code).toBe('SPOOL_INVALID');
    const fields = JSON.parse(Buffer.from(second.token.slice(5), 'base64url').toString());
    const edited = 'sat1.' + Buffer.from(JSON.stringify({ ...fields, r: 'remote~someone-else' })).toString('base64url');
    const refusals: [string, string][] = [[edited, 'complete'], [edited, 'heartbeat'], [edited, 'release'], [first.token, 'heartbeat'], [first.token, 'progress']];
    for (const [token, route] of refusals) {
      const refused = await api.call(`/api/workers/${route}`, { token, ...(route === 'progress' ? { percent: 10 } : {}) });
      expect(refused).toMatchObject({ status: 409, body: { error: { code: 'SPOOL_STALE_ATTEMPT' } } });
    }
    // The first attempt's end was recorded: sent again, it is answered with that end.
    expect((await api.call('/api/workers/complete', { token: first.token, output: 1 })).body).toMatchObject({ duplicate: true, outcome: 'retrying' });
    expect(api.dump()).toEqual(before);
    await api.call('/api/workers/complete', { token: second.token, output: { charged: 1 } });
    expect((await api.runtime.get('o2')).value).toBe('shipping');

    // A cancel waits for the remote attempt (its runner holds the job): the heartbeat says so, and its end lets it through.
    const [ship] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 })).body.dispatches;
    expect((await api.call('/api/workers/heartbeat', { token: ship.token })).body.cancelRequested).toBe(false);
    await api.call('/api/jobs/o2/cancel', { reason: 'customer asked' }, TOKEN);
    expect((await api.call('/api/workers/heartbeat', { token: ship.token })).body.cancelRequested).toBe(true);
    expect((await api.runtime.events('o2')).find((e) => e.type === 'CANCEL')?.status).toBe('pending');
    await api.call('/api/workers/fail', { token: ship.token, error: { message: 'job cancelled' } });
    expect(await api.runtime.get('o2')).toMatchObject({ value: 'cancelled', final: true });
  });

  it('a worker token reaches the worker routes only, and only its activities; the server token reaches them too', async () => {
    const api = await open();
    await api.runtime.start('remote-order', { amount: 2 }, { jobId: 'o3' });
    expect((await api.call('/api/jobs', undefined, WORKER, 'GET')).body.error.code).toBe('SPOOL_FORBIDDEN');
    expect((await api.call('/api/machines/remote-order/jobs', { input: { amount: 1 } }, WORKER)).status).toBe(403);
    expect((await api.call('/api/workers/claim', { slots: 1, waitMs: 0 }, 'wrong-token-0123456789abcdef')).status).toBe(401);
    expect((await api.call('/api/workers/activities', undefined, SHIPPER, 'GET')).body.activities).toEqual(['ship']);
    // The shipper may not run charge: nothing is claimed for it.
    expect((await api.call('/api/workers/claim', { slots: 1, waitMs: 0 }, SHIPPER)).body.dispatches).toEqual([]);
    const [charge] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 }, TOKEN)).body.dispatches;
    const refused = await api.call('/api/workers/complete', { token: charge.token, output: {} }, SHIPPER);
    expect(refused).toMatchObject({ status: 403, body: { error: { code: 'SPOOL_FORBIDDEN' } } });
    await api.call('/api/workers/complete', { token: charge.token, output: {} }, WORKER);
    const [ship] = (await api.call('/api/workers/claim', { slots: 1, waitMs: 0 }, SHIPPER)).body.dispatches;
    expect(ship.activity).toBe('ship');
  });

  it('runRemoteWorker runs attempts and, stopped, gives back the one still running after its grace period', async () => {
    const api = await open();
    const stop = new AbortController();
    const seen: RemoteWorkerEvent[] = [];
    let shipping!: () => void;
    const started = new Promise<void>((resolve) => (shipping = resolve));
    const running = runRemoteWorker({
      url: api.server.url,
      token: WORKER,
      concurrency: 2,
      graceMs: 0,
      signal: stop.signal,
      onEvent: (e) => (seen.push(e), e.type === 'activity.started' && e.activity === 'ship' && shipping()),
      activities: {
        charge: async ({ input, progress }) => (await progress(30), { charged: (input as { amount: number }).amount }),
        // Never ends on its own: given back when the worker stops.
        ship: ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      },
    });
    await api.runtime.start('remote-order', { amount: 4 }, { jobId: 'o5' });
    await started;
    stop.abort();
    await running;
    expect(seen.map((e) => e.type)).toEqual(['activity.started', 'activity.finished', 'activity.started', 'activity.released']);
    const details = await api.runtime.details('o5');
    expect(details.job).toMatchObject({ value: 'shipping', context: { charged: { charged: 4 } }, progress: 30 });
    const ship = details.effects.find((e) => e.src === 'ship')!;
    expect(ship).toMatchObject({ status: 'pending', maxAttempts: 4 });
    expect(details.attempts.filter((a) => a.effectId === ship.id).map((a) => a.outcome)).toEqual(['interrupted']);
  });

  it('four remote workers run 200 activities (100 jobs): each attempt claimed by one worker and applied once', async () => {
    const api = await open();
    const N = 100;
    for (let i = 0; i < N; i++) await api.runtime.start('remote-order', { amount: i }, { jobId: `m${i}` });
    let finals = 0;
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    api.runtime.subscribe((e) => e.type === 'job.committed' && e.job.final && ++finals === N && allDone());
    const stop = new AbortController();
    const ran = new Map<string, number>();
    const activity = (name: string) => async ({ idempotencyKey, input }: { idempotencyKey: string; input: unknown }) => {
      ran.set(idempotencyKey, (ran.get(idempotencyKey) ?? 0) + 1);
      return { [name]: (input as { amount: number }).amount };
    };
    const workers = Array.from({ length: 4 }, () =>
      runRemoteWorker({ url: api.server.url, token: WORKER, concurrency: 8, graceMs: 0, signal: stop.signal, activities: { charge: activity('charged'), ship: activity('shipped') } }),
    );
    await done;
    stop.abort();
    await Promise.all(workers);
    expect(ran.size).toBe(2 * N);
    expect([...ran.values()].every((n) => n === 1)).toBe(true);
    for (const i of [0, 57, N - 1]) {
      const d = await api.runtime.details(`m${i}`);
      expect(d.job).toMatchObject({ value: 'done', context: { charged: { charged: i }, shipped: { shipped: i } } });
      expect(d.attempts.map((a) => a.outcome)).toEqual(['succeeded', 'succeeded']);
      expect(d.history.filter((h) => h.eventType.startsWith('xstate.done.actor.'))).toHaveLength(2);
    }
  }, 120_000);
});
