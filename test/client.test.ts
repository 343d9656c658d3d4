/**
 * `spool/client` against a real `createServer` over a SQLite file, through real HTTP: the calls do
 * what the runtime's do; refusals come back as the runtime's error classes with their codes; a
 * job's waitFor rides its stream; `tail` and `tailAll` resume across a restart of the server (a
 * new runtime and server on the same file and port) with no gap and no repeat, and closing one
 * ends its request on the server. The type test at the end is checked by tsc (`npm test` runs it
 * first): each `@ts-expect-error` line must be an error. No sleeps: every wait is on an event, a
 * stream or a predicate.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setup } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import {
  JobNotFoundError,
  JobTerminalError,
  UnknownMachineError,
  ValidationError,
  WaitTimeoutError,
  type FeedRecord,
  type Runtime,
} from '../src/index.ts';
import { UnauthorizedError } from '../src/base/httpErrors.ts';
import { createClient, RemoteError, SseParser, type JobStreamEvent } from '../src/client/index.ts';
import { createServer, type SpoolServer } from '../src/server/index.ts';
import { Resources } from './helpers/resources.ts';

const TOKEN = 'client-token-0123456789abcdef';
/** A machine whose guard throws: its event's outcome is `failed`. */
const fragile = setup({
  types: { events: {} as { type: 'BOOM' } },
  guards: {
    broken: () => {
      throw new Error('boom');
    },
  },
}).createMachine({ id: 'fragile', initial: 'on', states: { on: { on: { BOOM: { guard: 'broken', target: 'off' } } }, off: { type: 'final' } } });
const machines = [jobLifecycle, fragile] as const;

const res = new Resources();
afterEach(() => res.dispose());

async function open(path = res.dbPath(), port = 0): Promise<{ runtime: Runtime; server: SpoolServer; path: string }> {
  const store = await res.sqlite(path);
  const runtime = await res.runtime({ store, machines });
  const server = res.track(await createServer({ runtime, port, token: TOKEN }));
  return { runtime, server, path };
}

