/**
 * What only the Postgres store has to prove, on the run's real server (test/helpers/postgres.ts):
 * its schema checks, concurrency between two stores (two "hosts") on one database, a connection
 * dropped during COMMIT, LISTEN/NOTIFY wake-ups, and `--db postgres://…` on the CLI. (The port's
 * contract itself is the store contract suite, run on Postgres by the `postgres` project.)
 */
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { setup } from 'xstate';
import { createRuntime, rideOutFaults, runWorker, type StorageFaultEvent } from '../src/index.ts';
import { createServer, connect, type AddressInfo, type Server } from 'node:net';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { pgMigrations } from '../persistence/drivers/pg/open.ts';
import { NotASpoolDatabaseError } from '../persistence/drivers/better-sqlite3/index.ts';
import { CommitOutcomeUnknown, type NewInboxEvent, type TransitionCommit } from '../src/ports/store.ts';
import { DatabaseBusyError, SchemaTooNewError, StorageFullError, StorageIoError } from '../src/base/errors.ts';
import { pgFault } from '../persistence/drivers/pg/faults.ts';
import { perTestPostgres } from './helpers/pgTest.ts';
import { runSpool } from './helpers/spoolCli.ts';
import { PROJECT_ROOT } from './helpers/resources.ts';
import { newJob } from './store.contract.ts';
import { effectOf } from './helpers/dueClaims.ts';

const T0 = 1_700_000_000_000;
const { cleanups, database, open } = perTestPostgres();

