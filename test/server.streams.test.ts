/**
 * The event streams of `spool serve` (SSE) with Node's fetch against a real server: a job's stream
 * replays its history and closes after the final commit (then 204 on reconnect); the all-jobs
 * stream filters and delivers commits of this process and of other connections; a slow client
 * holds the server's stream back instead of growing a buffer, and one that stalls is
 * disconnected and resumes with Last-Event-ID; heartbeats on idle streams; and a reconnect with
 * Last-Event-ID across a restart of the server process (a child) gets exactly what it missed,
 * checked against the history. No sleeps: every wait is on an event, a stream or a predicate.
 * The postgres project runs it all on a Postgres database (`spool serve --db postgres://...`).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setup } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import type { FeedRecord, Runtime, TransitionRecord } from '../src/index.ts';
import { createServer, type ServerOptions, type SpoolServer } from '../src/server/index.ts';
import { PROJECT_ROOT, Resources } from './helpers/resources.ts';
import { SseClient, spawnServe, type SseEvent, type ServeChild } from './helpers/sse.ts';
import { dbArgFor } from './helpers/stores.ts';

const TOKEN = 'stream-token-0123456789abcdef';

/** Takes notes of any size: a slow client's backlog in few events. */
const notes = setup({}).createMachine({
  id: 'notes',
  initial: 'open',
  states: { open: { on: { NOTE: { actions: () => undefined }, CLOSE: 'closed' } }, closed: { type: 'final' } },
});

const res = new Resources();
const children: ServeChild[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.child.exitCode === null) c.child.kill('SIGKILL');
  await res.dispose();
});

async function open(server: Partial<ServerOptions> = {}, path = res.dbPath()): Promise<{ runtime: Runtime; server: SpoolServer; path: string }> {
  const store = await res.sqlite(path, { synchronous: 'NORMAL' });
  const runtime = await res.runtime({ store, machines: [jobLifecycle, notes] });
  return { runtime, server: res.track(await createServer({ runtime, port: 0, token: TOKEN, ...server })), path };
}

function revisions(events: SseEvent[]): number[] {
  return events.map((e) => Number(e.id));
}

/** The history as a job's stream sends it (the JSON of each row, without the stream's own fields). */
function rows(events: SseEvent[]): TransitionRecord[] {
  return events.map((e) => {
    const { final: _f, status: _s, ...row } = JSON.parse(e.data) as TransitionRecord & { final: boolean; status?: string };
    return row;
  });
}

describe("a job's stream", () => {
  it('replays the history, follows new commits, and closes after the final one; a reconnect at the end gets 204', async () => {
    const { runtime, server } = await open();
    const job = await runtime.start('job-lifecycle', { name: 'a', items: 1 });
    const client = res.track(await SseClient.open(`${server.url}/api/jobs/${job.id}/stream`));
    expect(client.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await client.next()).toMatchObject({ id: '1', event: 'started' });
    await runtime.send(job.id, { type: 'START' });
    await runtime.send(job.id, { type: 'PROGRESS', percent: 40 });
    await runtime.send(job.id, { type: 'FINISH' });
    const rest = await client.rest(); // returns only because the server closed the stream
    expect(revisions(rest)).toEqual([2, 3, 4]);
    expect(JSON.parse(rest.at(-1)!.data)).toMatchObject({ final: true, status: 'done', to: 'completed' });
    expect(rows(rest)).toEqual(JSON.parse(JSON.stringify((await runtime.history(job.id)).slice(1))));

    const resumed = res.track(await SseClient.open(`${server.url}/api/jobs/${job.id}/stream`, '2'));
    expect(revisions(await resumed.rest())).toEqual([3, 4]);
    const atEnd = await fetch(`${server.url}/api/jobs/${job.id}/stream`, { headers: { 'last-event-id': '4' } });
    expect(atEnd.status).toBe(204);
    await vi.waitFor(() => expect(server.streams()).toEqual([]), { timeout: 20_000 });
  });

  it('marks the final commit final even when it lands between the stream reading the job and reading its history', async () => {
    const { runtime, server } = await open();
    const job = await runtime.start('job-lifecycle', { name: 'race', items: 1 });
    await runtime.send(job.id, { type: 'START' });
    const client = res.track(await SseClient.open(`${server.url}/api/jobs/${job.id}/stream`));
    expect(revisions([(await client.next())!, (await client.next())!])).toEqual([1, 2]);
    // The next history read first commits the final event: the job the stream read before it is one revision old.
    const history = runtime.history.bind(runtime);
    let raced = false;
    runtime.history = async (jobId, ...rest) => {
      if (!raced && jobId === job.id) {
        raced = true;
        await runtime.send(job.id, { type: 'FINISH' });
      }
      return history(jobId, ...rest);
    };
    await runtime.send(job.id, { type: 'PROGRESS', percent: 40 });
    const rest = await client.rest();
    expect(raced).toBe(true);
    expect(revisions(rest)).toEqual([3, 4]);
    expect(JSON.parse(rest[0]!.data)).toMatchObject({ final: false, to: 'processing' });
    expect(JSON.parse(rest[1]!.data)).toMatchObject({ final: true, status: 'done', to: 'completed' });
  });

  it('sends heartbeat comments while nothing happens', async () => {
    const { runtime, server } = await open({ heartbeatMs: 20 });
    const job = await runtime.start('job-lifecycle', { name: 'idle' });
    const client = res.track(await SseClient.open(`${server.url}/api/jobs/${job.id}/stream`));
    expect(revisions(await client.untilComment('heartbeat'))).toEqual([1]);
  });
});