describe('createClient: the calls', () => {
  it('start, send, startOrSend, get, list and cancel do what the runtime does, typed by the machines', async () => {
    const { server, runtime } = await open();
    const spool = createClient<typeof machines>({ url: server.url, token: TOKEN });
    const job = await spool.start('job-lifecycle', { name: 'resize', items: 2 }, { jobId: 'c-1' });
    expect(job).toMatchObject({ id: 'c-1', machineId: 'job-lifecycle', value: 'queued', revision: 1 });
    const again = await spool.start('job-lifecycle', { name: 'resize', items: 2 }, { jobId: 'c-1' });
    expect(again.revision).toBe(1);

    const sent = await spool.send(job.id, { type: 'START' }, { eventId: 'start-1' });
    expect(sent).toMatchObject({ status: 'applied', eventId: 'start-1', duplicate: false, job: { value: 'processing' } });
    expect(await spool.send(job.id, { type: 'START' }, { eventId: 'start-1' })).toMatchObject({ duplicate: true, status: 'applied' });
    const progress: number = (await spool.get(job.id)).context.progress;
    expect(progress).toBe(0);

    const created = await spool.startOrSend('job-lifecycle', 'c-2', { name: 'other' }, { type: 'START' }, { eventId: 'e-2' });
    expect(created).toMatchObject({ created: true, job: { id: 'c-2' } });
    expect(await spool.startOrSend('job-lifecycle', 'c-2', { name: 'other' }, { type: 'START' }, { eventId: 'e-2' })).toMatchObject({ created: false, duplicate: true });

    expect((await spool.list({ machineId: 'job-lifecycle' })).map((j) => j.id)).toEqual(['c-1', 'c-2']);
    expect((await spool.list({ limit: 1, afterId: 'c-1' })).map((j) => j.id)).toEqual(['c-2']);
    expect((await spool.list({ state: 'queued' })).map((j) => j.id)).toEqual([]);

    const cancelled = await spool.cancel(job.id, 'no longer needed');
    expect(cancelled.cancel).toMatchObject({ reason: 'no longer needed' });
    const done = await spool.waitFor(job.id, (j) => j.final);
    expect(done).toMatchObject({ value: 'cancelled', final: true });
    expect((await runtime.get('c-1')).value).toBe('cancelled');
  });

  it('startMany starts a batch in one request, typed by the machine; a bad item starts none and comes back as its error class', async () => {
    const { server, runtime } = await open();
    const spool = createClient<typeof machines>({ url: server.url, token: TOKEN });
    await spool.start('job-lifecycle', { name: 'a' }, { idempotencyKey: 'k-a' });
    const jobs = await spool.startMany('job-lifecycle', [
      { input: { name: 'a' }, idempotencyKey: 'k-a' },
      { input: { name: 'b', items: 3 }, jobId: 'm-b' },
      { input: { name: 'c' } },
    ]);
    const names: string[] = jobs.map((j) => j.context.name);
    expect(names).toEqual(['a', 'b', 'c']);
    expect(jobs[1]).toMatchObject({ id: 'm-b', machineId: 'job-lifecycle', value: 'queued', revision: 1 });
    expect(await spool.startMany('job-lifecycle', [])).toEqual([]);
    expect((await runtime.list({ machineId: 'job-lifecycle' })).length).toBe(3);

    const bad = await spool.startMany('job-lifecycle', [{ input: { name: 'd' } }, { input: { name: 42 as unknown as string } }]).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ValidationError);
    expect(bad).toMatchObject({ code: 'SPOOL_INVALID', details: { item: 1 }, message: expect.stringMatching(/^startMany item 1: /) });
    const tooMany = await spool.startMany('job-lifecycle', Array.from({ length: 1001 }, () => ({ input: { name: 'x' } }))).catch((e: unknown) => e);
    expect(tooMany).toBeInstanceOf(ValidationError);
    expect(tooMany).toMatchObject({ details: { items: 1001, limit: 1000 }, message: expect.stringContaining('at most 1000 items') });
    await expect(createClient({ url: server.url, token: TOKEN }).startMany('no-such-machine', [{}])).rejects.toBeInstanceOf(UnknownMachineError);
    expect((await runtime.list({ machineId: 'job-lifecycle' })).length).toBe(3);
  });

  it('waitFor resolves from the job stream once the predicate holds, and says why when it cannot', async () => {
    const { server, runtime } = await open();
    const requests: string[] = [];
    const fetcher = (url: string, init: RequestInit) => (requests.push(`${init.method ?? 'GET'} ${new URL(url).pathname}`), fetch(url, init));
    const spool = createClient<typeof machines>({ url: server.url, token: TOKEN, fetch: fetcher });
    const job = await spool.start('job-lifecycle', { name: 'resize', items: 3 });
    const waiting = spool.waitFor(job.id, (j) => j.context.progress >= 50);
    // The wait is live once its stream is open on the server.
    await vi.waitFor(() => expect(server.streams()).toHaveLength(1), { timeout: 30_000, interval: 20 });
    await runtime.send(job.id, { type: 'START' });
    await runtime.send(job.id, { type: 'PROGRESS', percent: 20 });
    await runtime.send(job.id, { type: 'PROGRESS', percent: 60 });
    expect((await waiting).context.progress).toBe(60);
    expect(requests).toContain(`GET /api/jobs/${job.id}/stream`);
    // One read of the job at the start, and at most one per commit after it: no polling.
    expect(requests.filter((r) => r === `GET /api/jobs/${job.id}`).length).toBeLessThanOrEqual(4);
    await vi.waitFor(() => expect(server.streams()).toHaveLength(0), { timeout: 30_000, interval: 20 });

    const finishing = spool.waitFor(job.id, (j) => j.value === 'queued');
    await vi.waitFor(() => expect(server.streams()).toHaveLength(1), { timeout: 30_000, interval: 20 });
    await runtime.send(job.id, { type: 'FINISH' });
    await expect(finishing).rejects.toBeInstanceOf(JobTerminalError);

    const other = await spool.start('job-lifecycle', { name: 'idle' });
    await expect(spool.waitFor(other.id, (j) => j.final, { timeoutMs: 1 })).rejects.toBeInstanceOf(WaitTimeoutError);
    const aborted = new AbortController();
    const abortedWait = spool.waitFor(other.id, (j) => j.final, { signal: aborted.signal });
    aborted.abort(new Error('gave up'));
    await expect(abortedWait).rejects.toThrow('gave up');
  });
});