/** A raw connection to `url`, closed after the test. */
async function raw(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

function event(jobId: string, eventId: string): NewInboxEvent {
  return { jobId, eventId, type: 'GO', payload: { type: 'GO' }, payloadHash: `h:${eventId}`, at: T0 };
}

function commitOf(jobId: string, expectedRevision: number, value: string) {
  return {
    jobId,
    expectedRevision,
    job: { status: 'active' as const, value, statePaths: [value], context: {}, snapshot: JSON.stringify({ value }), machineVersion: '1', at: T0 + expectedRevision },
    transition: { eventId: null, eventType: 'GO', payload: { type: 'GO' }, from: 'idle', to: value, outcome: 'applied' as const, error: null, at: T0 + expectedRevision },
  };
}

describe('PostgresStore: the schema', () => {
  it('migrates a new database once, records its version, and opens it again unchanged', async () => {
    const url = await database();
    const [a, b] = await Promise.all([open(url), open(url)]);
    const latest = pgMigrations().at(-1)!.version;
    expect(a.schemaVersion).toBe(latest);
    expect(b.schemaVersion).toBe(latest);
    const c = await raw(url);
    expect((await c.query('SELECT version, name FROM spool_migrations ORDER BY version')).rows).toEqual(pgMigrations().map((m) => ({ version: m.version, name: m.name })));
  });

  it("refuses a database holding another application's tables, and changes nothing", async () => {
    const url = await database();
    const c = await raw(url);
    await c.query('CREATE TABLE customers (id int PRIMARY KEY)');
    await expect(PostgresStore.open(url)).rejects.toBeInstanceOf(NotASpoolDatabaseError);
    await expect(PostgresStore.open(url)).rejects.toThrow(/not a Spool database.*customers/);
    const tables = await c.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename");
    expect(tables.rows).toEqual([{ tablename: 'customers' }]);
  });

  it('upgrades a schema-3 database: its running attempt moves onto its effect row and reads back the same, then ends as a new one would', async () => {
    const url = await database();
    const effect = { id: 'a~work~1', jobId: 'a', actorId: 'work', src: 'work', input: {}, maxAttempts: 3, unsafe: false, createdRevision: 1, at: 1 };
    const summary = (list: { attempt: number; runner: string | null; startedAt: number; endedAt: number | null; outcome: string }[]) =>
      list.map((a) => [a.attempt, a.runner, a.startedAt, a.endedAt, a.outcome]);
    const first = await open(url);
    await first.createJob({ ...newJob('a'), effects: [effect] });
    expect(await first.claimEffect(effect.id, 'w1', 10, 60_000)).toMatchObject({ attempt: 1 });
    await first.finishAttempt(effect.id, 1, { kind: 'failed', error: { name: 'Error', message: 'boom' }, retryAt: 20, event: null }, 15);
    await first.releaseLeases('w1', 'all');
    expect(await first.claimEffect(effect.id, 'w2', 25, 60_000)).toMatchObject({ attempt: 2 });
    const before = await first.listAttempts('a');
    expect(summary(before)).toEqual([[1, 'w1', 10, 15, 'failed'], [2, 'w2', 25, null, 'running']]);
    await first.close();
    // Back to schema 3's layout: the running attempt a row of effect_attempts, no view, no columns.
    const c = await raw(url);
    await c.query(`INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, ended_at, outcome, error)
        SELECT id, attempt, attempt_runner, attempt_started_at, attempt_ended_at, coalesce(attempt_outcome, 'running'), attempt_error FROM effects
        WHERE attempt_started_at IS NOT NULL;
      DROP VIEW attempts;
      ALTER TABLE effects DROP COLUMN attempt_runner, DROP COLUMN attempt_started_at, DROP COLUMN attempt_ended_at, DROP COLUMN attempt_outcome, DROP COLUMN attempt_error;
      DELETE FROM spool_migrations WHERE version >= 4`);

    const store = await open(url);
    expect(store.schemaVersion).toBe(pgMigrations().at(-1)!.version);
    expect(await store.listAttempts('a')).toEqual(before);
    expect((await c.query('SELECT attempt, outcome FROM effect_attempts')).rows).toEqual([{ attempt: 1, outcome: 'failed' }]);
    expect((await c.query('SELECT attempt, attempt_runner, attempt_started_at::int AS started FROM effects')).rows).toEqual([{ attempt: 2, attempt_runner: 'w2', started: 25 }]);
    expect(await store.finishAttempt(effect.id, 2, { kind: 'succeeded', output: 1, event: event('a', 'done') }, 30)).toBe('current');
    expect(summary(await store.listAttempts('a'))).toEqual([[1, 'w1', 10, 15, 'failed'], [2, 'w2', 25, 30, 'succeeded']]);
    expect((await c.query('SELECT attempt, outcome FROM effect_attempts')).rows).toEqual([{ attempt: 1, outcome: 'failed' }]);
  });

  it('refuses a schema newer than this code, and changes nothing', async () => {
    const url = await database();
    (await open(url)).close();
    const c = await raw(url);
    await c.query("INSERT INTO spool_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)");
    await expect(PostgresStore.open(url)).rejects.toBeInstanceOf(SchemaTooNewError);
    expect((await c.query('SELECT max(version) AS v FROM spool_migrations')).rows[0]).toEqual({ v: 99 });
  });
});

describe("PostgresStore: its connections' settings", () => {
  it('never JIT-compiles a plan, however dear its estimate (a compile at every run of the generic plan cost more than the run)', async () => {
    const url = await database();
    const store = await open(url);
    const jitOf = async (client: pg.Client | pg.PoolClient) => {
      await client.query('SET jit_above_cost = 0');
      const [plan] = (await client.query<{ 'QUERY PLAN': [{ JIT?: unknown }] }>('EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM jobs')).rows[0]!['QUERY PLAN'];
      return plan.JIT;
    };
    // The server JIT-compiles such a plan on a connection of its own: the store's settings are what turns it off.
    expect(await jitOf(await raw(url))).toBeDefined();
    const client = await store.pool.connect();
    try {
      expect(await jitOf(client)).toBeUndefined();
    } finally {
      client.release();
    }
  });
});

describe('PostgresStore: two stores (two hosts) on one database', () => {
  it('commits of one revision from two stores at once: exactly one lands, the other is a conflict', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    await a.createJob(newJob('J'));
    for (let revision = 1; revision <= 20; revision++) {
      const results = await Promise.all([a.commit([commitOf('J', revision, `a${revision}`)]), b.commit([commitOf('J', revision, `b${revision}`)])]);
      const ok = results.flat().filter((r) => r.ok);
      expect(ok).toHaveLength(1);
      expect(results.flat().filter((r) => !r.ok)).toEqual([{ ok: false, reason: 'conflict', currentRevision: revision + 1 }]);
    }
    expect((await a.history('J')).map((t) => t.revision)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
  });

  it('one event id accepted by two stores at once is recorded once (a key, not a look first)', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    await a.createJob(newJob('J'));
    for (let i = 0; i < 20; i++) {
      const results = await Promise.all([a.acceptEvent(event('J', `e${i}`)), b.acceptEvent(event('J', `e${i}`))]);
      expect(results.map((r) => r.duplicate).sort()).toEqual([false, true]);
      expect(results[0]!.event.seq).toBe(results[1]!.event.seq);
    }
    expect(await a.listEvents('J')).toHaveLength(20);
  });

  it('a job created by two stores at once under one id exists once; both get it', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    for (let i = 0; i < 10; i++) {
      const results = await Promise.all([a.createJob(newJob(`N${i}`)), b.writeBatch({ creates: [newJob(`N${i}`)] })]);
      const created = [results[0].created, results[1].creates[0]!.ok && results[1].creates[0]!.result.created];
      expect(created.sort()).toEqual([false, true]);
    }
    expect(await a.listJobs({})).toHaveLength(10);
  });

  it('tells a watcher of the commits of another store, not of its own', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    await a.externalChanges(); // listening on both channels
    const server = await raw(url);
    await server.query('LISTEN spool_work');
    const mine = new Promise<string>((resolve) => server.once('notification', (n) => resolve(n.payload ?? '')));
    let work = 0;
    a.watchChanges(() => (work += 1), 'work');
    await a.createJob(newJob('mine')); // a new job: a notification on the work channel, with a's id
    const payload = await mine;
    // a's id again, then another store's change, in one transaction: a's listener reads them in
    // that order, after a's own notification; the first it tells an 'all' watcher of must be the last.
    const next = new Promise<void>((resolve) => { const stop = a.watchChanges(() => (stop(), resolve())); });
    await server.query(`NOTIFY spool_work, '${payload}'; NOTIFY spool_changes, 'another store'`);
    await next;
    expect(work).toBe(0);
    const theirs = new Promise<void>((resolve) => { const stop = a.watchChanges(() => (stop(), resolve()), 'work'); });
    await b.createJob(newJob('theirs'));
    await theirs;
    expect(work).toBe(1);
  });

  it("wakes a 'work' watcher for work another store leaves, not for a write that leaves none", async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    await a.externalChanges(); // listening
    const work: string[] = [];
    const all: string[] = [];
    let step = '';
    a.watchChanges(() => work.push(step), 'work');
    const allHeard = () => new Promise<void>((resolve) => { const stop = a.watchChanges(() => (all.push(step), stop(), resolve())); });
    // A new job: work (a worker may claim its activity).
    step = 'create';
    let heard = allHeard();
    await b.createJob({ ...newJob('j'), effects: [{ id: 'j~x', jobId: 'j', actorId: 'x', src: 'x', input: null, maxAttempts: 3, unsafe: false, createdRevision: 1, at: 1 }] });
    await heard;
    // A claim and a heartbeat leave nothing: told to an 'all' watcher only.
    step = 'claim';
    heard = allHeard();
    const claimed = await b.claimEffect('j~x', 'w', 10, 1_000_000_000_000_000);
    expect(claimed).toBeDefined();
    await heard;
    step = 'progress';
    heard = allHeard();
    await b.setProgress('j', 50, 20);
    await heard;
    expect(all).toEqual(['create', 'claim', 'progress']);
    expect(work).toEqual(['create']);
  });

  it('a store that watches only for work is not sent the changes that leave none (it LISTENs on the work channel alone)', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    const effect = (id: string) => ({ id: `${id}~x`, jobId: id, actorId: 'x', src: 'x', input: null, maxAttempts: 3, unsafe: false, createdRevision: 1, at: 1 });
    await b.createJob({ ...newJob('k'), effects: [effect('k')] });
    let workCalls = 0;
    let onWork: (() => void) | undefined;
    const stop = a.watchChanges(() => ((workCalls += 1), onWork?.()), 'work');
    const nextWork = () => new Promise<void>((resolve) => (onWork = resolve));
    // Wait until a's listener has run its LISTEN (the server shows an idle session's last statement).
    const server = await raw(url);
    const listening = "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'";
    while ((await server.query<{ n: number }>(listening)).rows[0]!.n === 0);
    expect((await server.query<{ query: string }>("SELECT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'")).rows.map((r) => r.query)).toEqual(['LISTEN spool_work']);
    // A claim leaves no work: not sent to `a` at all. The next job's notification comes after it.
    expect(await b.claimEffect('k~x', 'w', 10, 1_000_000_000_000_000)).toBeDefined();
    const heard = nextWork();
    await b.createJob(newJob('after'));
    await heard;
    // Every notification `a` received was work: the claim's never reached it.
    expect(await a.externalChanges()).toBe(workCalls);
    // Asked for every change, it LISTENs on both: the next claim is heard and counted.
    const seen = new Promise<void>((resolve) => { const s = a.watchChanges(() => (s(), resolve())); });
    await b.createJob({ ...newJob('m'), effects: [effect('m')] });
    await seen;
    const counted = await a.externalChanges();
    const claimSeen = new Promise<void>((resolve) => { const s = a.watchChanges(() => (s(), resolve())); });
    expect(await b.claimEffect('m~x', 'w', 10, 1_000_000_000_000_000)).toBeDefined();
    await claimSeen;
    expect(await a.externalChanges()).toBe(counted + 1);
    stop();
  });
});

