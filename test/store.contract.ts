/**
 * The JobStore contract: one suite every store must pass. Call `storeContract(name, factory)`
 * from a test file with a factory that opens a fresh, empty store.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ErrorInfo, JobStatus, JobStore, JsonValue, NewInboxEvent, NewJob, TransitionCommit } from '../src/ports/store.ts';
import { statePaths } from '../src/base/json.ts';
import { dumpStore } from './helpers/dumpStore.ts';

export interface StoreUnderTest {
  store: JobStore;
  /** Called after the store is closed (delete files…). */
  dispose?: () => Promise<void> | void;
}

export type StoreFactory = () => Promise<StoreUnderTest>;

const T0 = 1_700_000_000_000;

interface JobOptions {
  machineId?: string;
  machineVersion?: string;
  value?: JsonValue;
  status?: JobStatus;
  owner?: string | null;
  key?: string | null;
  input?: JsonValue;
  at?: number;
}

export function newJob(id: string, o: JobOptions = {}): NewJob {
  const value = o.value ?? 'idle';
  const input = o.input ?? { id };
  const at = o.at ?? T0;
  return {
    id,
    machineId: o.machineId ?? 'm',
    machineVersion: o.machineVersion ?? '1',
    status: o.status ?? 'active',
    value,
    statePaths: statePaths(value),
    context: { n: 0 },
    snapshot: JSON.stringify({ status: o.status ?? 'active', value, context: { n: 0 }, children: {}, historyValue: {} }),
    input,
    inputHash: `hash:${JSON.stringify(input)}`,
    idempotencyKey: o.key ?? null,
    owner: o.owner ?? null,
    at,
    transition: { eventId: null, eventType: 'xstate.init', payload: input, from: null, to: value, outcome: 'started', error: null, at },
  };
}

export function newEvent(jobId: string, eventId: string, payload: { type: string; [k: string]: JsonValue } = { type: 'GO' }, at = T0 + 1): NewInboxEvent {
  return { jobId, eventId, type: payload.type, payload, payloadHash: `hash:${JSON.stringify(payload)}`, at };
}

interface CommitOptions {
  value?: JsonValue;
  n?: number;
  status?: JobStatus;
  machineVersion?: string;
  at?: number;
  eventType?: string;
  eventId?: string | null;
  outcome?: 'applied' | 'ignored' | 'failed' | 'migrated';
  error?: ErrorInfo | null;
  event?: TransitionCommit['event'];
}

export function commitOf(jobId: string, expectedRevision: number, o: CommitOptions = {}): TransitionCommit {
  const value = o.value ?? `s${expectedRevision + 1}`;
  const at = o.at ?? T0 + 10 * expectedRevision;
  const status = o.status ?? 'active';
  const context = { n: o.n ?? expectedRevision };
  return {
    jobId,
    expectedRevision,
    job: {
      status,
      value,
      statePaths: statePaths(value),
      context,
      snapshot: JSON.stringify({ status, value, context, children: {}, historyValue: {} }),
      machineVersion: o.machineVersion ?? '1',
      at,
    },
    transition: {
      eventId: o.eventId ?? null,
      eventType: o.eventType ?? 'GO',
      payload: { type: o.eventType ?? 'GO' },
      from: null,
      to: value,
      outcome: o.outcome ?? 'applied',
      error: o.error ?? null,
      at,
    },
    ...(o.event ? { event: o.event } : {}),
  };
}

const ids = (jobs: { id: string }[]) => jobs.map((j) => j.id);