describe('the all-jobs stream', () => {
  it("delivers every job's commits in seq order, filtered by machine, job and kind, from this process and from others", async () => {
    const { runtime, server, path } = await open({ pollMs: 10 });
    const elsewhere = await res.runtime({ store: await res.sqlite(path), machines: [jobLifecycle, notes], recover: false });
    const all = res.track(await SseClient.open(`${server.url}/api/stream`));
    const lifecycleOnly = res.track(await SseClient.open(`${server.url}/api/stream?machine=job-lifecycle&kind=started,applied`));
    const a = await runtime.start('job-lifecycle', { name: 'a' });
    const n = await runtime.start('notes', {});
    const b = await elsewhere.start('job-lifecycle', { name: 'b' }); // another connection: seen by polling
    await elsewhere.send(b.id, { type: 'START' });
    await runtime.send(n.id, { type: 'NOTE' });
    await runtime.send(a.id, { type: 'NO_TRANSITION_HERE' }).catch(() => undefined); // refused: no row
    await runtime.send(a.id, { type: 'FINISH' }); // ignored in queued: a row, of kind ignored
    const byJob = res.track(await SseClient.open(`${server.url}/api/stream?job=${encodeURIComponent(b.id)}`));

    const seen: SseEvent[] = [];
    for (let i = 0; i < 6; i++) seen.push((await all.next())!);
    const records = seen.map((e) => JSON.parse(e.data) as FeedRecord);
    expect(records.map((r) => [r.jobId, r.revision, r.outcome])).toEqual([
      [a.id, 1, 'started'],
      [n.id, 1, 'started'],
      [b.id, 1, 'started'],
      [b.id, 2, 'applied'],
      [n.id, 2, 'applied'],
      [a.id, 2, 'ignored'],
    ]);
    expect(seen.map((e) => Number(e.id))).toEqual(records.map((r) => r.seq));
    expect(records.map((r) => r.seq)).toEqual([...records.map((r) => r.seq)].sort((x, y) => x - y));
    const filtered = [(await lifecycleOnly.next())!, (await lifecycleOnly.next())!, (await lifecycleOnly.next())!];
    expect(filtered.map((e) => [JSON.parse(e.data).jobId, e.event])).toEqual([[a.id, 'started'], [b.id, 'started'], [b.id, 'applied']]);
    expect([(await byJob.next())!, (await byJob.next())!].map((e) => JSON.parse(e.data).revision)).toEqual([1, 2]);
  });
});