/** A door: OPEN ends it. */
const door = setup({}).createMachine({ id: 'door', initial: 'closed', states: { closed: { on: { OPEN: 'open' } }, open: { type: 'final' } } });

describe('PostgresStore: wake-ups', () => {
  it('an idle worker applies an event another process accepted at once (LISTEN/NOTIFY), not at its poll', async () => {
    const url = await database();
    const [a, b] = [await open(url), await open(url)];
    const runtime = await createRuntime({ store: a, machines: [door] });
    cleanups.push(() => runtime.close());
    const job = await runtime.start('door', {});
    const done = new Promise<void>((resolve) =>
      runtime.subscribe((e) => {
        if (e.type === 'job.committed' && e.job.id === job.id && e.job.status === 'done') resolve();
      }),
    );
    // The end of the worker's first round (it reads the next wake-up last), so the event comes after it.
    const readWake = a.nextWakeAt.bind(a);
    let roundEnded!: () => void;
    const firstRound = new Promise<void>((resolve) => (roundEnded = resolve));
    a.nextWakeAt = async () => {
      const at = await readWake();
      roundEnded();
      return at;
    };
    const controller = new AbortController();
    // A poll of 1,000 s: the test's 60 s timeout ends it unless the notification wakes the worker.
    const worker = runWorker(runtime, { pollMs: 1_000_000, signal: controller.signal });
    cleanups.push(async () => {
      controller.abort();
      await worker;
    });
    await a.externalChanges(); // the worker's listener is in place
    await firstRound;
    expect((await a.getJob(job.id))?.status).toBe('active');
    await b.acceptEvent({ ...event(job.id, 'from-b'), type: 'OPEN', payload: { type: 'OPEN' } });
    await done;
    expect((await a.getJob(job.id))?.status).toBe('done');
  });
});