export function storeContract(name: string, factory: StoreFactory): void {
  describe(`JobStore contract: ${name}`, () => {
    let store: JobStore;
    let current: StoreUnderTest;

    beforeEach(async () => {
      current = await factory();
      store = current.store;
    });
    afterEach(async () => {
      await store.close();
      await current.dispose?.();
    });

    describe('createJob', () => {
      it("records a caller's event delivered with the new job (start-or-send) once: a repeat of its id is a duplicate", async () => {
        const event = newEvent('sos', 'e1', { type: 'ADD' });
        expect((await store.createJob({ ...newJob('sos'), deliveries: [event] })).created).toBe(true);
        expect(await store.getEvent('sos', 'e1')).toMatchObject({ status: 'pending', source: 'external', type: 'ADD' });
        expect((await store.acceptEvent(event)).duplicate).toBe(true);
        expect(await store.listEvents('sos')).toHaveLength(1);
        // A second create of the same id finds the job and writes nothing.
        expect((await store.createJob({ ...newJob('sos'), deliveries: [newEvent('sos', 'e2')] })).created).toBe(false);
        expect(await store.getEvent('sos', 'e2')).toBeUndefined();
      });

      it('creates the job at revision 1 with its init history record', async () => {
        const r = await store.createJob(newJob('job-1', { input: { x: 1 }, key: 'k1', owner: 'acme' }));
        expect(r.created).toBe(true);
        expect(r.job).toMatchObject({
          id: 'job-1',
          machineId: 'm',
          machineVersion: '1',
          revision: 1,
          status: 'active',
          value: 'idle',
          context: { n: 0 },
          input: { x: 1 },
          inputHash: 'hash:{"x":1}',
          idempotencyKey: 'k1',
          owner: 'acme',
          quarantine: null,
          createdAt: T0,
          updatedAt: T0,
        });
        expect(r.job.corruption).toBeUndefined();
        expect(JSON.parse(r.job.snapshot)).toMatchObject({ value: 'idle', status: 'active' });
        expect(await store.getJob('job-1')).toEqual(r.job);
        expect(await store.history('job-1')).toEqual([
          { jobId: 'job-1', revision: 1, eventId: null, eventType: 'xstate.init', payload: { x: 1 }, from: null, to: 'idle', outcome: 'started', error: null, at: T0, runner: null, fence: 0 },
        ]);
      });

      it('activeMachineVersions lists one owner\'s (machine, version) pairs of active jobs, each counted up to the bound', async () => {
        for (const [id, machineId, machineVersion, owner] of [
          ['a1', 'm', '1', null],
          ['a2', 'm', '1', null],
          ['a3', 'm', '1', null],
          ['b1', 'm', '2', null],
          ['c1', 'n', '1', null],
          ['x1', 'm', '1', 'acme'],
        ] as const) {
          expect((await store.createJob(newJob(id, { machineId, machineVersion, owner }))).created).toBe(true);
        }
        expect(await store.commit([commitOf('c1', 1, { status: 'done', value: 'end' })])).toMatchObject([{ ok: true }]);
        expect(await store.activeMachineVersions(null, 100)).toEqual([
          { machineId: 'm', machineVersion: '1', jobs: 3 },
          { machineId: 'm', machineVersion: '2', jobs: 1 },
        ]);
        expect(await store.activeMachineVersions(null, 2)).toEqual([
          { machineId: 'm', machineVersion: '1', jobs: 2 },
          { machineId: 'm', machineVersion: '2', jobs: 1 },
        ]);
        expect(await store.activeMachineVersions('acme', 100)).toEqual([{ machineId: 'm', machineVersion: '1', jobs: 1 }]);
        expect(await store.activeMachineVersions('nobody', 100)).toEqual([]);
      });

      it('returns the existing job for the same id, unchanged, with created=false', async () => {
        const first = await store.createJob(newJob('job-1', { input: { x: 1 } }));
        const again = await store.createJob(newJob('job-1', { input: { x: 2 }, value: 'other', at: T0 + 5 }));
        expect(again.created).toBe(false);
        expect(again.job).toEqual(first.job);
        expect(await store.getJob('job-1')).toEqual(first.job);
        expect(await store.history('job-1')).toHaveLength(1);
      });

      it('returns the existing job for the same (owner, idempotency key), and scopes keys by owner', async () => {
        const first = await store.createJob(newJob('job-1', { key: 'k', owner: null }));
        const again = await store.createJob(newJob('job-2', { key: 'k', owner: null }));
        expect(again.created).toBe(false);
        expect(again.job.id).toBe('job-1');
        expect(await store.getJob('job-2')).toBeUndefined();
        expect(await store.findByIdempotencyKey(null, 'k')).toEqual(first.job);

        const other = await store.createJob(newJob('job-3', { key: 'k', owner: 'acme' }));
        expect(other.created).toBe(true);
        expect(await store.findByIdempotencyKey('acme', 'k')).toMatchObject({ id: 'job-3' });
        expect(await store.findByIdempotencyKey(null, 'k')).toMatchObject({ id: 'job-1' });
        expect(await store.findByIdempotencyKey('acme', 'nope')).toBeUndefined();

        // Jobs without a key never collide on the key.
        expect((await store.createJob(newJob('job-4'))).created).toBe(true);
        expect((await store.createJob(newJob('job-5'))).created).toBe(true);
      });

      it('treats an empty-string owner as the unscoped owner (null), consistently', async () => {
        await store.createJob(newJob('j-empty', { owner: '', key: 'k' }));
        const again = await store.createJob(newJob('j-null', { owner: null, key: 'k' }));
        expect(again).toMatchObject({ created: false, job: { id: 'j-empty' } });
        expect(await store.getJob('j-empty')).toMatchObject({ owner: null });
        expect(await store.findByIdempotencyKey('', 'k')).toMatchObject({ id: 'j-empty' });
        expect(await store.findByIdempotencyKey(null, 'k')).toMatchObject({ id: 'j-empty' });
        expect(ids(await store.listJobs({ owner: '' }))).toEqual(['j-empty']);
        expect(ids(await store.listJobs({ owner: null }))).toEqual(['j-empty']);
      });

      it('getJob with the record the caller knows gives it back with what moved without a commit, and reads the whole row once a commit moved it', async () => {
        const known = (await store.createJob(newJob('k'))).job;
        await store.setProgress('k', 40, T0 + 5);
        await store.setQuarantine('k', 'held for a test', T0 + 6);
        const refreshed = await store.getJob('k', known);
        expect(refreshed).toEqual(await store.getJob('k'));
        expect(refreshed).toMatchObject({ revision: 1, progress: 40, quarantine: 'held for a test' });
        await store.setQuarantine('k', null, T0 + 7);
        expect((await store.commit([commitOf('k', 1, { value: 'moved' })]))[0]).toMatchObject({ ok: true });
        // Another revision: the record the caller knew is not the job's any more.
        expect(await store.getJob('k', known)).toMatchObject({ revision: 2, value: 'moved', quarantine: null });
      });

      it('getJob of an unknown id is undefined, and its history is empty', async () => {
        expect(await store.getJob('nope')).toBeUndefined();
        expect(await store.history('nope')).toEqual([]);
        expect(await store.listEvents('nope')).toEqual([]);
      });
    });

    describe('listJobs', () => {
      beforeEach(async () => {
        // Created out of id order on purpose.
        await store.createJob(newJob('c', { machineId: 'm1', value: 'idle' }));
        await store.createJob(newJob('a', { machineId: 'm2', value: { a: 'b' }, owner: 'acme' }));
        await store.createJob(newJob('e', { machineId: 'm2', value: 'a' }));
        await store.createJob(newJob('b', { machineId: 'm1', value: 'ab', status: 'done' }));
        await store.createJob(newJob('d', { machineId: 'm1', value: { a: { b: 'c' } }, owner: 'acme' }));
        await store.setQuarantine('d', 'held for the test', T0 + 1);
      });

      it('orders by id', async () => {
        expect(ids(await store.listJobs({}))).toEqual(['a', 'b', 'c', 'd', 'e']);
      });

      it('filters by machine id', async () => {
        expect(ids(await store.listJobs({ machineId: 'm1' }))).toEqual(['b', 'c', 'd']);
        expect(ids(await store.listJobs({ machineId: 'm3' }))).toEqual([]);
      });

      it('filters by state path: a parent state matches its nested values, and only whole path segments match', async () => {
        expect(ids(await store.listJobs({ state: 'a' }))).toEqual(['a', 'd', 'e']);
        expect(ids(await store.listJobs({ state: 'a.b' }))).toEqual(['a', 'd']);
        expect(ids(await store.listJobs({ state: 'a.b.c' }))).toEqual(['d']);
        expect(ids(await store.listJobs({ state: 'b' }))).toEqual([]);
        expect(ids(await store.listJobs({ state: 'ab' }))).toEqual(['b']);
        expect(ids(await store.listJobs({ state: 'idl' }))).toEqual([]);
      });

      it('filters by status, quarantine and owner', async () => {
        expect(ids(await store.listJobs({ status: 'done' }))).toEqual(['b']);
        expect(ids(await store.listJobs({ status: 'active' }))).toEqual(['a', 'c', 'd', 'e']);
        expect(ids(await store.listJobs({ quarantined: true }))).toEqual(['d']);
        expect(ids(await store.listJobs({ quarantined: false }))).toEqual(['a', 'b', 'c', 'e']);
        expect(ids(await store.listJobs({ owner: 'acme' }))).toEqual(['a', 'd']);
        expect(ids(await store.listJobs({ owner: null }))).toEqual(['b', 'c', 'e']);
        expect(ids(await store.listJobs({ machineId: 'm1', owner: null, status: 'active' }))).toEqual(['c']);
      });

      it('pages with afterId and limit', async () => {
        expect(ids(await store.listJobs({ afterId: 'b' }))).toEqual(['c', 'd', 'e']);
        expect(ids(await store.listJobs({ afterId: 'b', limit: 2 }))).toEqual(['c', 'd']);
        expect(ids(await store.listJobs({ limit: 1 }))).toEqual(['a']);
        const seen: string[] = [];
        for (let afterId: string | undefined; ; ) {
          const page = await store.listJobs({ limit: 2, ...(afterId === undefined ? {} : { afterId }) });
          if (page.length === 0) break;
          expect(page.length).toBeLessThanOrEqual(2);
          seen.push(...ids(page));
          afterId = page.at(-1)!.id;
        }
        expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
        expect(ids(await store.listJobs({ afterId: 'e' }))).toEqual([]);
      });
    });

    describe('inbox', () => {
      beforeEach(async () => {
        await store.createJob(newJob('A'));
        await store.createJob(newJob('B'));
        await store.createJob(newJob('C'));
      });

      it('acceptEvent records a pending event once per (jobId, eventId)', async () => {
        const first = await store.acceptEvent(newEvent('A', 'e1', { type: 'GO', x: 1 }));
        expect(first.duplicate).toBe(false);
        expect(first.event).toMatchObject({
          jobId: 'A',
          eventId: 'e1',
          type: 'GO',
          payload: { type: 'GO', x: 1 },
          payloadHash: 'hash:{"type":"GO","x":1}',
          status: 'pending',
          error: null,
          revision: null,
          acceptedAt: T0 + 1,
          processedAt: null,
        });
        expect(typeof first.event.seq!).toBe('number');

        const again = await store.acceptEvent(newEvent('A', 'e1', { type: 'GO', x: 2 }, T0 + 99));
        expect(again.duplicate).toBe(true);
        expect(again.event).toEqual(first.event);
        expect(await store.getEvent('A', 'e1')).toEqual(first.event);

        const otherJob = await store.acceptEvent(newEvent('B', 'e1'));
        expect(otherJob.duplicate).toBe(false);
        expect(otherJob.event.seq!).not.toBe(first.event.seq!);
        expect(await store.listEvents('A')).toEqual([first.event]);
        expect(await store.getEvent('A', 'nope')).toBeUndefined();
        // Accepting does not touch the job.
        expect(await store.getJob('A')).toMatchObject({ revision: 1, updatedAt: T0 });
      });

      it('pendingEvents returns a job’s pending events oldest first, up to the limit', async () => {
        const e1 = await store.acceptEvent(newEvent('A', 'e1'));
        await store.acceptEvent(newEvent('B', 'b1'));
        const e2 = await store.acceptEvent(newEvent('A', 'e2'));
        const e3 = await store.acceptEvent(newEvent('A', 'e3'));
        expect((await store.pendingEvents('A', 10)).map((e) => e.eventId)).toEqual(['e1', 'e2', 'e3']);
        expect(e1.event.seq!).toBeLessThan(e2.event.seq!);
        expect(e2.event.seq!).toBeLessThan(e3.event.seq!);
        expect((await store.pendingEvents('A', 2)).map((e) => e.eventId)).toEqual(['e1', 'e2']);

        expect(await store.commit([commitOf('A', 1, { event: { seq: e1.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })])).toEqual([
          { ok: true, revision: 2, fence: null },
        ]);
        await store.rejectEvent(e3.event.seq!, { name: 'E', message: 'no' }, T0 + 5);
        expect((await store.pendingEvents('A', 10)).map((e) => e.eventId)).toEqual(['e2']);
        expect((await store.listEvents('A')).map((e) => [e.eventId, e.status])).toEqual([
          ['e1', 'applied'],
          ['e2', 'pending'],
          ['e3', 'rejected'],
        ]);
      });

      it('jobsWithPendingEvents lists jobs by their oldest pending event and skips quarantined jobs', async () => {
        await store.acceptEvent(newEvent('B', 'b1'));
        await store.acceptEvent(newEvent('A', 'a1'));
        const c1 = await store.acceptEvent(newEvent('C', 'c1'));
        await store.acceptEvent(newEvent('B', 'b2'));
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B', 'A', 'C']);
        expect(await store.jobsWithPendingEvents(2)).toEqual(['B', 'A']);

        await store.setQuarantine('A', 'held', T0 + 2);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B', 'C']);

        await store.rejectEvent(c1.event.seq!, { name: 'E', message: 'no' }, T0 + 3);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B']);

        await store.setQuarantine('A', null, T0 + 4);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B', 'A']);
      });

      it('rejectEvent settles a pending event once, without touching the job', async () => {
        const e = await store.acceptEvent(newEvent('A', 'e1'));
        const before = await store.getJob('A');
        const error = { name: 'JobTerminalError', message: 'ended', code: 'SPOOL_TERMINAL' };
        expect(await store.rejectEvent(e.event.seq!, error, T0 + 50)).toBe(true);
        expect(await store.getEvent('A', 'e1')).toMatchObject({ status: 'rejected', error, processedAt: T0 + 50, revision: null });
        expect(await store.rejectEvent(e.event.seq!, { name: 'X', message: 'again' }, T0 + 60)).toBe(false);
        expect(await store.getEvent('A', 'e1')).toMatchObject({ error, processedAt: T0 + 50 });
        expect(await store.rejectEvent(987_654, error, T0 + 60)).toBe(false);
        expect(await store.getJob('A')).toEqual(before);
        expect(await store.history('A')).toHaveLength(1);

        const applied = await store.acceptEvent(newEvent('A', 'e2'));
        await store.commit([commitOf('A', 1, { event: { seq: applied.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })]);
        expect(await store.rejectEvent(applied.event.seq!, error, T0 + 70)).toBe(false);
        expect(await store.getEvent('A', 'e2')).toMatchObject({ status: 'applied', revision: 2, error: null });
      });
    });

    describe('commit', () => {
      beforeEach(async () => {
        await store.createJob(newJob('A'));
        await store.createJob(newJob('B'));
        await store.createJob(newJob('C'));
      });

      it('writes the job, appends history and settles the pending event, all at the next revision', async () => {
        const e = await store.acceptEvent(newEvent('A', 'e1', { type: 'PAY', card: '4242' }));
        const c = commitOf('A', 1, {
          value: { busy: 'upload' },
          n: 7,
          at: T0 + 100,
          eventType: 'PAY',
          eventId: 'e1',
          event: { seq: e.event.seq!, status: 'applied', error: null, payload: { type: 'PAY', card: '[redacted]' } },
        });
        expect(await store.commit([c])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.getJob('A')).toMatchObject({
          revision: 2,
          value: { busy: 'upload' },
          context: { n: 7 },
          machineVersion: '1',
          updatedAt: T0 + 100,
          createdAt: T0,
          snapshot: c.job.snapshot,
        });
        expect(ids(await store.listJobs({ state: 'busy.upload' }))).toEqual(['A']);
        expect(ids(await store.listJobs({ state: 'idle' }))).toEqual(['B', 'C']);
        const history = await store.history('A');
        expect(history.map((h) => h.revision)).toEqual([1, 2]);
        expect(history[1]).toEqual({ ...c.transition, jobId: 'A', revision: 2, runner: null, fence: null });
        expect(await store.getEvent('A', 'e1')).toMatchObject({
          status: 'applied',
          revision: 2,
          processedAt: T0 + 100,
          payload: { type: 'PAY', card: '[redacted]' },
          acceptedAt: T0 + 1,
        });
      });

      it('records ignored and failed outcomes with their error', async () => {
        const e1 = await store.acceptEvent(newEvent('A', 'e1'));
        const e2 = await store.acceptEvent(newEvent('A', 'e2'));
        const error = { name: 'Error', message: 'guard threw' };
        expect(
          await store.commit([
            commitOf('A', 1, { value: 'idle', outcome: 'ignored', event: { seq: e1.event.seq!, status: 'ignored', error: null, payload: { type: 'GO' } } }),
            commitOf('A', 2, { value: 'idle', outcome: 'failed', error, event: { seq: e2.event.seq!, status: 'failed', error, payload: { type: 'GO' } } }),
          ]),
        ).toEqual([
          { ok: true, revision: 2, fence: null },
          { ok: true, revision: 3, fence: null },
        ]);
        expect((await store.history('A')).map((h) => [h.revision, h.outcome, h.error])).toEqual([
          [1, 'started', null],
          [2, 'ignored', null],
          [3, 'failed', error],
        ]);
        expect((await store.listEvents('A')).map((e) => [e.status, e.revision, e.error])).toEqual([
          ['ignored', 2, null],
          ['failed', 3, error],
        ]);
      });

      it('refuses a stale expectedRevision with a conflict and writes nothing', async () => {
        expect(await store.commit([commitOf('A', 1)])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const e = await store.acceptEvent(newEvent('A', 'e1'));
        const before = await dumpStore(store);
        const results = await store.commit([
          commitOf('A', 1, { value: 'stale', event: { seq: e.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } }),
        ]);
        expect(results).toEqual([{ ok: false, reason: 'conflict', currentRevision: 2 }]);
        expect(await dumpStore(store)).toEqual(before);
        expect(await store.getEvent('A', 'e1')).toMatchObject({ status: 'pending' });
        // A revision from the future is a conflict too.
        expect(await store.commit([commitOf('A', 5)])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 2 }]);
        expect(await dumpStore(store)).toEqual(before);
      });

      it('only a migration commit (outcome migrated) changes the machine version: any other of another version, ending or not, is a conflict', async () => {
        const before = await dumpStore(store);
        for (const status of ['active', 'done'] as const) expect(await store.commit([commitOf('A', 1, { status, machineVersion: '2' })])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 1 }]);
        expect(await dumpStore(store)).toEqual(before);
        expect(await store.commit([commitOf('A', 1, { machineVersion: '2', outcome: 'migrated' }), commitOf('B', 1, { status: 'done' })])).toMatchObject([{ ok: true, revision: 2 }, { ok: true, revision: 2 }]);
        expect([ids(await store.listJobs({ machineId: 'm', machineVersion: '2' })), ids(await store.listJobs({ machineId: 'm', machineVersion: '1' }))]).toEqual([['A'], ['B', 'C']]);
      });

      it('a commit to an unknown job is a conflict with no current revision, and records no event', async () => {
        const before = await dumpStore(store);
        expect(
          await store.commit([commitOf('nope', 1, { event: { accept: newEvent('nope', 'x1'), status: 'applied', error: null, payload: { type: 'GO' } } })]),
        ).toEqual([{ ok: false, reason: 'conflict', currentRevision: null }]);
        expect(await dumpStore(store)).toEqual(before);
        expect(await store.getEvent('nope', 'x1')).toBeUndefined();
      });

      it('refuses to settle an event that is no longer pending (event-settled) and writes nothing', async () => {
        const e1 = await store.acceptEvent(newEvent('A', 'e1'));
        const settle = { seq: e1.event.seq!, status: 'applied' as const, error: null, payload: { type: 'GO' } };
        expect(await store.commit([commitOf('A', 1, { event: settle })])).toEqual([{ ok: true, revision: 2, fence: null }]);

        let before = await dumpStore(store);
        expect(await store.commit([commitOf('A', 2, { event: settle })])).toEqual([{ ok: false, reason: 'event-settled' }]);
        expect(await dumpStore(store)).toEqual(before);

        // A rejected event cannot be settled either.
        const e2 = await store.acceptEvent(newEvent('A', 'e2'));
        await store.rejectEvent(e2.event.seq!, { name: 'E', message: 'no' }, T0 + 3);
        before = await dumpStore(store);
        expect(await store.commit([commitOf('A', 2, { event: { ...settle, seq: e2.event.seq! } })])).toEqual([{ ok: false, reason: 'event-settled' }]);
        expect(await dumpStore(store)).toEqual(before);

        // Nor can another job's pending event.
        const b1 = await store.acceptEvent(newEvent('B', 'b1'));
        before = await dumpStore(store);
        expect(await store.commit([commitOf('A', 2, { event: { ...settle, seq: b1.event.seq! } })])).toEqual([{ ok: false, reason: 'event-settled' }]);
        expect(await dumpStore(store)).toEqual(before);
        expect(await store.getEvent('B', 'b1')).toMatchObject({ status: 'pending' });
      });

      it('inline accept records and settles a new event in the same commit', async () => {
        const accept = newEvent('A', 'e1', { type: 'PAY', card: '4242' }, T0 + 7);
        expect(
          await store.commit([commitOf('A', 1, { at: T0 + 8, event: { accept, status: 'applied', error: null, payload: { type: 'PAY', card: '[redacted]' } } })]),
        ).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.getEvent('A', 'e1')).toMatchObject({
          jobId: 'A',
          eventId: 'e1',
          type: 'PAY',
          payload: { type: 'PAY', card: '[redacted]' },
          payloadHash: accept.payloadHash,
          status: 'applied',
          revision: 2,
          // Accepted by the very commit that applied it: its history row is its record.
          seq: null,
          acceptedAt: T0 + 8,
          processedAt: T0 + 8,
          error: null,
        });
        expect(await store.pendingEvents('A', 10)).toEqual([]);
        expect((await store.history('A')).at(-1)).toMatchObject({ revision: 2, eventId: 'e1', eventType: 'PAY', payload: { type: 'PAY', card: '[redacted]' } });
        expect(await store.listEvents('A')).toEqual([await store.getEvent('A', 'e1')]);
        // Its id is taken: a queued accept of it is a duplicate, and the inbox stays empty.
        expect(await store.acceptEvent(newEvent('A', 'e1'))).toMatchObject({ duplicate: true, event: { revision: 2, status: 'applied' } });
        expect(await store.pendingEvents('A', 10)).toEqual([]);
      });

      it('inline accept of an event id already recorded is duplicate-event and leaves the job, history and inbox unchanged', async () => {
        const accept = newEvent('A', 'e1');
        await store.commit([commitOf('A', 1, { event: { accept, status: 'applied', error: null, payload: { type: 'GO' } } })]);
        const pending = await store.acceptEvent(newEvent('A', 'e2'));
        const before = await dumpStore(store);

        for (const eventId of ['e1', 'e2']) {
          const results = await store.commit([
            commitOf('A', 2, { value: 'dup', event: { accept: newEvent('A', eventId), status: 'applied', error: null, payload: { type: 'GO' } } }),
          ]);
          expect(results).toEqual([{ ok: false, reason: 'duplicate-event' }]);
          expect(await dumpStore(store)).toEqual(before);
        }
        expect(await store.getJob('A')).toMatchObject({ revision: 2, value: 's2' });
        expect(await store.getEvent('A', 'e2')).toEqual(pending.event);
      });

      it('finds an inline event by an id that names its revision, and by any other id, and refuses either id again', async () => {
        const inline = (revision: number, eventId: string) =>
          store.commit([commitOf('A', revision, { value: `v${revision + 1}`, event: { accept: newEvent('A', eventId), status: 'applied', error: null, payload: { type: 'GO' } } })]);
        // r2.* applied at revision 2 (found by the history key); r9.* applied at 3 and 'hook' at 4 (found by the event key index).
        expect(await inline(1, 'r2.made-up')).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await inline(2, 'r9.caller')).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(await inline(3, 'hook')).toEqual([{ ok: true, revision: 4, fence: null }]);
        for (const [eventId, revision] of [['r2.made-up', 2], ['r9.caller', 3], ['hook', 4]] as const) {
          expect(await store.getEvent('A', eventId)).toMatchObject({ eventId, revision, seq: null, status: 'applied' });
          expect(await store.acceptEvent(newEvent('A', eventId))).toMatchObject({ duplicate: true, event: { revision } });
        }
        expect(await store.getEvent('A', 'r3.made-up')).toBeUndefined();
        const before = await dumpStore(store);
        // Again at the revision each id names (r9.* now applies at 9 only after five more commits) or at the next one.
        for (const eventId of ['r2.made-up', 'r9.caller', 'hook']) {
          expect(await inline(4, eventId)).toEqual([{ ok: false, reason: 'duplicate-event' }]);
        }
        expect(await dumpStore(store)).toEqual(before);
        for (let r = 4; r < 8; r += 1) await store.commit([commitOf('A', r, { value: `v${r + 1}` })]);
        const at8 = await dumpStore(store);
        expect(await inline(8, 'r9.caller')).toEqual([{ ok: false, reason: 'duplicate-event' }]);
        expect(await dumpStore(store)).toEqual(at8);
        expect(await store.listEvents('A')).toMatchObject([{ eventId: 'r2.made-up' }, { eventId: 'r9.caller' }, { eventId: 'hook' }]);
      });

      it('an id that names a revision, recorded first in the inbox, is refused at that revision too', async () => {
        const queued = await store.acceptEvent(newEvent('A', 'r3.sent-twice'));
        expect(queued.duplicate).toBe(false);
        // Still waiting: the inline commit at revision 3 (the one its id names) is refused as a duplicate.
        const inlineAt3 = () =>
          store.commit([commitOf('A', 2, { value: 'again', event: { accept: newEvent('A', 'r3.sent-twice'), status: 'applied', error: null, payload: { type: 'GO' } } })]);
        await store.commit([commitOf('A', 1, { value: 'v2' })]);
        const before = await dumpStore(store);
        expect(await inlineAt3()).toEqual([{ ok: false, reason: 'duplicate-event' }]);
        expect(await dumpStore(store)).toEqual(before);
        // Applied at revision 3 from the inbox: the id names the revision it holds, and is still not taken twice.
        expect(await store.commit([commitOf('A', 2, { value: 'v3', event: { seq: queued.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })])).toEqual([
          { ok: true, revision: 3, fence: null },
        ]);
        expect(await store.acceptEvent(newEvent('A', 'r3.sent-twice'))).toMatchObject({ duplicate: true, event: { seq: queued.event.seq, revision: 3 } });
        // Queued and applied at revision 4, then sent again while the job is at 4: refused at revision 5, the one its id names.
        const early = await store.acceptEvent(newEvent('A', 'r5.early'));
        await store.commit([commitOf('A', 3, { value: 'v4', event: { seq: early.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })]);
        const at4 = await dumpStore(store);
        expect(
          await store.commit([commitOf('A', 4, { value: 'v5', event: { accept: newEvent('A', 'r5.early'), status: 'applied', error: null, payload: { type: 'GO' } } })]),
        ).toEqual([{ ok: false, reason: 'duplicate-event' }]);
        expect(await dumpStore(store)).toEqual(at4);
        expect(await store.listEvents('A')).toMatchObject([
          { eventId: 'r3.sent-twice', revision: 3 },
          { eventId: 'r5.early', revision: 4 },
        ]);
      });

      it('writeBatch: new jobs and transitions in one call, each on its own: a refused one leaves the others written', async () => {
        const before = await dumpStore(store);
        const result = await store.writeBatch({
          creates: [newJob('N1'), { ...newJob('N2'), children: [newJob('A')] }, newJob('A'), newJob('N3')],
          commits: [commitOf('A', 1, { value: 'a2' }), commitOf('B', 5, { value: 'stale' })],
        });
        expect(result.creates.map((c) => (c.ok ? { ok: true, created: c.result.created, id: c.result.job.id } : { ok: false }))).toEqual([
          { ok: true, created: true, id: 'N1' },
          { ok: false }, // its child collides with job A: N2 and its child are not written
          { ok: true, created: false, id: 'A' }, // an existing id: the job as it is
          { ok: true, created: true, id: 'N3' },
        ]);
        expect(result.commits).toEqual([
          { ok: true, revision: 2, fence: null },
          { ok: false, reason: 'conflict', currentRevision: 1 },
        ]);
        expect(await store.getJob('N2')).toBeUndefined();
        expect((await store.getJob('N1'))?.revision).toBe(1);
        expect((await store.history('N3')).map((h) => h.revision)).toEqual([1]);
        expect(await store.getJob('A')).toMatchObject({ revision: 2, value: 'a2' });
        expect((await dumpStore(store) as Record<string, unknown>)['B']).toEqual((before as Record<string, unknown>)['B']);
      });

      it('checks each commit of a batch on its own: one conflict does not stop the others', async () => {
        await store.commit([commitOf('B', 1)]);
        const b = await dumpStore(store);
        const eC = await store.acceptEvent(newEvent('C', 'c1'));
        const results = await store.commit([
          commitOf('A', 1, { value: 'a2' }),
          commitOf('B', 1, { value: 'stale' }),
          commitOf('C', 1, { value: 'c2', event: { seq: eC.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } }),
          commitOf('A', 2, { value: 'a3' }),
          commitOf('A', 2, { value: 'a3-again' }),
          commitOf('C', 2, { value: 'dup', event: { accept: newEvent('C', 'c1'), status: 'applied', error: null, payload: { type: 'GO' } } }),
        ]);
        expect(results).toEqual([
          { ok: true, revision: 2, fence: null },
          { ok: false, reason: 'conflict', currentRevision: 2 },
          { ok: true, revision: 2, fence: null },
          { ok: true, revision: 3, fence: null },
          { ok: false, reason: 'conflict', currentRevision: 3 },
          { ok: false, reason: 'duplicate-event' },
        ]);
        expect(await store.getJob('A')).toMatchObject({ revision: 3, value: 'a3' });
        expect(await store.getJob('C')).toMatchObject({ revision: 2, value: 'c2' });
        expect((b as Record<string, unknown>)['B']).toEqual(((await dumpStore(store)) as Record<string, unknown>)['B']);
        expect((await store.history('A')).map((h) => [h.revision, h.to])).toEqual([
          [1, 'idle'],
          [2, 'a2'],
          [3, 'a3'],
        ]);
        expect((await store.history('C')).map((h) => h.revision)).toEqual([1, 2]);
        expect(await store.getEvent('C', 'c1')).toMatchObject({ status: 'applied', revision: 2 });
      });

      it('keeps history contiguous from 1 and carries status changes', async () => {
        for (let r = 1; r < 12; r += 1) {
          expect(await store.commit([commitOf('A', r, { status: r === 11 ? 'done' : 'active' })])).toEqual([{ ok: true, revision: r + 1, fence: null }]);
        }
        expect((await store.history('A')).map((h) => h.revision)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
        expect(await store.getJob('A')).toMatchObject({ revision: 12, status: 'done' });
        expect(ids(await store.listJobs({ status: 'done' }))).toEqual(['A']);
      });
    });

    describe('setQuarantine', () => {
      it('sets and clears the reason without a revision change', async () => {
        await store.createJob(newJob('A'));
        await store.createJob(newJob('B'));
        await store.setQuarantine('A', 'machine m version 1 is not registered', T0 + 20);
        expect(await store.getJob('A')).toMatchObject({ quarantine: 'machine m version 1 is not registered', revision: 1, updatedAt: T0 + 20 });
        expect(ids(await store.listJobs({ quarantined: true }))).toEqual(['A']);
        expect(await store.history('A')).toHaveLength(1);

        await store.setQuarantine('A', null, T0 + 30);
        expect(await store.getJob('A')).toMatchObject({ quarantine: null, revision: 1, updatedAt: T0 + 30 });
        expect(ids(await store.listJobs({ quarantined: true }))).toEqual([]);
        expect(await store.getJob('B')).toMatchObject({ quarantine: null, updatedAt: T0 });
        // The job still commits normally afterwards.
        expect(await store.commit([commitOf('A', 1)])).toEqual([{ ok: true, revision: 2, fence: null }]);
      });
    });
  });
}