describe('createClient: errors', () => {
  it('rethrows the server\'s error body as the runtime\'s error class with its code and details', async () => {
    const { server } = await open();
    const spool = createClient<typeof machines>({ url: server.url, token: TOKEN });
    const bad = await spool.start('job-lifecycle', { name: 42 as unknown as string }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ValidationError);
    expect(bad).toMatchObject({ code: 'SPOOL_INVALID', category: 'bad-input' });

    const missing = await spool.get('nope').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(JobNotFoundError);
    expect(missing).toMatchObject({ code: 'SPOOL_NOT_FOUND', details: { jobId: 'nope' } });
    await expect(spool.tail('nope').next()).rejects.toBeInstanceOf(JobNotFoundError);

    const wrong = createClient<typeof machines>({ url: server.url, token: 'another-token-0123456789' });
    const refused = await wrong.start('job-lifecycle', { name: 'x' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnauthorizedError);
    expect(refused).toMatchObject({ code: 'SPOOL_UNAUTHORIZED', message: expect.stringContaining('Wrong token') });

    const untyped = createClient({ url: server.url, token: TOKEN });
    await expect(untyped.start('no-such-machine')).rejects.toBeInstanceOf(UnknownMachineError);
    await expect(untyped.send('nope', { type: 'START' })).rejects.toMatchObject({ code: 'SPOOL_NOT_FOUND' });

    const job = await spool.start('job-lifecycle', { name: 'x' });
    await expect(untyped.send(job.id, { type: 'PROGRESS', percent: 500 })).rejects.toBeInstanceOf(ValidationError);
    // A send whose outcome is `failed` resolves with it, as the runtime's does (the server answers 422).
    const fragileJob = await spool.start('fragile');
    const failed = await spool.send(fragileJob.id, { type: 'BOOM' });
    expect(failed).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('boom') }, job: { value: 'on' } });
  });

  it('an unknown code is a RemoteError with that code; an unreachable server is SPOOL_UNREACHABLE', async () => {
    const body = JSON.stringify({ error: { code: 'SPOOL_FROM_THE_FUTURE', category: 'conflict', message: 'newer', extra: 1 } });
    const future = createClient({ url: 'http://127.0.0.1:1', fetch: async () => new Response(body, { status: 409 }) });
    const error = await future.get('x').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: 'SPOOL_FROM_THE_FUTURE', category: 'conflict', message: 'newer', status: 409, details: { extra: 1 } });

    const proxy = createClient({ url: 'http://127.0.0.1:1', fetch: async () => new Response('<html>bad gateway</html>', { status: 502 }) });
    await expect(proxy.get('x')).rejects.toMatchObject({ code: 'SPOOL_HTTP', category: 'retryable', status: 502 });

    const { server } = await open();
    const url = server.url;
    await server.close();
    await expect(createClient({ url }).get('x')).rejects.toMatchObject({ code: 'SPOOL_UNREACHABLE', category: 'retryable' });
  });
});

describe('tail and tailAll', () => {
  it('resume across a server restart on the same database, with no gap and no repeat; closing one ends its request', async () => {
    const first = await open();
    const port = Number(new URL(first.server.url).port);
    // Each stream request and the Last-Event-ID it resumed after.
    const streamRequests: string[] = [];
    const fetcher = (url: string, init: RequestInit) => {
      const path = new URL(url).pathname;
      if (path.endsWith('/stream')) streamRequests.push(`${path} after ${(init.headers as Record<string, string>)['last-event-id'] ?? 'none'}`);
      return fetch(url, init);
    };
    const spool = createClient<typeof machines>({ url: first.server.url, token: TOKEN, fetch: fetcher, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
    const job = await spool.start('job-lifecycle', { name: 'resize', items: 2 });
    const tail = spool.tail(job.id);
    const all = spool.tailAll({ machine: 'job-lifecycle' });
    await Promise.all([tail.whenConnected(), all.whenConnected()]);
    await spool.send(job.id, { type: 'START' });

    const seen: JobStreamEvent[] = [];
    const feed: FeedRecord[] = [];
    const take = async <T>(stream: AsyncIterator<T>, into: T[], count: number) => {
      while (into.length < count) {
        const next = await stream.next();
        if (next.done) throw new Error(`the stream ended after ${into.length}`);
        into.push(next.value);
      }
    };
    await take(tail, seen, 2);
    await take(all, feed, 2);

    // The server goes away with its runtime; another runtime on the file commits meanwhile.
    await first.server.close();
    await first.runtime.close();
    const meanwhile = await res.runtime({ store: await res.sqlite(first.path), machines });
    await meanwhile.send(job.id, { type: 'PROGRESS', percent: 40 });
    await meanwhile.send(job.id, { type: 'ITEM_DONE' });
    await meanwhile.close();

    // A new server on the same port and file: the streams come back on their own.
    const second = await open(first.path, port);
    await take(tail, seen, 4);
    await take(all, feed, 4);
    await Promise.all([tail.whenConnected(), all.whenConnected()]);
    await spool.send(job.id, { type: 'ITEM_DONE' }); // the second of two items: the job completes
    const rest: JobStreamEvent[] = [];
    for await (const row of tail) rest.push(row);
    seen.push(...rest);
    // `break` calls return(), which aborts the request: the server sees the stream go.
    expect(second.server.streams()).toHaveLength(1);
    for await (const record of all) {
      feed.push(record);
      if (feed.length === seen.length) break;
    }
    await vi.waitFor(() => expect(second.server.streams()).toHaveLength(0), { timeout: 30_000, interval: 20 });

    const history = await second.runtime.history(job.id);
    expect(seen.map((r) => r.revision)).toEqual(history.map((h) => h.revision));
    expect(seen.map((r) => r.revision)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.map(({ final: _f, status: _s, ...row }) => row)).toEqual(history);
    expect(seen.at(-1)).toMatchObject({ final: true, status: 'done', to: 'completed' });
    expect(feed.map((r) => r.revision)).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(feed.map((r) => r.seq)).size).toBe(5);
    expect(all.lastEventId).toBe(feed.at(-1)!.seq);
    // The reconnects resumed after the last event received (then the finished job's stream said 204).
    const jobStream = `/api/jobs/${job.id}/stream`;
    expect(streamRequests.filter((r) => r.startsWith(jobStream) && !r.endsWith('after 2'))).toEqual([`${jobStream} after none`, `${jobStream} after 5`]);
    expect(streamRequests).toContain(`${jobStream} after 2`);
    expect(streamRequests).toContain(`/api/stream after ${feed[1]!.seq}`);
  });
});

describe('a silent connection', () => {
  it('is dropped after idleTimeoutMs and resumed after the last event, so the next commit comes once', async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines });
    // No heartbeat: the connection stays silent until a commit.
    const server = res.track(await createServer({ runtime, port: 0, token: TOKEN, heartbeatMs: 600_000 }));
    const requests: string[] = [];
    const fetcher = (url: string, init: RequestInit) => {
      if (url.endsWith('/stream')) requests.push((init.headers as Record<string, string>)['last-event-id'] ?? 'none');
      return fetch(url, init);
    };
    const spool = createClient<typeof machines>({ url: server.url, token: TOKEN, fetch: fetcher, reconnect: { idleTimeoutMs: 50, initialDelayMs: 10 } });
    const job = await spool.start('job-lifecycle', { name: 'quiet' });
    const tail = spool.tail(job.id);
    expect((await tail.next()).value).toMatchObject({ revision: 1 });
    const connections = requests.length;
    const pending = tail.next();
    // The silent connection is dropped: a new request, after event 1.
    await vi.waitFor(() => expect(requests.length).toBeGreaterThan(connections), { timeout: 30_000, interval: 20 });
    await spool.send(job.id, { type: 'START' });
    expect((await pending).value).toMatchObject({ revision: 2 });
    expect(requests[0]).toBe('none');
    expect(new Set(requests.slice(connections))).toEqual(new Set(['1']));
    await tail.return();
  });
});