describe('PostgresStore: a write batch', () => {
  it('runs without savepoints while every write lands; after a refusal it runs again with one per write, the refused write alone rolled back', async () => {
    const url = await database();
    const store = await open(url);
    await store.createJob(newJob('A'));
    await store.createJob(newJob('B'));
    // What the store's connections send (its pool's clients share this prototype).
    const texts: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const q = args[0];
      texts.push(typeof q === 'string' ? q : String((q as { text?: unknown } | undefined)?.text ?? ''));
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    cleanups.push(async () => {
      pg.Client.prototype.query = query;
    });
    const landed = await store.writeBatch({ commits: [commitOf('A', 1, 'a2'), commitOf('B', 1, 'b2')] });
    expect(landed.commits).toEqual([
      { ok: true, revision: 2, fence: null },
      { ok: true, revision: 2, fence: null },
    ]);
    expect(texts.filter((t) => t.includes('SAVEPOINT'))).toEqual([]);
    texts.length = 0;
    const mixed = await store.writeBatch({ commits: [commitOf('A', 2, 'a3'), commitOf('B', 1, 'stale'), commitOf('B', 2, 'b3')] });
    expect(mixed.commits).toEqual([
      { ok: true, revision: 3, fence: null },
      { ok: false, reason: 'conflict', currentRevision: 2 },
      { ok: true, revision: 3, fence: null },
    ]);
    // The first run, without savepoints, was rolled back whole; the second isolated each write.
    expect(texts.filter((t) => t === 'ROLLBACK')).toHaveLength(1);
    expect(texts.filter((t) => t.includes('ROLLBACK TO SAVEPOINT w'))).toHaveLength(1);
    expect((await store.history('A')).map((h) => [h.revision, h.to])).toEqual([
      [1, 'idle'],
      [2, 'a2'],
      [3, 'a3'],
    ]);
    expect((await store.history('B')).map((h) => [h.revision, h.to])).toEqual([
      [1, 'idle'],
      [2, 'b2'],
      [3, 'b3'],
    ]);
  });
});