describe('a slow client', () => {
  /**
   * A notes job whose stream a client opened and read the first event of, then `total` notes of
   * 200 kB each (16 MB for 80: far more than the socket buffers hold) that it has not read.
   */
  async function unread(stallMs: number, total: number): Promise<{ runtime: Runtime; server: SpoolServer; jobId: string; client: SseClient }> {
    const { runtime, server } = await open({ stallMs });
    const job = await runtime.start('notes', {});
    const client = res.track(await SseClient.open(`${server.url}/api/jobs/${job.id}/stream`));
    expect(await client.next()).toMatchObject({ id: '1' });
    const big = 'n'.repeat(200_000);
    for (let i = 0; i < total; i++) await runtime.send(job.id, { type: 'NOTE', text: big });
    return { runtime, server, jobId: job.id, client };
  }

  it('holds its stream back (the server reads no further than the client takes), then gets everything, in order', async () => {
    const total = 80;
    const { runtime, server, jobId, client } = await unread(120_000, total);
    // The client reads nothing: the server's stream waits on its write, far behind the history.
    await vi.waitFor(() => expect(server.streams()[0]).toMatchObject({ writing: true }), { timeout: 20_000 });
    const held = server.streams()[0]!;
    expect(held.cursor).toBeLessThan(total + 1);
    expect((await runtime.get(jobId)).revision).toBe(total + 1);
    // Once it reads, it gets every event after the first, each once, in order.
    const got: number[] = [];
    while (got.length < total) got.push(Number((await client.next())!.id));
    expect(got).toEqual(Array.from({ length: total }, (_, i) => i + 2));
  });

  it('is disconnected when it takes nothing for stallMs, and resumes with Last-Event-ID without a gap or a repeat', async () => {
    const { runtime, server, jobId, client } = await unread(200, 80);
    await runtime.send(jobId, { type: 'CLOSE' });
    await vi.waitFor(() => expect(server.streams()).toEqual([]), { timeout: 20_000 });
    // What reached the client before the server gave up on it, then the rest from its last id.
    const reached = await client.rest();
    const before = [1, ...revisions(reached)];
    expect(before.length).toBeLessThan(82);
    // Resume as an EventSource does: from the last id, again after each disconnect (on a loaded
    // machine the resumed stream may stall too, at stallMs 200), until the final event.
    const all = [...before];
    for (let last = reached.at(-1); last === undefined || !JSON.parse(last.data).final; ) {
      const resumed = res.track(await SseClient.open(`${server.url}/api/jobs/${jobId}/stream`, String(all.at(-1))));
      const got = await resumed.rest();
      all.push(...revisions(got));
      last = got.at(-1) ?? last;
    }
    expect(all).toEqual(Array.from({ length: 82 }, (_, i) => i + 1));
  });
});