describe('SseParser', () => {
  it('parses the SSE format: CR, LF and CRLF line ends split anywhere, multi-line data, comments, ids kept', () => {
    const text = ': hello\r\nretry: 1000\r\nid: 1\r\nevent: applied\r\ndata: {"a":\r\ndata: 1}\r\n\r\nid: 2\ndata: x\n\ndata: y\r\r';
    for (let cut = 0; cut <= text.length; cut += 1) {
      const parser = new SseParser();
      const out = [...parser.push(text.slice(0, cut)), ...parser.push(text.slice(cut))];
      expect(out).toEqual([
        { id: '1', event: 'applied', data: '{"a":\n1}' },
        { id: '2', event: 'message', data: 'x' },
        { id: '2', event: 'message', data: 'y' },
      ]);
    }
  });
});

/** Compile-time only (tsc checks each `@ts-expect-error`): the client is typed by the machines. */
export async function typeChecks(spool: ReturnType<typeof createClient<typeof machines>>): Promise<void> {
  const job = await spool.start('job-lifecycle', { name: 'resize' });
  await spool.send(job.id, { type: 'PROGRESS', percent: 40 });
  const progress: number = (await spool.get(job.id)).context.progress;
  void progress;
  // @ts-expect-error a wrong machine id
  await spool.start('job-lifecycel', { name: 'resize' });
  // @ts-expect-error a wrong input field
  await spool.start('job-lifecycle', { nmae: 'resize' });
  // @ts-expect-error an unknown event
  await spool.send(job.id, { type: 'PAUSE' });
  // @ts-expect-error an event's field of the wrong type
  await spool.send(job.id, { type: 'PROGRESS', percent: 'half' });
  // @ts-expect-error startOrSend checks the machine's input and events too
  await spool.startOrSend('job-lifecycle', 'j', { name: 'x' }, { type: 'PAUSE' });
  // @ts-expect-error startMany checks each item's input
  await spool.startMany('job-lifecycle', [{ input: { name: 'x' } }, { input: { nmae: 'y' } }]);
  // @ts-expect-error startMany needs the input of a machine that takes one
  await spool.startMany('job-lifecycle', [{ jobId: 'j' }]);
  // @ts-expect-error a context field the machine does not have
  void (await spool.get(job.id)).context.nope;
}