describe('PostgresStore: round trips of a step', () => {
  /** Job `id`'s activity `one` ended (attempt 1, fence 1), its outcome applied, and activity `two` created and claimed: one step of a worker. */
  function step(id: string): TransitionCommit {
    // Its output, in the history row that goes with COMMIT as literal text, has quotes, backslashes and more.
    const payload = { type: 'xstate.done.actor.one', output: { note: "it's \\ a 'quote', \\' $1 ☃ \n" } };
    const done: NewInboxEvent = { ...event(id, `${id}~one#1`), type: payload.type, payload, source: 'effect', sourceId: `${id}~one`, attempt: 1 };
    const next = { ...effectOf(id, 'two'), id: `${id}~two`, createdRevision: 2 };
    return {
      ...commitOf(id, 1, 'two'),
      event: { accept: done, status: 'applied', error: null, payload: done.payload },
      finish: { id: `${id}~one`, attempt: 1, result: { kind: 'succeeded', output: { ok: true }, event: done }, at: T0 + 1, lease: { runner: 'w1', fence: 1 } },
      effects: { create: [next], deactivate: ['one'] },
      claims: [{ effectId: next.id, claimUntil: T0 + 60_000 }],
      lease: { runner: 'w1', fence: 1, now: T0 + 1, until: T0 + 60_000 },
    };
  }

  /**
   * What the store's connections send from now on, with how many answers had come back when each
   * was sent (pipeline mode: a statement goes out while others are unanswered). The NOTIFY after a
   * commit goes on a connection of its own: left out.
   */
  function recordSent(): { text: string; answered: number }[] {
    const sent: { text: string; answered: number }[] = [];
    let answered = 0;
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const q = args[0];
      const text = typeof q === 'string' ? q : String((q as { text?: unknown } | undefined)?.text ?? '');
      const result = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (text.includes('NOTIFY')) return result;
      sent.push({ text, answered });
      if (result instanceof Promise) void result.finally(() => (answered += 1)).catch(() => undefined);
      return result;
    } as typeof query;
    cleanups.push(async () => {
      pg.Client.prototype.query = query;
    });
    return sent;
  }

  it("is BEGIN with its row locks, the attempt's end with the job's update, and its other writes with COMMIT; a batch's steps go on lanes, together", async () => {
    const url = await database();
    const store = await open(url);
    for (const id of ['A', 'B', 'C']) {
      await store.createJob({ ...newJob(id), effects: [effectOf(id, 'one')], runner: 'w1', claims: [{ effectId: `${id}~one`, claimUntil: T0 + 60_000 }] });
    }
    const sent = recordSent();
    const shape = (t: string) => `${t.indexOf(' AS (') > 0 ? t.slice(0, t.indexOf(' AS (')) : t.split(/[ ;]/)[0]}${/; COMMIT$/.test(t) ? ' … COMMIT' : ''}`;
    expect(await store.commit([step('A')])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
    // One step alone, in turn: two round trips, its first statement sent right behind BEGIN (before any answer).
    expect(sent.map((q) => shape(q.text))).toEqual(['BEGIN', 'WITH spool_a', 'WITH spool_w1 … COMMIT']);
    expect(sent.map((q) => q.answered - sent[0]!.answered)).toEqual([0, 0, 2]);
    sent.length = 0;
    const batch = await store.writeBatch({ commits: [step('B'), step('C')] });
    expect(batch.commits).toEqual([
      { ok: true, revision: 2, fence: 1 },
      { ok: true, revision: 2, fence: 1 },
    ]);
    // Each step on a lane of its own: BEGIN and both attempts' ends go out together, before any
    // answer (one round trip); each step's other writes (history row, new effect) once its own
    // end answered, and COMMIT right behind the last of them, their answers read with its own. A
    // lane is two round trips, however many the batch holds (in turn, each step added one).
    expect(sent.map((q) => shape(q.text))).toEqual(['BEGIN', 'WITH spool_a', 'WITH spool_a', 'WITH spool_w1', 'WITH spool_w1', 'COMMIT']);
    const at = sent.map((q) => q.answered - sent[0]!.answered);
    expect(at.slice(0, 3)).toEqual([0, 0, 0]);
    expect(Math.min(at[3]!, at[4]!)).toBeGreaterThanOrEqual(2); // BEGIN's and its own end's answers
    expect(at[5]).toBe(3); // BEGIN's and both ends' answers, not the writes'
    expect(sent[3]!.text).toMatch(/^WITH spool_w1 AS \(INSERT INTO transitions .*\) INSERT INTO effects /s);
    for (const id of ['A', 'B', 'C']) {
      expect(await store.getEffect(`${id}~one`)).toMatchObject({ status: 'succeeded', active: false });
      expect(await store.getEffect(`${id}~two`)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w1' });
      expect((await store.history(id)).map((h) => [h.revision, h.eventType])).toEqual([
        [1, 'xstate.init'],
        [2, 'xstate.done.actor.one'],
      ]);
      expect((await store.history(id))[1]!.payload).toEqual(step(id).event!.payload);
    }
  });

  it('a step whose attempt names its invocation goes whole before any answer, its pair failing unless it did what was expected; then it runs again, waiting for each answer', async () => {
    const url = await database();
    const store = await open(url);
    for (const id of ['A', 'B']) {
      await store.createJob({ ...newJob(id), effects: [effectOf(id, 'one')], runner: 'w1', claims: [{ effectId: `${id}~one`, claimUntil: T0 + 60_000 }] });
    }
    const sent = recordSent();
    const shape = (t: string) => `${t.indexOf(' AS (') > 0 ? t.slice(0, t.indexOf(' AS (')) : t.split(/[ ;]/)[0]}${t.includes('SELECT spool_expect(') ? ' expected' : ''}${/; COMMIT$/.test(t) ? ' … COMMIT' : ''}`;
    // The attempt's invocation known (`actorId`), as the runtime's own attempts have it: its end and
    // the job's update are expected to land, and everything goes out before any answer (one round trip).
    const ahead = (id: string, unread?: { createdAt: number; progress: number | null }) => {
      const c = step(id);
      return { ...c, finish: { ...c.finish!, actorId: 'one' }, ...(unread ? { unread } : {}) };
    };
    expect(await store.commit([ahead('A')])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
    expect(sent.map((q) => shape(q.text))).toEqual(['BEGIN', 'WITH spool_a expected', 'WITH spool_w1 … COMMIT']);
    expect(sent.map((q) => q.answered - sent[0]!.answered)).toEqual([0, 0, 0]);
    // Expecting a progress the job no longer has (it reported 30 since): the pair fails the run,
    // which is rolled back and run again in turn, and the commit reports what it found.
    await store.setProgress('B', 30, T0);
    sent.length = 0;
    expect(await store.commit([ahead('B', { createdAt: T0, progress: null })])).toEqual([{ ok: true, revision: 2, fence: 1, progress: 30 }]);
    expect(sent.map((q) => shape(q.text))).toEqual([
      'BEGIN',
      'WITH spool_a expected',
      'WITH spool_w1 … COMMIT',
      'ROLLBACK',
      'BEGIN',
      'WITH spool_a',
      'WITH spool_w1 … COMMIT',
    ]);
    for (const id of ['A', 'B']) {
      expect(await store.getEffect(`${id}~one`)).toMatchObject({ status: 'succeeded', active: false });
      expect(await store.getEffect(`${id}~two`)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w1' });
      expect((await store.history(id)).map((h) => [h.revision, h.eventType])).toEqual([
        [1, 'xstate.init'],
        [2, 'xstate.done.actor.one'],
      ]);
    }
    expect((await store.getJob('B'))?.progress).toBe(30);

    // A batch of such steps on lanes: every lane's pair and check, their other writes and COMMIT,
    // all before any answer.
    for (const id of ['D', 'E']) {
      await store.createJob({ ...newJob(id), effects: [effectOf(id, 'one')], runner: 'w1', claims: [{ effectId: `${id}~one`, claimUntil: T0 + 60_000 }] });
    }
    sent.length = 0;
    expect((await store.writeBatch({ commits: [ahead('D'), ahead('E')] })).commits).toEqual([
      { ok: true, revision: 2, fence: 1 },
      { ok: true, revision: 2, fence: 1 },
    ]);
    expect(sent.map((q) => shape(q.text))).toEqual(['BEGIN', 'WITH spool_a expected', 'WITH spool_a expected', 'WITH spool_w1', 'WITH spool_w1', 'COMMIT']);
    expect(sent.map((q) => q.answered - sent[0]!.answered)).toEqual([0, 0, 0, 0, 0, 0]);
    for (const id of ['D', 'E']) expect(await store.getEffect(`${id}~two`)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w1' });

    // A job another commit moved on (one made without a lease: the fence stays), so its update
    // writes nothing though its attempt's end would: the pair fails as not expected, and the step
    // is a conflict that wrote nothing.
    await store.createJob({ ...newJob('C'), effects: [effectOf('C', 'one')], runner: 'w1', claims: [{ effectId: 'C~one', claimUntil: T0 + 60_000 }] });
    expect(await store.commit([commitOf('C', 1, 'elsewhere')])).toEqual([{ ok: true, revision: 2, fence: null }]);
    sent.length = 0;
    expect(await store.commit([ahead('C')])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 2 }]);
    expect(sent.map((q) => shape(q.text)).slice(0, 4)).toEqual(['BEGIN', 'WITH spool_a expected', 'WITH spool_w1 … COMMIT', 'ROLLBACK']);
    expect(await store.getEffect('C~one')).toMatchObject({ status: 'running', active: true });
    expect((await store.history('C')).map((h) => [h.revision, h.eventType])).toEqual([
      [1, 'xstate.init'],
      [2, 'GO'],
    ]);
  });

  it("a commit's first statement goes right behind BEGIN and the row locks; when the locks time out, that is the error told, and nothing was written", async () => {
    const url = await database();
    const store = await PostgresStore.open(url, { lockTimeoutMs: 50 });
    cleanups.push(() => store.close());
    expect((await store.createJob({ ...newJob('A'), effects: [effectOf('A', 'one')], runner: 'w1', claims: [{ effectId: 'A~one', claimUntil: T0 + 60_000 }] })).created).toBe(true);
    // Another transaction holds A's row: the commit's row lock waits out lock_timeout (55P03), in
    // the round trip its first statement shares, which the aborted transaction refuses (25P02).
    const holder = await raw(url);
    await holder.query('BEGIN');
    await holder.query("SELECT 1 FROM jobs WHERE id = 'A' FOR UPDATE");
    const error = await store.commit([step('A')]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DatabaseBusyError);
    expect(error).toMatchObject({ details: { driverCode: '55P03' } });
    await holder.query('ROLLBACK');
    expect((await store.history('A')).map((h) => h.revision)).toEqual([1]);
    expect(await store.commit([step('A')])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
  });

  it('a batch refused on lanes whose connection breaks before it can run again isolated fails with the storage fault, not the refusal', async () => {
    const url = await database();
    const store = await open(url);
    for (const id of ['A', 'B']) {
      await store.createJob({ ...newJob(id), effects: [effectOf(id, 'one')], runner: 'w1', claims: [{ effectId: `${id}~one`, claimUntil: T0 + 60_000 }] });
    }
    // The connection drops as the refused run's ROLLBACK goes out (as when the server restarts then).
    const query = pg.Client.prototype.query;
    let dropped = false;
    pg.Client.prototype.query = function (this: pg.Client & { connection: { stream: { destroy: () => void } } }, ...args: unknown[]) {
      if (args[0] === 'ROLLBACK' && !dropped) {
        dropped = true;
        this.connection.stream.destroy();
      }
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    cleanups.push(async () => {
      pg.Client.prototype.query = query;
    });
    const error = await store.writeBatch({ commits: [step('A'), { ...step('B'), expectedRevision: 5 }] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    pg.Client.prototype.query = query;
    expect(dropped).toBe(true);
    expect(error).toBeInstanceOf(StorageIoError);
    // Nothing of the run landed; the store goes on on another connection.
    expect((await store.history('A')).map((h) => h.revision)).toEqual([1]);
    expect(await store.commit([step('A')])).toEqual([{ ok: true, revision: 2, fence: 1 }]);
  });

  it('on lanes, a step refused (a stale revision) sends nothing more, and the batch runs again in turn: the other steps land, that one alone is refused', async () => {
    const url = await database();
    const store = await open(url);
    for (const id of ['A', 'B', 'C']) {
      await store.createJob({ ...newJob(id), effects: [effectOf(id, 'one')], runner: 'w1', claims: [{ effectId: `${id}~one`, claimUntil: T0 + 60_000 }] });
    }
    const texts: string[] = [];
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const q = args[0];
      const text = typeof q === 'string' ? q : String((q as { text?: unknown } | undefined)?.text ?? '');
      if (!text.includes('NOTIFY')) texts.push(text);
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    cleanups.push(async () => {
      pg.Client.prototype.query = query;
    });
    // B's commit expects revision 5: its job is at 1, so its first statement changes nothing and the program refuses.
    const stale = { ...step('B'), expectedRevision: 5 };
    const batch = await store.writeBatch({ commits: [step('A'), stale, step('C')] });
    expect(batch.commits[0]).toEqual({ ok: true, revision: 2, fence: 1 });
    expect(batch.commits[1]).toMatchObject({ ok: false });
    expect(batch.commits[2]).toEqual({ ok: true, revision: 2, fence: 1 });
    // The run on lanes stopped at B's refusal, then ROLLBACK; the run in turn, with a savepoint a
    // write, is what landed. Nothing was sent between the ROLLBACK and that run's BEGIN.
    const rollback = texts.indexOf('ROLLBACK');
    expect(rollback).toBeGreaterThan(0);
    expect(texts[rollback + 1]).toMatch(/^BEGIN/);
    expect(texts.slice(rollback + 1).some((t) => t.includes('SAVEPOINT'))).toBe(true);
    for (const id of ['A', 'C']) expect((await store.history(id)).map((h) => h.revision)).toEqual([1, 2]);
    expect((await store.history('B')).map((h) => h.revision)).toEqual([1]);
    expect(await store.getEffect('B~one')).toMatchObject({ status: 'running', active: true });
    expect(await store.getEffect('B~two')).toBeUndefined();
  });
});

describe('PostgresStore: a connection lost during COMMIT', () => {
  it('is CommitOutcomeUnknown, and the read-back says the commit did not land', async () => {
    const url = await database();
    const store = await open(url);
    await store.createJob(newJob('J'));
    const admin = await raw(url);
    // COMMIT runs deferred triggers: this one holds the COMMIT until the test ends its connection.
    await admin.query(`CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$`);
    await admin.query('CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON transitions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit()');
    const committing = store.commit([commitOf('J', 1, 'two')]).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Wait until the commit is inside COMMIT (the server says so), then drop its connection.
    for (;;) {
      const r = await admin.query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%COMMIT' AND wait_event = 'PgSleep'");
      if (r.rows.length > 0) {
        await admin.query('SELECT pg_terminate_backend($1)', [r.rows[0].pid]);
        break;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    const error = await committing;
    expect(error).toBeInstanceOf(CommitOutcomeUnknown);
    expect((error as CommitOutcomeUnknown).unresolved).toEqual([{ kind: 'commit', jobId: 'J', revision: 2, eventId: null }]);
    await admin.query('DROP TRIGGER hold ON transitions');
    expect(await store.commitLanded('J', 2, null)).toBe(false);
    // The store goes on: the next commit of that revision lands.
    expect(await store.commit([commitOf('J', 1, 'two')])).toEqual([{ ok: true, revision: 2, fence: null }]);
  });
});

describe('PostgresStore: a server out of resources', () => {
  it('too many connections (53300) is a busy server to retry, not a full disk', async () => {
    const url = await database();
    const admin = await raw(url);
    // A role allowed no connection: the server refuses it with 53300, as it does when max_connections is reached.
    const role = `spool_limited_${process.pid}_${Math.random().toString(16).slice(2, 8)}`;
    await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 0`);
    cleanups.push(async () => void (await admin.query(`DROP ROLE ${role}`)));
    const limited = new URL(url);
    limited.username = role;
    limited.password = '';
    const error = await PostgresStore.open(limited.toString()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DatabaseBusyError);
    expect(error).toMatchObject({ code: 'SPOOL_DATABASE_BUSY', category: 'retryable', details: { driverCode: '53300' } });
  });

  it('out of memory (53200) is busy too; only a full disk (53100) is SPOOL_STORAGE_FULL', () => {
    const serverError = (code: string) => Object.assign(new Error('refused'), { code });
    expect(pgFault(serverError('53200'), 'db')).toBeInstanceOf(DatabaseBusyError);
    expect(pgFault(serverError('53400'), 'db')).toBeInstanceOf(DatabaseBusyError);
    expect(pgFault(serverError('53100'), 'db')).toBeInstanceOf(StorageFullError);
  });
});

describe('PostgresStore: opened while the server is not accepting connections (a restart)', () => {
  it('rideOutFaults rides out ECONNREFUSED as a retryable fault and opens once the server listens', async () => {
    const url = new URL(await database());
    // A port nothing listens on yet; after the first refusal, a proxy to the server listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    let proxy: Server | undefined;
    const listen = () => {
      proxy = createServer((socket) => {
        const upstream = connect(Number(url.port), url.hostname);
        socket.on('error', () => upstream.destroy());
        upstream.on('error', () => socket.destroy());
        socket.pipe(upstream).pipe(socket);
      });
      proxy.listen(port, '127.0.0.1');
    };
    const behind = new URL(url);
    behind.port = String(port);
    behind.hostname = '127.0.0.1';
    const faults: StorageFaultEvent[] = [];
    const store = await rideOutFaults(() => PostgresStore.open(behind.toString()), {
      onFault: (fault) => {
        faults.push(fault);
        if (!proxy) listen();
      },
    });
    cleanups.push(async () => void (await new Promise((resolve) => proxy!.close(resolve))));
    cleanups.push(() => store.close());
    expect(faults[0]).toMatchObject({ code: 'SPOOL_STORAGE_IO', attempt: 1, message: expect.stringMatching(/ECONNREFUSED/) });
    await store.createJob(newJob('J'));
    expect((await store.getJob('J'))?.revision).toBe(1);
  });
});

describe('spool --db postgres://…', () => {
  it('starts, lists and shows jobs in a Postgres database, as with a file', async () => {
    const url = await database();
    const started = await runSpool(['--db', url, '--json', 'start', 'job-lifecycle', '--input', '{"name":"pg","items":1}'], PROJECT_ROOT);
    expect(started.stderr).toBe('');
    expect(started.code).toBe(0);
    const listed = await runSpool(['--json', 'list'], PROJECT_ROOT, undefined, { SPOOL_DB: url });
    expect(listed.code).toBe(0);
    const ids = (JSON.parse(listed.stdout) as { id: string }[]).map((j) => j.id);
    expect(ids).toHaveLength(1);
    const id = ids[0]!;
    const store = await open(url);
    expect((await store.getJob(id))?.machineId).toBe('job-lifecycle');
  });
});