describe('many paused clients', () => {
  it('cost a commit one shared read, not one each, and add no listener per client', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const { runtime, server } = await open();
      await runtime.start('notes', {});
      const reads = { count: 0 };
      const historySince = runtime.historySince.bind(runtime);
      runtime.historySince = (...args: Parameters<Runtime['historySince']>) => {
        reads.count += 1;
        return historySince(...args);
      };
      // 30 clients of the all-jobs stream, each takes the first event and then reads nothing.
      const clients = await Promise.all(Array.from({ length: 30 }, () => SseClient.open(`${server.url}/api/stream`)));
      for (const client of clients) res.track(client);
      const first = await Promise.all(clients.map((c) => c.next()));
      expect(first.map((e) => e!.id)).toEqual(clients.map(() => first[0]!.id));
      reads.count = 0;
      const job = await runtime.start('notes', {});
      const seq = (await runtime.historySince(0, { jobId: job.id, limit: 1 })).records[0]!.seq;
      reads.count -= 1; // the line above
      // Every stream has sent the new commit, from one read of the store between them.
      await vi.waitFor(() => expect(server.streams().map((s) => s.cursor)).toEqual(clients.map(() => seq)), { timeout: 20_000 });
      expect(reads.count).toBeLessThanOrEqual(2);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
  it("of other jobs' streams are not woken by a job's commit", async () => {
    const { runtime, server } = await open();
    // This process's commits only: a change the store hears from elsewhere (on Postgres, a NOTIFY
    // of another store on the database) names no job and rightly wakes every stream.
    const heard = await runtime.store.externalChanges?.();
    if (heard !== undefined) runtime.store.externalChanges = async () => heard;
    const jobs = await Promise.all(Array.from({ length: 20 }, () => runtime.start('notes', {})));
    const clients = await Promise.all(jobs.map((j) => SseClient.open(`${server.url}/api/jobs/${j.id}/stream`)));
    for (const client of clients) res.track(client);
    expect((await Promise.all(clients.map((c) => c.next()))).map((e) => e!.id)).toEqual(jobs.map(() => '1'));
    const reads = { count: 0 };
    const get = runtime.get.bind(runtime);
    runtime.get = ((...args: Parameters<Runtime['get']>) => {
      reads.count += 1;
      return get(...args);
    }) as Runtime['get'];
    await runtime.send(jobs[0]!.id, { type: 'NOTE' });
    await vi.waitFor(() => expect(server.streams().map((s) => s.cursor).sort()).toEqual([...jobs.map(() => 1).slice(1), 2]), { timeout: 20_000 });
    // The watched job's stream read it (twice a page); the 19 others did not wake.
    expect(reads.count).toBeLessThanOrEqual(6);
  });
});

describe('Last-Event-ID across a restart of the server process', () => {
  it('gets exactly the events it missed, then the live ones: no gap, no repeat, as in the history', async () => {
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    const first = await spawnServe(await dbArgFor(db), PROJECT_ROOT, TOKEN);
    children.push(first);
    const post = (url: string, route: string, body: unknown) =>
      fetch(`${url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>);
    const started = await post(first.url, '/api/machines/job-lifecycle/jobs', { input: { name: 'r', items: 1 }, jobId: 'r1' });
    expect(started.created).toBe(true);
    await post(first.url, '/api/jobs/r1/events', { type: 'START' });
    const jobStream = await SseClient.open(`${first.url}/api/jobs/r1/stream`);
    const allStream = await SseClient.open(`${first.url}/api/stream`);
    const jobSeen = [(await jobStream.next())!, (await jobStream.next())!];
    const allSeen = [(await allStream.next())!];
    await jobStream.close();
    await allStream.close();

    // The server stops; commits go on without it (another process), then a new server starts.
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const writer = await res.runtime({ store: await res.sqlite(db), machines: [jobLifecycle], recover: false });
    await writer.send('r1', { type: 'PROGRESS', percent: 30 });
    await writer.start('job-lifecycle', { name: 'other' }, { jobId: 'r2' });
    const second = await spawnServe(await dbArgFor(db), PROJECT_ROOT, TOKEN);
    children.push(second);
    const jobResumed = res.track(await SseClient.open(`${second.url}/api/jobs/r1/stream`, jobSeen.at(-1)!.id));
    const allResumed = res.track(await SseClient.open(`${second.url}/api/stream`, allSeen.at(-1)!.id));
    // Live ones: through the new server, and from the other process again.
    await post(second.url, '/api/jobs/r1/events', { type: 'PROGRESS', percent: 60 });
    await writer.send('r1', { type: 'FINISH' });
    const jobAll = [...jobSeen, ...(await jobResumed.rest())]; // ends: the job finished
    const history = await writer.history('r1');
    expect(revisions(jobAll)).toEqual(history.map((h) => h.revision));
    expect(rows(jobAll)).toEqual(JSON.parse(JSON.stringify(history)));

    const feed: FeedRecord[] = [];
    for (let after = 0; ; ) {
      const page = await writer.historySince(after, { limit: 1000 });
      feed.push(...page.records);
      if (page.next === after) break;
      after = page.next;
    }
    const allGot = [...allSeen];
    while (allGot.length < feed.length) allGot.push((await allResumed.next())!);
    expect(allGot.map((e) => Number(e.id))).toEqual(feed.map((r) => r.seq));
    expect(allGot.map((e) => JSON.parse(e.data))).toEqual(JSON.parse(JSON.stringify(feed)));
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});

describe('spool worker --serve', () => {
  it('serves the API from inside a worker, which runs what the API starts, and stops on SIGTERM', async () => {
    const db = `${res.tempDir()}/spool.db`;
    const worker = await spawnServe(await dbArgFor(db), PROJECT_ROOT, TOKEN, ['worker', '--poll-ms', '20', '--serve', '--port', '0']);
    children.push(worker);
    const post = (route: string, body: unknown) =>
      fetch(`${worker.url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: JSON.stringify(body) });
    // retrying-job runs an activity in `processing`: only a worker gets it to its end.
    expect((await post('/api/machines/retrying-job/jobs', { input: { name: 'w', items: 2 }, jobId: 'w1' })).status).toBe(201);
    const stream = res.track(await SseClient.open(`${worker.url}/api/jobs/w1/stream`));
    expect((await post('/api/jobs/w1/events', { type: 'START' })).status).toBe(200);
    const events = (await stream.rest()).map((e) => JSON.parse(e.data) as { eventType: string; to: unknown; final: boolean });
    expect(events.map((e) => [e.eventType, e.to, e.final])).toEqual([
      ['xstate.init', 'queued', false],
      ['START', 'processing', false],
      ['xstate.done.actor.process', 'completed', true],
    ]);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
