/**
 * The JobStore contract for effects, timers, cancel requests, progress, notes, assets and purge:
 * one suite, run against every store. Records are built by hand (no runtime).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import type {
  AttemptResult,
  EffectRecord,
  ErrorInfo,
  EventSource,
  JobStatus,
  JobStore,
  JsonValue,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
  TimerKind,
  TransitionCommit,
} from '../src/ports/store.ts';
import { MAX_RELEASES, RELEASED_ATTEMPT } from '../src/ports/store.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';
import { CONTRACT_STORE, ON_POSTGRES, ON_SQLITE_WASM, postgresContractStore, sqliteWasmContractStore } from './helpers/stores.ts';

interface StoreUnderTest {
  store: JobStore;
  /** Called after the store is closed. */
  dispose?: () => Promise<void> | void;
}

type StoreFactory = () => Promise<StoreUnderTest>;

const TMP_ROOT = fileURLToPath(new URL('../.vitest-tmp/', import.meta.url));
const T0 = 1_700_000_000_000;
const BOOM: ErrorInfo = { name: 'Error', message: 'boom', code: 'E_BOOM' };

// ---------------------------------------------------------------------------------------------
// Hand-built records

function newJob(id: string, o: { status?: JobStatus; progress?: number | null; at?: number } & Partial<Pick<NewJob, 'effects' | 'timers' | 'deliveries'>> = {}): NewJob {
  const at = o.at ?? T0;
  const { status = 'active', progress, at: _at, ...requests } = o;
  return {
    id,
    machineId: 'm',
    machineVersion: '1',
    status,
    value: 'idle',
    statePaths: ['idle'],
    context: { n: 0 },
    snapshot: JSON.stringify({ status, value: 'idle', context: { n: 0 } }),
    input: { id },
    inputHash: `hash:${id}`,
    idempotencyKey: null,
    owner: null,
    at,
    transition: { eventId: null, eventType: 'xstate.init', payload: { id }, from: null, to: 'idle', outcome: 'started', error: null, at },
    ...(progress === undefined ? {} : { progress }),
    ...requests,
  };
}

type CommitExtras = Omit<Partial<TransitionCommit>, 'jobId' | 'expectedRevision' | 'job'> & {
  at?: number;
  status?: JobStatus;
  value?: string;
  progress?: number | null;
};

function commitOf(jobId: string, expectedRevision: number, o: CommitExtras = {}): TransitionCommit {
  const { at = T0 + 10 * expectedRevision, status = 'active', value = `s${expectedRevision + 1}`, progress, ...rest } = o;
  return {
    jobId,
    expectedRevision,
    job: {
      status,
      value,
      statePaths: [value],
      context: { n: expectedRevision },
      snapshot: JSON.stringify({ status, value, context: { n: expectedRevision } }),
      machineVersion: '1',
      ...(progress === undefined ? {} : { progress }),
      at,
    },
    transition: { eventId: null, eventType: 'GO', payload: { type: 'GO' }, from: null, to: value, outcome: 'applied', error: null, at },
    ...rest,
  };
}

function effectOf(jobId: string, actorId: string, revision: number, o: { at?: number; input?: JsonValue; maxAttempts?: number; unsafe?: boolean } = {}): NewEffect {
  return {
    id: `${jobId}~${actorId}~r${revision}`,
    jobId,
    actorId,
    src: `src.${actorId}`,
    input: o.input ?? { actorId },
    maxAttempts: o.maxAttempts ?? 3,
    unsafe: o.unsafe ?? false,
    createdRevision: revision,
    at: o.at ?? T0 + 10 * (revision - 1),
  };
}

function timerOf(jobId: string, key: string, dueAt: number, revision: number, kind: TimerKind = 'after'): NewTimer {
  return { id: `${jobId}~${key}~r${revision}`, jobId, key, kind, event: { type: `T.${key}` }, dueAt, createdRevision: revision, createdAt: T0 + 10 * (revision - 1) };
}

function eventOf(jobId: string, eventId: string, type = 'GO', o: { at?: number; source?: EventSource; sourceId?: string | null; attempt?: number | null } = {}): NewInboxEvent {
  const payload = { type };
  return {
    jobId,
    eventId,
    type,
    payload,
    payloadHash: `hash:${type}`,
    at: o.at ?? T0 + 1,
    ...(o.source === undefined ? {} : { source: o.source }),
    ...(o.sourceId === undefined ? {} : { sourceId: o.sourceId }),
    ...(o.attempt === undefined ? {} : { attempt: o.attempt }),
  };
}

/** The outcome event of one attempt of an effect. */
function outcomeEvent(effect: Pick<EffectRecord, 'id' | 'jobId' | 'actorId'>, attempt: number, kind: 'done' | 'error' = 'done', suffix = ''): NewInboxEvent {
  return eventOf(effect.jobId, `${effect.id}#${attempt}${suffix}`, `xstate.${kind}.actor.${effect.actorId}`, { source: 'effect', sourceId: effect.id, attempt });
}

const succeeded = (effect: EffectRecord, attempt: number, output: JsonValue = { ok: true }): AttemptResult => ({
  kind: 'succeeded',
  output,
  event: outcomeEvent(effect, attempt),
});

const failed = (effect: EffectRecord, attempt: number, retryAt: number | null, withEvent = true): AttemptResult => ({
  kind: 'failed',
  error: BOOM,
  retryAt,
  event: withEvent ? outcomeEvent(effect, attempt, 'error') : null,
});

/** Everything the store holds about one job, through the port. */
async function dumpJob(store: JobStore, jobId: string): Promise<unknown> {
  return {
    job: await store.getJob(jobId),
    history: await store.history(jobId),
    events: await store.listEvents(jobId),
    effects: await store.listEffects(jobId),
    attempts: await store.listAttempts(jobId),
    timers: await store.listTimers(jobId),
    notes: await store.listNotes(jobId),
    assets: await store.listAssets(jobId),
  };
}

// ---------------------------------------------------------------------------------------------

function effectsContract(name: string, factory: StoreFactory): void {
  describe(`JobStore effects/timers contract: ${name}`, () => {
    let store: JobStore;
    let current: StoreUnderTest;

    beforeEach(async () => {
      current = await factory();
      store = current.store;
      expect((await store.createJob(newJob('A'))).created).toBe(true);
      expect((await store.createJob(newJob('B'))).created).toBe(true);
    });
    afterEach(async () => {
      await store.close();
      await current.dispose?.();
    });

    /** Commit effects for job A at revision 1 -> 2 and return them as stored. */
    async function createEffects(...actorIds: string[]): Promise<EffectRecord[]> {
      const create = actorIds.map((a) => effectOf('A', a, 2));
      expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
      return Promise.all(create.map(async (e) => (await store.getEffect(e.id))!));
    }

    /** Claim an attempt; the effect as stored (the job's lease fence the claim returns is checked apart). */
    async function claimed(effect: EffectRecord, runner = 'w1', now = T0 + 100, until = T0 + 1000): Promise<EffectRecord> {
      const c = await store.claimEffect(effect.id, runner, now, until);
      expect(c).toBeDefined();
      const { leaseFence, ...stored } = c!;
      expect(leaseFence).toBeGreaterThan(0);
      return stored;
    }

    describe('job fields', () => {
      it('a new job has no progress and no cancel request unless given; createJob writes the effects, timers and deliveries it carries', async () => {
        expect(await store.getJob('A')).toMatchObject({ progress: null, cancelRequestedAt: null, cancelReason: null });
        const e = effectOf('C', 'boot', 1, { at: T0 });
        const t = timerOf('C', 'tick', T0 + 50, 1);
        const d = eventOf('C', 'self~r1~0', 'SELF', { source: 'self', at: T0 });
        const r = await store.createJob(newJob('C', { progress: 5, effects: [e], timers: [t], deliveries: [d] }));
        expect(r).toMatchObject({ created: true, job: { progress: 5, revision: 1 } });
        expect((await store.listEffects('C')).map((x) => [x.id, x.status, x.active])).toEqual([[e.id, 'pending', true]]);
        expect((await store.listTimers('C')).map((x) => [x.id, x.status])).toEqual([[t.id, 'scheduled']]);
        expect(await store.listEvents('C')).toMatchObject([{ eventId: 'self~r1~0', status: 'pending', source: 'self', sourceId: null, attempt: null }]);
      });

      it('inbox events default to source external with no source id or attempt, and keep them when given', async () => {
        const plain = await store.acceptEvent(eventOf('A', 'e1'));
        expect(plain.event).toMatchObject({ source: 'external', sourceId: null, attempt: null });
        const fromEffect = await store.acceptEvent(eventOf('A', 'e2', 'X', { source: 'effect', sourceId: 'eff-1', attempt: 2 }));
        expect(fromEffect.event).toMatchObject({ source: 'effect', sourceId: 'eff-1', attempt: 2 });
        expect(await store.getEvent('A', 'e2')).toEqual(fromEffect.event);
      });

      it('commit progress: undefined leaves it, a number sets it, null clears it', async () => {
        expect(await store.commit([commitOf('A', 1, { progress: 40 })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.getJob('A')).toMatchObject({ progress: 40 });
        expect(await store.commit([commitOf('A', 2)])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(await store.getJob('A')).toMatchObject({ progress: 40, revision: 3 });
        expect(await store.commit([commitOf('A', 3, { progress: null })])).toEqual([{ ok: true, revision: 4, fence: null }]);
        expect(await store.getJob('A')).toMatchObject({ progress: null });
      });

      it('self deliveries are accepted as pending events in the commit, and an already accepted one is ignored', async () => {
        await store.acceptEvent(eventOf('A', 'self-1', 'FIRST'));
        const deliveries = [eventOf('A', 'self-1', 'AGAIN', { source: 'self' }), eventOf('A', 'self-2', 'PING', { source: 'self' })];
        expect(await store.commit([commitOf('A', 1, { deliveries })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect((await store.listEvents('A')).map((e) => [e.eventId, e.type, e.status, e.source])).toEqual([
          ['self-1', 'FIRST', 'pending', 'external'],
          ['self-2', 'PING', 'pending', 'self'],
        ]);
      });
    });

    describe('effects', () => {
      it('commit creates effects: pending, active, no attempt yet; listed by creation revision, then id', async () => {
        const create = [effectOf('A', 'upload', 2, { input: { file: 'x' }, maxAttempts: 5, unsafe: true }), effectOf('A', 'notify', 2)];
        expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.commit([commitOf('A', 2, { effects: { create: [effectOf('A', 'aaa', 3)], deactivate: [] } })])).toEqual([
          { ok: true, revision: 3, fence: null },
        ]);
        const upload = await store.getEffect('A~upload~r2');
        expect(upload).toEqual({
          id: 'A~upload~r2',
          jobId: 'A',
          actorId: 'upload',
          src: 'src.upload',
          kind: 'activity',
          input: { file: 'x' },
          status: 'pending',
          active: true,
          attempt: 0,
          maxAttempts: 5,
          unsafe: true,
          nextRunAt: null,
          claimedBy: null,
          claimExpiresAt: null,
          token: null,
          output: null,
          error: null,
          createdRevision: 2,
          createdAt: T0 + 10,
          updatedAt: T0 + 10,
        });
        expect((await store.listEffects('A')).map((e) => e.id)).toEqual(['A~notify~r2', 'A~upload~r2', 'A~aaa~r3']);
        expect(await store.listEffects('B')).toEqual([]);
        expect(await store.getEffect('nope')).toBeUndefined();
        expect(await store.listAttempts('A')).toEqual([]);

        // Records returned are copies.
        (upload!.input as { file: string }).file = 'changed';
        expect((await store.getEffect('A~upload~r2'))!.input).toEqual({ file: 'x' });
      });

      it('deactivation via commit cancels the unfinished effects of that invocation; finished ones keep their status', async () => {
        const [p, r, w, b, s, f] = await createEffects('p', 'r', 'w', 'b', 's', 'f');
        expect(await store.commit([commitOf('B', 1, { effects: { create: [effectOf('B', 'p', 2)], deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        await claimed(r!);
        await claimed(w!);
        expect(await store.finishAttempt(w!.id, 1, { kind: 'waiting', token: 'tok-w' }, T0 + 110)).toBe('current');
        await claimed(b!);
        expect(await store.finishAttempt(b!.id, 1, failed(b!, 1, T0 + 5000), T0 + 110)).toBe('current');
        await claimed(s!);
        expect(await store.finishAttempt(s!.id, 1, succeeded(s!, 1), T0 + 110)).toBe('current');
        await claimed(f!);
        expect(await store.finishAttempt(f!.id, 1, failed(f!, 1, null), T0 + 110)).toBe('current');
        expect((await store.listEffects('A')).map((e) => [e.actorId, e.status])).toEqual([
          ['b', 'backoff'],
          ['f', 'failed'],
          ['p', 'pending'],
          ['r', 'running'],
          ['s', 'succeeded'],
          ['w', 'waiting'],
        ]);

        const deactivate = ['p', 'r', 'w', 'b', 's', 'f'];
        expect(await store.commit([commitOf('A', 2, { at: T0 + 200, effects: { create: [], deactivate } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect((await store.listEffects('A')).map((e) => [e.actorId, e.status, e.active, e.token, e.updatedAt])).toEqual([
          ['b', 'cancelled', false, null, T0 + 200],
          ['f', 'failed', false, null, T0 + 200],
          ['p', 'cancelled', false, null, T0 + 200],
          ['r', 'cancelled', false, null, T0 + 200],
          ['s', 'succeeded', false, null, T0 + 200],
          ['w', 'cancelled', false, null, T0 + 200],
        ]);
        expect((await store.getEffect(s!.id))!.output).toEqual({ ok: true });
        // Another job's invocation with the same actor id is untouched.
        expect(await store.getEffect('B~p~r2')).toMatchObject({ status: 'pending', active: true });
        expect(await store.getEffect(p!.id)).toMatchObject({ status: 'cancelled' });

        // Deactivating again touches nothing (only active effects are deactivated).
        expect(await store.commit([commitOf('A', 3, { at: T0 + 300, effects: { create: [], deactivate } })])).toEqual([{ ok: true, revision: 4, fence: null }]);
        expect((await store.listEffects('A')).every((e) => e.updatedAt === T0 + 200)).toBe(true);
      });

      it('deactivating and re-creating an invocation in one commit leaves only the new one active', async () => {
        const [old] = await createEffects('poll');
        const again = effectOf('A', 'poll', 3);
        expect(await store.commit([commitOf('A', 2, { effects: { create: [again], deactivate: ['poll'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect((await store.listEffects('A')).map((e) => [e.id, e.status, e.active])).toEqual([
          [old!.id, 'cancelled', false],
          [again.id, 'pending', true],
        ]);
      });

      it('claimEffect starts an attempt once; another runner gets nothing while the claim holds', async () => {
        const [e] = await createEffects('upload');
        const c = await claimed(e!, 'w1', T0 + 100, T0 + 1000);
        expect(c).toEqual({ ...e, status: 'running', attempt: 1, claimedBy: 'w1', claimExpiresAt: T0 + 1000, nextRunAt: null, updatedAt: T0 + 100 });
        expect((await store.getJob('A'))?.lease).toEqual({ owner: 'w1', fence: 1, until: T0 + 1000 }); // the job's lease, in the same transaction
        expect(await store.getEffect(e!.id)).toEqual(c);
        expect(await store.listAttempts('A')).toEqual([
          { effectId: e!.id, attempt: 1, runner: 'w1', startedAt: T0 + 100, endedAt: null, outcome: 'running', error: null },
        ]);
        expect(await store.claimEffect(e!.id, 'w2', T0 + 999, T0 + 2000)).toBeUndefined();
        expect(await store.claimEffect(e!.id, 'w1', T0 + 999, T0 + 2000)).toBeUndefined();
        expect(await store.claimEffect(e!.id, 'w2', T0 + 999, T0 + 2000, 'someone-else')).toBeUndefined();
        expect(await store.claimEffect('nope', 'w2', T0 + 999, T0 + 2000)).toBeUndefined();
        expect(await store.getEffect(e!.id)).toEqual(c);
        expect(await store.listAttempts('A')).toHaveLength(1);
      });

      it('claimEffect takes over an expired claim, or a named dead runner, and records the previous attempt as interrupted', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!, 'w1', T0 + 100, T0 + 1000);
        // Expired exactly at claimExpiresAt.
        const second = await store.claimEffect(e!.id, 'w2', T0 + 1000, T0 + 2000);
        expect(second).toMatchObject({ status: 'running', attempt: 2, claimedBy: 'w2', claimExpiresAt: T0 + 2000 });
        // Before expiry, only with takeOver naming the runner that holds it.
        expect(await store.claimEffect(e!.id, 'w3', T0 + 1500, T0 + 3000, 'w1')).toBeUndefined();
        const third = await store.claimEffect(e!.id, 'w3', T0 + 1500, T0 + 3000, 'w2');
        expect(third).toMatchObject({ status: 'running', attempt: 3, claimedBy: 'w3', claimExpiresAt: T0 + 3000 });
        expect(await store.listAttempts('A')).toEqual([
          { effectId: e!.id, attempt: 1, runner: 'w1', startedAt: T0 + 100, endedAt: T0 + 1000, outcome: 'interrupted', error: null },
          { effectId: e!.id, attempt: 2, runner: 'w2', startedAt: T0 + 1000, endedAt: T0 + 1500, outcome: 'interrupted', error: null },
          { effectId: e!.id, attempt: 3, runner: 'w3', startedAt: T0 + 1500, endedAt: null, outcome: 'running', error: null },
        ]);
      });

      it('claimEffect refuses inactive, waiting and finished effects', async () => {
        const [gone, waiting, done, dead] = await createEffects('gone', 'waiting', 'done', 'dead');
        expect(await store.commit([commitOf('A', 2, { effects: { create: [], deactivate: ['gone'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        await claimed(waiting!);
        await store.finishAttempt(waiting!.id, 1, { kind: 'waiting', token: 'tok' }, T0 + 110);
        await claimed(done!);
        await store.finishAttempt(done!.id, 1, succeeded(done!, 1), T0 + 110);
        await claimed(dead!);
        await store.finishAttempt(dead!.id, 1, failed(dead!, 1, null), T0 + 110);
        for (const e of [gone!, waiting!, done!, dead!]) {
          const before = await store.getEffect(e.id);
          expect(await store.claimEffect(e.id, 'w9', T0 + 99_999, T0 + 999_999, 'w1')).toBeUndefined();
          expect(await store.getEffect(e.id)).toEqual(before);
        }
        expect((await store.listAttempts('A')).filter((a) => a.outcome === 'running')).toEqual([]);
      });

      it('a backoff effect is claimable only once its retry is due; its failed attempt stays failed', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!);
        expect(await store.finishAttempt(e!.id, 1, failed(e!, 1, T0 + 500, false), T0 + 120)).toBe('current');
        expect(await store.getEffect(e!.id)).toMatchObject({
          status: 'backoff',
          nextRunAt: T0 + 500,
          error: BOOM,
          claimedBy: null,
          claimExpiresAt: null,
          updatedAt: T0 + 120,
        });
        // A retry with no event to deliver accepts nothing.
        expect(await store.listEvents('A')).toEqual([]);
        expect(await store.claimEffect(e!.id, 'w1', T0 + 499, T0 + 2000)).toBeUndefined();
        const retry = await store.claimEffect(e!.id, 'w1', T0 + 500, T0 + 2000);
        expect(retry).toMatchObject({ status: 'running', attempt: 2, nextRunAt: null, claimedBy: 'w1', leaseFence: 1 });
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.endedAt, a.error])).toEqual([
          [1, 'failed', T0 + 120, BOOM],
          [2, 'running', null, null],
        ]);
      });

      it('renewClaim extends the claim of the current attempt only', async () => {
        const [e] = await createEffects('upload');
        const c = await claimed(e!, 'w1', T0 + 100, T0 + 1000);
        expect(await store.renewClaim(e!.id, 1, 'w1', T0 + 4000, T0 + 150)).toBe(true);
        expect(await store.getEffect(e!.id)).toEqual({ ...c, claimExpiresAt: T0 + 4000 });
        expect(await store.renewClaim(e!.id, 1, 'w2', T0 + 9000, T0 + 150)).toBe(false);
        expect(await store.renewClaim(e!.id, 2, 'w1', T0 + 9000, T0 + 150)).toBe(false);
        expect(await store.renewClaim('nope', 1, 'w1', T0 + 9000, T0 + 150)).toBe(false);
        expect((await store.getEffect(e!.id))!.claimExpiresAt).toBe(T0 + 4000);
        await store.finishAttempt(e!.id, 1, succeeded(e!, 1), T0 + 200);
        expect(await store.renewClaim(e!.id, 1, 'w1', T0 + 9000, T0 + 150)).toBe(false);
        expect((await store.getEffect(e!.id))!.claimExpiresAt).toBeNull();
      });

      it('releaseAttempt gives back a running attempt of this runner: pending again, one more attempt allowed, recorded interrupted (Released)', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!, 'w1');
        expect(await store.releaseAttempt!(e!.id, 1, 'w2', T0 + 150)).toBe(false); // not its claim
        expect(await store.releaseAttempt!(e!.id, 2, 'w1', T0 + 150)).toBe(false); // not the current attempt
        expect(await store.releaseAttempt!(e!.id, 1, 'w1', T0 + 150)).toBe(true);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'pending', attempt: 1, maxAttempts: 4, claimedBy: null, claimExpiresAt: null, nextRunAt: null, updatedAt: T0 + 150 });
        expect(await store.listAttempts('A')).toEqual([
          { effectId: e!.id, attempt: 1, runner: 'w1', startedAt: T0 + 100, endedAt: T0 + 150, outcome: 'interrupted', error: RELEASED_ATTEMPT },
        ]);
        expect(await store.releaseAttempt!(e!.id, 1, 'w1', T0 + 160)).toBe(false); // once
        // The stopping runner lets its job leases go; the next claim is attempt 2, and nothing marks attempt 1 again.
        await store.releaseLeases('w1', 'all');
        expect((await store.claimEffect(e!.id, 'w2', T0 + 200, T0 + 1200))?.attempt).toBe(2);
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.endedAt])).toEqual([
          [1, 'interrupted', T0 + 150],
          [2, 'running', null],
        ]);
      });

      it(`releaseAttempt gives back at most ${MAX_RELEASES} attempts of one activity; the next is left to be taken over and counted`, async () => {
        const [e] = await createEffects('upload');
        let at = T0 + 100;
        for (let n = 1; n <= MAX_RELEASES + 1; n += 1) {
          expect((await store.claimEffect(e!.id, 'w1', at, at + 1000))?.attempt).toBe(n);
          const released = await store.releaseAttempt!(e!.id, n, 'w1', at + 10);
          expect(released).toBe(n <= MAX_RELEASES);
          at += 100;
        }
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'running', attempt: MAX_RELEASES + 1, maxAttempts: 3 + MAX_RELEASES, claimedBy: 'w1' });
      });

      it('claimEffect never starts an attempt past maxAttempts, even taking over a dead runner (the last interrupted attempt is left to be recorded exhausted)', async () => {
        const once = effectOf('A', 'once', 2, { maxAttempts: 1 });
        expect(await store.commit([commitOf('A', 1, { effects: { create: [once], deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        await claimed((await store.getEffect(once.id))!, 'w1', T0 + 100, T0 + 1000);
        await store.releaseLeases('w1', 'all');
        const before = await store.getEffect(once.id);
        expect(await store.claimEffect(once.id, 'w2', T0 + 5000, T0 + 6000, 'w1')).toBeUndefined();
        expect(await store.getEffect(once.id)).toEqual(before);
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome])).toEqual([[1, 'running']]);
      });

      it('releaseAttempt leaves an activity unsafe to repeat as it is', async () => {
        const unsafe = effectOf('A', 'charge', 2, { unsafe: true });
        expect(await store.commit([commitOf('A', 1, { effects: { create: [unsafe], deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const c = await claimed((await store.getEffect(unsafe.id))!, 'w1');
        expect(await store.releaseAttempt!(unsafe.id, 1, 'w1', T0 + 150)).toBe(false);
        expect(await store.getEffect(unsafe.id)).toEqual(c);
      });

      it('finishAttempt (current, succeeded) settles the effect and accepts its outcome event', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!);
        expect(await store.finishAttempt(e!.id, 1, succeeded(e!, 1, { url: 'u' }), T0 + 150)).toBe('current');
        expect(await store.getEffect(e!.id)).toMatchObject({
          status: 'succeeded',
          active: true,
          attempt: 1,
          output: { url: 'u' },
          error: null,
          claimedBy: null,
          claimExpiresAt: null,
          nextRunAt: null,
          updatedAt: T0 + 150,
        });
        expect(await store.listAttempts('A')).toEqual([
          { effectId: e!.id, attempt: 1, runner: 'w1', startedAt: T0 + 100, endedAt: T0 + 150, outcome: 'succeeded', error: null },
        ]);
        expect(await store.listEvents('A')).toMatchObject([
          { eventId: `${e!.id}#1`, type: 'xstate.done.actor.upload', status: 'pending', source: 'effect', sourceId: e!.id, attempt: 1 },
        ]);
      });

      it('finishAttempt (current, failed without retry) fails the effect with its error event', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!);
        expect(await store.finishAttempt(e!.id, 1, failed(e!, 1, null), T0 + 150)).toBe('current');
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'failed', error: BOOM, nextRunAt: null, output: null, claimedBy: null });
        expect((await store.listAttempts('A')).map((a) => [a.outcome, a.error])).toEqual([['failed', BOOM]]);
        expect(await store.listEvents('A')).toMatchObject([{ type: 'xstate.error.actor.upload', status: 'pending', attempt: 1 }]);
      });

      it('finishAttempt after the state was left is stale: the effect stays cancelled, the event is still accepted', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!);
        expect(await store.commit([commitOf('A', 2, { at: T0 + 120, effects: { create: [], deactivate: ['upload'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        const cancelled = await store.getEffect(e!.id);
        expect(await store.finishAttempt(e!.id, 1, succeeded(e!, 1), T0 + 150)).toBe('stale');
        expect(await store.getEffect(e!.id)).toEqual(cancelled);
        expect(cancelled).toMatchObject({ status: 'cancelled', output: null });
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.endedAt])).toEqual([[1, 'stale', T0 + 150]]);
        expect(await store.listEvents('A')).toMatchObject([{ eventId: `${e!.id}#1`, status: 'pending', source: 'effect', attempt: 1 }]);
      });

      it('finishAttempt of an attempt a newer claim replaced is stale and does not touch the current attempt', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!, 'w1', T0 + 100, T0 + 1000);
        const second = await claimed(e!, 'w2', T0 + 1000, T0 + 2000);
        expect(await store.finishAttempt(e!.id, 1, failed(e!, 1, null), T0 + 1100)).toBe('stale');
        expect(await store.getEffect(e!.id)).toEqual(second);
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.error])).toEqual([
          [1, 'stale', BOOM],
          [2, 'running', null],
        ]);
        expect((await store.listEvents('A')).map((x) => [x.eventId, x.attempt])).toEqual([[`${e!.id}#1`, 1]]);

        expect(await store.finishAttempt(e!.id, 2, succeeded(e!, 2), T0 + 1200)).toBe('current');
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'succeeded', attempt: 2 });
        expect((await store.listEvents('A')).map((x) => [x.eventId, x.attempt])).toEqual([
          [`${e!.id}#1`, 1],
          [`${e!.id}#2`, 2],
        ]);
      });

      it('an outcome event already accepted is not accepted twice', async () => {
        const [e] = await createEffects('upload');
        await claimed(e!);
        const pre = await store.acceptEvent({ ...outcomeEvent(e!, 1), type: 'EARLIER' });
        expect(await store.finishAttempt(e!.id, 1, succeeded(e!, 1), T0 + 150)).toBe('current');
        expect(await store.listEvents('A')).toEqual([pre.event]);
      });

      it('waiting: the token finds the effect and completes it once', async () => {
        const [e] = await createEffects('approve');
        await claimed(e!);
        expect(await store.finishAttempt(e!.id, 1, { kind: 'waiting', token: 'tok-1' }, T0 + 150)).toBe('current');
        const waiting = await store.getEffect(e!.id);
        expect(waiting).toMatchObject({ status: 'waiting', token: 'tok-1', claimedBy: null, claimExpiresAt: null, updatedAt: T0 + 150 });
        expect((await store.listAttempts('A')).map((a) => [a.outcome, a.endedAt])).toEqual([['waiting', T0 + 150]]);
        expect(await store.listEvents('A')).toEqual([]);
        expect(await store.effectByToken('tok-1')).toEqual(waiting);
        expect(await store.effectByToken('tok-2')).toBeUndefined();

        expect(await store.completeByToken('tok-1', { kind: 'succeeded', output: { approved: true } }, outcomeEvent(e!, 1), T0 + 300)).toBe(true);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'succeeded', output: { approved: true }, error: null, token: null, updatedAt: T0 + 300 });
        expect((await store.listAttempts('A')).map((a) => [a.outcome, a.endedAt])).toEqual([['succeeded', T0 + 300]]);
        expect(await store.listEvents('A')).toMatchObject([{ eventId: `${e!.id}#1`, status: 'pending', source: 'effect', sourceId: e!.id }]);

        // Second use: refused, and no event.
        expect(await store.completeByToken('tok-1', { kind: 'failed', error: BOOM }, outcomeEvent(e!, 1, 'error', '-again'), T0 + 400)).toBe(false);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'succeeded', output: { approved: true } });
        expect(await store.listEvents('A')).toHaveLength(1);
        expect(await store.effectByToken('tok-1')).toBeUndefined();
      });

      it('completeByToken can fail the waiting effect', async () => {
        const [e] = await createEffects('approve');
        await claimed(e!);
        await store.finishAttempt(e!.id, 1, { kind: 'waiting', token: 'tok-f' }, T0 + 150);
        expect(await store.completeByToken('tok-f', { kind: 'failed', error: BOOM }, outcomeEvent(e!, 1, 'error'), T0 + 300)).toBe(true);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'failed', error: BOOM, output: null, token: null });
        expect((await store.listAttempts('A')).map((a) => [a.outcome, a.error])).toEqual([['failed', BOOM]]);
        expect(await store.listEvents('A')).toMatchObject([{ type: 'xstate.error.actor.approve' }]);
      });

      it('the token of a deactivated effect is gone: nothing found, nothing completed, no event', async () => {
        const [e] = await createEffects('approve');
        await claimed(e!);
        await store.finishAttempt(e!.id, 1, { kind: 'waiting', token: 'tok-d' }, T0 + 150);
        expect(await store.commit([commitOf('A', 2, { effects: { create: [], deactivate: ['approve'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(await store.effectByToken('tok-d')).toBeUndefined();
        expect(await store.completeByToken('tok-d', { kind: 'succeeded', output: 1 }, outcomeEvent(e!, 1), T0 + 300)).toBe(false);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'cancelled', output: null });
        expect(await store.listEvents('A')).toEqual([]);
      });

      it('a token another waiting effect holds is refused and the attempt is left as it was', async () => {
        const [a, b] = await createEffects('a', 'b');
        await claimed(a!);
        await claimed(b!);
        await store.finishAttempt(a!.id, 1, { kind: 'waiting', token: 'same' }, T0 + 150);
        const before = await dumpJob(store, 'A');
        await expect(store.finishAttempt(b!.id, 1, { kind: 'waiting', token: 'same' }, T0 + 160)).rejects.toThrow();
        expect(await dumpJob(store, 'A')).toEqual(before);
        expect(await store.getEffect(b!.id)).toMatchObject({ status: 'running', token: null });
      });

      it('a commit with finish records the attempt and applies its outcome event in one transaction; a stale attempt, a lost lease or a waiting event writes nothing', async () => {
        const [e] = await createEffects('upload');
        const c = await store.claimEffect(e!.id, 'w1', T0 + 100, T0 + 1000);
        const fence = c!.leaseFence;
        const event = outcomeEvent(e!, 1);
        const outcome = (o: { attempt?: number; fence?: number } = {}): TransitionCommit =>
          commitOf('A', 2, {
            event: { accept: event, status: 'applied', error: null, payload: event.payload },
            finish: { id: e!.id, attempt: o.attempt ?? 1, result: succeeded(e!, o.attempt ?? 1, { url: 'u' }), at: T0 + 150, lease: { runner: 'w1', fence: o.fence ?? fence } },
            lease: { runner: 'w1', fence, now: T0 + 150, until: null },
          });
        const before = await dumpJob(store, 'A');
        // Not the current attempt, or under a fence the runner no longer holds: nothing at all.
        expect(await store.commit([outcome({ attempt: 2 })])).toEqual([{ ok: false, reason: 'outcome-not-current' }]);
        expect(await store.commit([outcome({ fence: fence + 1 })])).toEqual([{ ok: false, reason: 'outcome-not-current' }]);
        expect(await dumpJob(store, 'A')).toEqual(before);
        // An event waiting in the inbox comes first: a conflict, nothing written.
        const waiting = await store.acceptEvent({ ...outcomeEvent(e!, 1, 'done', '-earlier'), type: 'EARLIER' });
        const queued = await dumpJob(store, 'A');
        expect(await store.commit([outcome()])).toEqual([{ ok: false, reason: 'conflict', currentRevision: 2 }]);
        expect(await dumpJob(store, 'A')).toEqual(queued);
        await store.rejectEvent(waiting.event.seq!, BOOM, T0 + 120);
        // The attempt ends, the effect settles, the job moves and the event is recorded applied, together.
        expect(await store.commit([outcome()])).toEqual([{ ok: true, revision: 3, fence }]);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'succeeded', output: { url: 'u' }, claimedBy: null });
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome, a.endedAt])).toEqual([[1, 'succeeded', T0 + 150]]);
        expect((await store.getJob('A'))?.revision).toBe(3);
        expect((await store.listEvents('A')).find((x) => x.eventId === event.eventId)).toMatchObject({ status: 'applied', revision: 3, source: 'effect', sourceId: e!.id, attempt: 1 });
        expect((await store.getJob('A'))?.lease).toBeNull();
      });

      it('a commit claims the first attempt of an effect it creates (claims): running, attempt 1, its runner and claim expiry, the lease kept; refused with the commit when the lease moved on', async () => {
        const [e] = await createEffects('upload');
        const c = await store.claimEffect(e!.id, 'w1', T0 + 100, T0 + 1000);
        const fence = c!.leaseFence;
        const next = effectOf('A', 'resize', 3, { at: T0 + 150 });
        const event = outcomeEvent(e!, 1);
        const outcome = (runner: string, held: number | null, withOutcome = true): TransitionCommit =>
          commitOf('A', 3, {
            ...(withOutcome
              ? {
                  event: { accept: event, status: 'applied', error: null, payload: event.payload },
                  finish: { id: e!.id, attempt: 1, result: succeeded(e!, 1), at: T0 + 150, lease: { runner, fence: held ?? -1 } },
                }
              : {}),
            effects: { create: [next], deactivate: ['upload'] },
            claims: [{ effectId: next.id, claimUntil: T0 + 5000 }],
            lease: { runner, fence: held, now: T0 + 150, until: T0 + 5000 },
          });
        // Another runner, w2, took the job over (w1's lease expired): w1's commit, claim and all, writes nothing.
        const takeOver = await store.commit([commitOf('A', 2, { lease: { runner: 'w2', fence: null, now: T0 + 2000, until: T0 + 3000 } })]);
        expect(takeOver).toEqual([{ ok: true, revision: 3, fence: fence + 1 }]);
        const before = await dumpJob(store, 'A');
        expect(await store.commit([outcome('w1', fence)])).toEqual([{ ok: false, reason: 'outcome-not-current' }]);
        expect(await store.commit([outcome('w1', fence, false)])).toMatchObject([{ ok: false, reason: 'leased', owner: 'w2' }]);
        expect(await dumpJob(store, 'A')).toEqual(before);
        expect(await store.getEffect(next.id)).toBeUndefined();
        // The holder's commit claims it: the effect is written running, its first attempt started.
        const held = outcome('w2', fence + 1, false);
        expect(await store.commit([held])).toEqual([{ ok: true, revision: 4, fence: fence + 1 }]);
        expect(await store.getEffect(next.id)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w2', claimExpiresAt: T0 + 5000, active: true });
        expect((await store.listAttempts('A')).filter((a) => a.effectId === next.id)).toEqual([
          { effectId: next.id, attempt: 1, runner: 'w2', startedAt: held.job.at, endedAt: null, outcome: 'running', error: null }, // at the commit's time
        ]);
        expect((await store.getJob('A'))?.lease).toEqual({ owner: 'w2', fence: fence + 1, until: T0 + 5000 });
        // Its outcome is the current attempt's, under that fence.
        expect(await store.finishAttempt(next.id, 1, succeeded((await store.getEffect(next.id))!, 1), T0 + 200, { runner: 'w2', fence: fence + 1 })).toBe('current');
        // A claim of an effect the commit did not create, or a claim without a kept lease, refuses the commit.
        const orphan = commitOf('A', 4, { claims: [{ effectId: 'nope', claimUntil: T0 + 5000 }], lease: { runner: 'w2', fence: fence + 1, now: T0 + 300, until: T0 + 5000 } });
        expect(await store.commit([orphan])).toMatchObject([{ ok: false, reason: 'error' }]);
        const unleased = commitOf('A', 4, { effects: { create: [effectOf('A', 'x', 5)], deactivate: [] }, claims: [{ effectId: 'A~x~r5', claimUntil: T0 + 5000 }], lease: { runner: 'w2', fence: fence + 1, now: T0 + 300, until: null } });
        expect(await store.commit([unleased])).toMatchObject([{ ok: false, reason: 'error' }]);
        expect((await store.getJob('A'))?.revision).toBe(4);
      });

      it('a new job claims the first attempts of its initial effects (claims): running for its runner, the job leased to it at fence 1', async () => {
        const boot = effectOf('C', 'boot', 1, { at: T0 });
        const other = effectOf('C', 'other', 1, { at: T0 });
        const r = await store.createJob({ ...newJob('C', { effects: [boot, other] }), runner: 'w1', claims: [{ effectId: boot.id, claimUntil: T0 + 900 }] });
        expect(r).toMatchObject({ created: true, job: { revision: 1, lease: { owner: 'w1', fence: 1, until: T0 + 900 } } });
        expect(await store.getEffect(boot.id)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w1', claimExpiresAt: T0 + 900 });
        expect(await store.getEffect(other.id)).toMatchObject({ status: 'pending', attempt: 0, claimedBy: null });
        expect((await store.listAttempts('C')).map((a) => [a.effectId, a.attempt, a.runner, a.outcome])).toEqual([[boot.id, 1, 'w1', 'running']]);
        // Another runner cannot claim the job's other effect while w1 holds it; w1's next claim keeps fence 1.
        expect(await store.claimEffect(other.id, 'w2', T0 + 10, T0 + 2000)).toBeUndefined();
        expect(await store.claimEffect(other.id, 'w1', T0 + 10, T0 + 2000, undefined, 1)).toMatchObject({ attempt: 1, leaseFence: 1 });
        // A repeated create finds the job and claims nothing.
        const again = await store.createJob({ ...newJob('D', { effects: [effectOf('D', 'boot', 1)] }), runner: 'w1', claims: [{ effectId: 'D~boot~r1', claimUntil: T0 + 900 }] });
        expect(again.created).toBe(true);
        const repeat = await store.createJob({ ...newJob('D', { effects: [effectOf('D', 'boot', 1)] }), runner: 'w2', claims: [{ effectId: 'D~boot~r1', claimUntil: T0 + 900 }] });
        expect(repeat).toMatchObject({ created: false, job: { lease: { owner: 'w1', fence: 1 } } });
        expect((await store.listAttempts('D')).map((a) => [a.attempt, a.runner])).toEqual([[1, 'w1']]);
      });

      it('writeBatch: attempt outcomes and claims in one call, each on its own: a refused one leaves the others written', async () => {
        const [a, b, c, d] = await createEffects('a', 'b', 'c', 'd');
        for (const e of [a, b, c]) await claimed(e!);
        await store.finishAttempt(b!.id, 1, { kind: 'waiting', token: 'same' }, T0 + 120);
        const x = effectOf('B', 'x', 2);
        expect(await store.commit([commitOf('B', 1, { effects: { create: [x], deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const result = await store.writeBatch({
          finishes: [
            { id: a!.id, attempt: 1, result: succeeded(a!, 1, { url: 'u' }), at: T0 + 150 },
            { id: c!.id, attempt: 1, result: { kind: 'waiting', token: 'same' }, at: T0 + 150 }, // b holds the token: refused
            { id: a!.id, attempt: 1, result: succeeded(a!, 1, { url: 'again' }), at: T0 + 151 }, // settled just before: stale
          ],
          claims: [
            { id: d!.id, runner: 'w2', now: T0 + 200, claimUntil: T0 + 2000 }, // w1 holds job A: nothing claimed
            { id: x.id, runner: 'w2', now: T0 + 200, claimUntil: T0 + 2000 },
            { id: 'nope', runner: 'w2', now: T0 + 200, claimUntil: T0 + 2000 },
          ],
        });
        expect(result.creates).toEqual([]);
        expect(result.commits).toEqual([]);
        expect(result.finishes.map((f) => (f.ok ? f.result : 'refused'))).toEqual(['current', 'refused', 'stale']);
        expect(result.claims.map((f) => (f.ok ? (f.result ? [f.result.id, f.result.attempt, f.result.leaseFence] : 'nothing') : 'refused'))).toEqual([
          'nothing',
          [x.id, 1, 1],
          'nothing',
        ]);
        expect(await store.getEffect(a!.id)).toMatchObject({ status: 'succeeded', output: { url: 'u' } });
        expect(await store.getEffect(c!.id)).toMatchObject({ status: 'running', token: null, attempt: 1 });
        expect(await store.getEffect(d!.id)).toMatchObject({ status: 'pending', attempt: 0, claimedBy: null });
        expect(await store.getEffect(x.id)).toMatchObject({ status: 'running', attempt: 1, claimedBy: 'w2' });
        expect((await store.getJob('A'))?.lease?.owner).toBe('w1');
        expect((await store.getJob('B'))?.lease).toEqual({ owner: 'w2', fence: 1, until: T0 + 2000 });
        expect((await store.listAttempts('A')).map((t) => [t.effectId, t.outcome])).toEqual([
          [a!.id, 'succeeded'],
          [b!.id, 'waiting'],
          [c!.id, 'running'],
        ]);
        expect((await store.listEvents('A')).map((e) => [e.eventId, e.status])).toEqual([[`${a!.id}#1`, 'pending']]);
      });

      it('writeBatch: releases free the runner\'s own leases after the finishes, and a claim of the same batch takes the job again', async () => {
        const [a, b] = await createEffects('a', 'b');
        await claimed(a!);
        expect((await store.getJob('A'))?.lease).toMatchObject({ owner: 'w1', fence: 1 });
        // a retried (backoff): nothing runs on A; w1 lets A go in the batch that records it.
        const retry = { kind: 'failed' as const, error: BOOM, retryAt: T0 + 5000, event: null };
        const first = await store.writeBatch({
          finishes: [{ id: a!.id, attempt: 1, result: retry, at: T0 + 150, lease: { runner: 'w1', fence: 1 } }],
          releases: [{ runner: 'w1', jobIds: ['A'] }, { runner: 'w2', jobIds: ['A'] }], // w2 holds nothing: frees nothing
        });
        expect(first.finishes).toEqual([{ ok: true, result: 'current' }]);
        expect(first.releases).toEqual([{ ok: true, result: 1 }, { ok: true, result: 0 }]);
        expect((await store.getJob('A'))?.lease).toBeNull();
        expect(await store.getEffect(a!.id)).toMatchObject({ status: 'backoff', nextRunAt: T0 + 5000 });
        // Released, then claimed in one transaction: the claim holds the job when it commits (a new
        // fence each time the job is taken free: 2 for a's retry, 3 for b).
        await claimed(a!, 'w1', T0 + 5000, T0 + 9000);
        const second = await store.writeBatch({
          releases: [{ runner: 'w1', jobIds: ['A'] }],
          claims: [{ id: b!.id, runner: 'w1', now: T0 + 5100, claimUntil: T0 + 9000 }],
        });
        expect(second.releases).toEqual([{ ok: true, result: 1 }]);
        expect(second.claims.map((c) => (c.ok && c.result ? [c.result.id, c.result.leaseFence] : 'nothing'))).toEqual([[b!.id, 3]]);
        expect((await store.getJob('A'))?.lease).toEqual({ owner: 'w1', fence: 3, until: T0 + 9000 });
      });

      it('failEffect settles an unfinished effect once, interrupts its running attempt and accepts the error event', async () => {
        const [running, pending, done] = await createEffects('running', 'pending', 'done');
        await claimed(running!);
        expect(await store.failEffect(running!.id, 1, BOOM, outcomeEvent(running!, 1, 'error'), T0 + 200)).toBe(true);
        expect(await store.getEffect(running!.id)).toMatchObject({ status: 'failed', error: BOOM, claimedBy: null, claimExpiresAt: null, updatedAt: T0 + 200, active: true });
        expect((await store.listAttempts('A')).map((a) => [a.effectId, a.outcome, a.endedAt])).toEqual([[running!.id, 'interrupted', T0 + 200]]);
        expect((await store.listEvents('A')).map((x) => [x.type, x.status, x.sourceId])).toEqual([['xstate.error.actor.running', 'pending', running!.id]]);

        // Once only: no second event.
        expect(await store.failEffect(running!.id, 1, { name: 'E', message: 'again' }, outcomeEvent(running!, 1, 'error', '-again'), T0 + 300)).toBe(false);
        expect(await store.getEffect(running!.id)).toMatchObject({ error: BOOM, updatedAt: T0 + 200 });
        expect(await store.listEvents('A')).toHaveLength(1);

        // A pending effect fails without any attempt.
        expect(await store.failEffect(pending!.id, 0, BOOM, outcomeEvent(pending!, 0, 'error'), T0 + 200)).toBe(true);
        expect(await store.getEffect(pending!.id)).toMatchObject({ status: 'failed', attempt: 0 });
        expect(await store.listAttempts('A')).toHaveLength(1);

        // Not a succeeded one, not an inactive one, not an unknown one.
        await claimed(done!);
        await store.finishAttempt(done!.id, 1, succeeded(done!, 1), T0 + 150);
        const eventsBefore = await store.listEvents('A');
        expect(await store.failEffect(done!.id, 1, BOOM, outcomeEvent(done!, 1, 'error', '-x'), T0 + 200)).toBe(false);
        expect(await store.getEffect(done!.id)).toMatchObject({ status: 'succeeded', error: null });
        const [gone] = await (async () => {
          expect(await store.commit([commitOf('A', 2, { effects: { create: [effectOf('A', 'gone', 3)], deactivate: [] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
          expect(await store.commit([commitOf('A', 3, { effects: { create: [], deactivate: ['gone'] } })])).toEqual([{ ok: true, revision: 4, fence: null }]);
          return [(await store.getEffect('A~gone~r3'))!];
        })();
        expect(await store.failEffect(gone!.id, 0, BOOM, outcomeEvent(gone!, 0, 'error'), T0 + 200)).toBe(false);
        expect(await store.getEffect(gone!.id)).toMatchObject({ status: 'cancelled', error: null });
        expect(await store.failEffect('nope', 0, BOOM, eventOf('A', 'nope-event'), T0 + 200)).toBe(false);
        expect(await store.listEvents('A')).toEqual(eventsBefore);
      });

      it('failEffect refuses an attempt that is no longer current: ended in backoff, or superseded by a newer one', async () => {
        const [e] = await createEffects('flaky');
        await claimed(e!, 'w1', T0 + 10, T0 + 500);
        // Attempt 1 ends failed with a retry due: a failEffect from a read that saw it running is stale.
        expect(await store.finishAttempt(e!.id, 1, { kind: 'failed', error: BOOM, retryAt: T0 + 50, event: null }, T0 + 20)).toBe('current');
        expect(await store.failEffect(e!.id, 1, BOOM, outcomeEvent(e!, 1, 'error'), T0 + 30)).toBe(false);
        // Attempt 2 runs: still stale for attempt 1, current for attempt 2.
        await claimed(e!, 'w1', T0 + 60, T0 + 600);
        expect(await store.failEffect(e!.id, 1, BOOM, outcomeEvent(e!, 1, 'error'), T0 + 70)).toBe(false);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'running', attempt: 2, claimedBy: 'w1' });
        expect(await store.listEvents('A')).toEqual([]);
        expect(await store.failEffect(e!.id, 2, BOOM, outcomeEvent(e!, 2, 'error'), T0 + 80)).toBe(true);
        expect(await store.getEffect(e!.id)).toMatchObject({ status: 'failed', attempt: 2, error: BOOM });
        expect((await store.listAttempts('A')).map((a) => [a.attempt, a.outcome])).toEqual([
          [1, 'failed'],
          [2, 'interrupted'],
        ]);
      });

      it('dueEffects: active pending, due backoff and expired running effects, by retry time or creation time', async () => {
        const at = (actorId: string, t: number) => effectOf('A', actorId, 2, { at: T0 + t });
        const create = [at('e1', 10), at('e2', 20), at('e3', 30), at('e4', 40), at('e5', 5), at('e6', 6), at('e7', 7)];
        expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const id = (a: string) => `A~${a}~r2`;
        // e2 running until T0+500; e3 in backoff until T0+200; e5 deactivated; e6 waiting; e7 succeeded.
        expect(await store.claimEffect(id('e2'), 'w1', T0 + 50, T0 + 500)).toBeDefined();
        expect(await store.claimEffect(id('e3'), 'w1', T0 + 50, T0 + 500)).toBeDefined();
        expect(await store.finishAttempt(id('e3'), 1, { kind: 'failed', error: BOOM, retryAt: T0 + 200, event: null }, T0 + 60)).toBe('current');
        expect(await store.claimEffect(id('e6'), 'w1', T0 + 50, T0 + 500)).toBeDefined();
        expect(await store.finishAttempt(id('e6'), 1, { kind: 'waiting', token: 't6' }, T0 + 60)).toBe('current');
        expect(await store.claimEffect(id('e7'), 'w1', T0 + 50, T0 + 500)).toBeDefined();
        expect(await store.finishAttempt(id('e7'), 1, { kind: 'succeeded', output: 7, event: eventOf('A', 'e7-done') }, T0 + 60)).toBe('current');
        expect(await store.commit([commitOf('A', 2, { effects: { create: [], deactivate: ['e5'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);

        const due = async (now: number, limit = 10) => (await store.dueEffects(now, limit)).map((e) => e.actorId);
        expect(await due(T0 + 199)).toEqual(['e1', 'e4']);
        expect(await due(T0 + 200)).toEqual(['e1', 'e4', 'e3']);
        expect(await due(T0 + 499)).toEqual(['e1', 'e4', 'e3']);
        expect(await due(T0 + 500)).toEqual(['e1', 'e2', 'e4', 'e3']);
        expect(await due(T0 + 500, 2)).toEqual(['e1', 'e2']);
        expect(await due(T0 + 500, 0)).toEqual([]);

        expect((await store.runningEffects(10)).map((e) => e.actorId)).toEqual(['e2']);
        expect(await store.runningEffects(0)).toEqual([]);
      });

      it('dueEffects unclaimableBy: only the due rows a batch claim with those machine versions would never take', async () => {
        const create = [effectOf('A', 'p', 2, { at: T0 + 1 }), effectOf('A', 'u', 2, { at: T0 + 2, unsafe: true }), effectOf('A', 'x', 2, { at: T0 + 3, maxAttempts: 1 })];
        expect(await store.commit([commitOf('A', 1, { effects: { create, deactivate: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        // u (unsafe to repeat) and x (its one attempt used) are running, their claims expiring at T0+500.
        expect(await store.claimEffect('A~u~r2', 'w1', T0 + 50, T0 + 500)).toBeDefined();
        expect(await store.claimEffect('A~x~r2', 'w1', T0 + 50, T0 + 500)).toBeDefined();
        // C is of machine version 2.
        expect((await store.createJob({ ...newJob('C', { effects: [effectOf('C', 'q', 1, { at: T0 + 4 })] }), machineVersion: '2' })).created).toBe(true);
        const due = async (machines?: string[]) => (await store.dueEffects(T0 + 600, 10, 'w2', machines)).map((e) => e.id).sort();
        expect(await due()).toEqual(['A~p~r2', 'A~u~r2', 'A~x~r2', 'C~q~r1']);
        expect(await due(['m@1'])).toEqual(['A~u~r2', 'A~x~r2', 'C~q~r1']);
        expect(await due(['m@1', 'm@2'])).toEqual(['A~u~r2', 'A~x~r2']);
        expect(await due([])).toEqual(['A~p~r2', 'A~u~r2', 'A~x~r2', 'C~q~r1']);
      });

      it('dueEffects unclaimableBy reads the oldest `limit` due rows of each kind, not the backlog behind them', async () => {
        // D's row (machine version 1: a batch claim with m@1 takes it) is older than E's (version 2: it never does).
        expect((await store.createJob(newJob('D', { effects: [effectOf('D', 'p', 1, { at: T0 + 1 })] }))).created).toBe(true);
        expect((await store.createJob({ ...newJob('E', { effects: [effectOf('E', 'q', 1, { at: T0 + 2 })] }), machineVersion: '2' })).created).toBe(true);
        const due = async (limit: number) => (await store.dueEffects(T0 + 100, limit, 'w2', ['m@1'])).map((e) => e.id);
        expect(await due(1)).toEqual([]);
        expect(await due(2)).toEqual(['E~q~r1']);
        // Once the claimable row before it is taken, E's row is at the head.
        expect(await store.claimEffect('D~p~r1', 'w1', T0 + 50, T0 + 10_000)).toBeDefined();
        expect(await due(1)).toEqual(['E~q~r1']);
      });
    });

    describe('timers', () => {
      it('commit schedules timers; listTimers orders by due time, then id', async () => {
        const t1 = timerOf('A', 'late', T0 + 900, 2);
        const t2 = timerOf('A', 'b-soon', T0 + 100, 2, 'raise');
        const t3 = timerOf('A', 'a-soon', T0 + 100, 2, 'sendTo');
        expect(await store.commit([commitOf('A', 1, { timers: { schedule: [t1, t2, t3], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.listTimers('A')).toEqual([
          { ...t3, status: 'scheduled' },
          { ...t2, status: 'scheduled' },
          { ...t1, status: 'scheduled' },
        ]);
        expect(await store.listTimers('B')).toEqual([]);
      });

      it('cancel by key cancels that job’s scheduled and fired timers of the key; a key cancelled and re-scheduled in one commit stays scheduled', async () => {
        const a1 = timerOf('A', 'k', T0 + 100, 2);
        const a2 = timerOf('A', 'other', T0 + 100, 2);
        const b1 = timerOf('B', 'k', T0 + 100, 2);
        expect(
          await store.commit([
            commitOf('A', 1, { timers: { schedule: [a1, a2], cancel: [] } }),
            commitOf('B', 1, { timers: { schedule: [b1], cancel: [] } }),
          ]),
        ).toEqual([
          { ok: true, revision: 2, fence: null },
          { ok: true, revision: 2, fence: null },
        ]);
        expect(await store.fireTimer(a2.id, eventOf('A', 'fire-other', 'T.other', { source: 'timer', sourceId: a2.id }))).toBe(true);

        const again = timerOf('A', 'k', T0 + 700, 3);
        expect(await store.commit([commitOf('A', 2, { timers: { schedule: [again], cancel: ['k', 'other'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect((await store.listTimers('A')).map((t) => [t.id, t.status])).toEqual([
          [a1.id, 'cancelled'],
          [a2.id, 'cancelled'],
          [again.id, 'scheduled'],
        ]);
        expect((await store.listTimers('B')).map((t) => [t.id, t.status])).toEqual([[b1.id, 'scheduled']]);
      });

      it('dueTimers lists scheduled timers due by now, by due time then id, up to the limit', async () => {
        const t = (key: string, due: number) => timerOf('A', key, T0 + due, 2);
        const timers = [t('c', 300), t('b', 100), t('a', 100), t('d', 400)];
        expect(await store.commit([commitOf('A', 1, { timers: { schedule: timers, cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.commit([commitOf('B', 1, { timers: { schedule: [timerOf('B', 'x', T0 + 200, 2)], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        const due = async (now: number, limit = 10) => (await store.dueTimers(T0 + now, limit)).map((x) => x.id);
        expect(await due(99)).toEqual([]);
        expect(await due(100)).toEqual(['A~a~r2', 'A~b~r2']);
        expect(await due(300)).toEqual(['A~a~r2', 'A~b~r2', 'B~x~r2', 'A~c~r2']);
        expect(await due(300, 3)).toEqual(['A~a~r2', 'A~b~r2', 'B~x~r2']);
        expect(await store.fireTimer('A~a~r2', eventOf('A', 'fa', 'T.a', { source: 'timer', sourceId: 'A~a~r2' }))).toBe(true);
        expect(await store.commit([commitOf('A', 2, { timers: { schedule: [], cancel: ['b'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(await due(1000)).toEqual(['B~x~r2', 'A~c~r2', 'A~d~r2']);
      });

      it('fireTimer moves a timer into its job’s inbox once', async () => {
        const t = timerOf('A', 'k', T0 + 100, 2);
        expect(await store.commit([commitOf('A', 1, { timers: { schedule: [t], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.fireTimer(t.id, eventOf('A', `timer:${t.id}`, 'T.k', { source: 'timer', sourceId: t.id, at: T0 + 100 }))).toBe(true);
        expect(await store.listTimers('A')).toMatchObject([{ id: t.id, status: 'fired' }]);
        expect(await store.listEvents('A')).toMatchObject([
          { eventId: `timer:${t.id}`, type: 'T.k', status: 'pending', source: 'timer', sourceId: t.id, attempt: null, acceptedAt: T0 + 100 },
        ]);
        expect(await store.fireTimer(t.id, eventOf('A', `timer:${t.id}:again`, 'T.k', { source: 'timer', sourceId: t.id }))).toBe(false);
        expect(await store.listEvents('A')).toHaveLength(1);
        expect(await store.fireTimer('nope', eventOf('A', 'timer:nope'))).toBe(false);

        // A cancelled timer never fires.
        const c = timerOf('A', 'c', T0 + 100, 3);
        expect(await store.commit([commitOf('A', 2, { timers: { schedule: [c], cancel: [] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(await store.commit([commitOf('A', 3, { timers: { schedule: [], cancel: ['c'] } })])).toEqual([{ ok: true, revision: 4, fence: null }]);
        expect(await store.fireTimer(c.id, eventOf('A', `timer:${c.id}`))).toBe(false);
        expect(await store.listEvents('A')).toHaveLength(1);
      });

      it('consumedTimer marks a fired timer delivered, also when the same transition cancels its key', async () => {
        const t1 = timerOf('A', 'xstate.after.1000.m.a', T0 + 100, 2);
        const t2 = timerOf('A', 'plain', T0 + 100, 2);
        const t3 = timerOf('A', 'unfired', T0 + 100, 2);
        expect(await store.commit([commitOf('A', 1, { timers: { schedule: [t1, t2, t3], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.fireTimer(t1.id, eventOf('A', 'fire-1', 'T.1', { source: 'timer', sourceId: t1.id }))).toBe(true);
        expect(await store.fireTimer(t2.id, eventOf('A', 'fire-2', 'T.2', { source: 'timer', sourceId: t2.id }))).toBe(true);
        const fired1 = (await store.getEvent('A', 'fire-1'))!;
        const fired2 = (await store.getEvent('A', 'fire-2'))!;

        // The `after` transition leaving its state cancels its own key in the same commit.
        expect(
          await store.commit([
            commitOf('A', 2, {
              event: { seq: fired1.seq!, status: 'applied', error: null, payload: fired1.payload },
              timers: { schedule: [], cancel: [t1.key] },
              consumedTimer: t1.id,
            }),
          ]),
        ).toEqual([{ ok: true, revision: 3, fence: null }]);
        expect(
          await store.commit([commitOf('A', 3, { event: { seq: fired2.seq!, status: 'applied', error: null, payload: fired2.payload }, consumedTimer: t2.id })]),
        ).toEqual([{ ok: true, revision: 4, fence: null }]);
        // A timer that has not fired is not delivered.
        expect(await store.commit([commitOf('A', 4, { consumedTimer: t3.id })])).toEqual([{ ok: true, revision: 5, fence: null }]);
        expect((await store.listTimers('A')).map((t) => [t.key, t.status])).toEqual([
          ['plain', 'delivered'],
          ['unfired', 'scheduled'],
          ['xstate.after.1000.m.a', 'delivered'],
        ]);
        // A delivered timer is not cancelled afterwards.
        expect(await store.commit([commitOf('A', 5, { timers: { schedule: [], cancel: ['plain'] } })])).toEqual([{ ok: true, revision: 6, fence: null }]);
        expect((await store.listTimers('A')).find((t) => t.key === 'plain')?.status).toBe('delivered');
      });
    });

    it('nextWakeAt: the earliest scheduled timer, backoff retry or running claim expiry of an active effect', async () => {
      expect(await store.nextWakeAt()).toBeNull();
      // A pending effect is due now and does not count as a wake-up time.
      const [e1, e2] = await createEffects('e1', 'e2');
      expect(await store.nextWakeAt()).toBeNull();
      expect(await store.commit([commitOf('B', 1, { timers: { schedule: [timerOf('B', 'k', T0 + 900, 2)], cancel: [] } })])).toEqual([{ ok: true, revision: 2, fence: null }]);
      expect(await store.nextWakeAt()).toBe(T0 + 900);
      await claimed(e1!, 'w1', T0 + 100, T0 + 700);
      expect(await store.nextWakeAt()).toBe(T0 + 700);
      await claimed(e2!, 'w1', T0 + 100, T0 + 800);
      expect(await store.finishAttempt(e2!.id, 1, failed(e2!, 1, T0 + 600, false), T0 + 110)).toBe('current');
      expect(await store.nextWakeAt()).toBe(T0 + 600);
      // Leaving the state drops both effects from the wake-up times.
      expect(await store.commit([commitOf('A', 2, { effects: { create: [], deactivate: ['e1', 'e2'] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
      // The job's lease (renewed to T0 + 800 by the second claim) still wakes a host-driven runtime; released, it does not.
      expect(await store.nextWakeAt()).toBe(T0 + 800);
      expect(await store.releaseLeases('w1', ['A'])).toBe(1);
      expect(await store.nextWakeAt()).toBe(T0 + 900);
      // A fired timer does not count.
      expect(await store.fireTimer('B~k~r2', eventOf('B', 'fire-k', 'T.k', { source: 'timer', sourceId: 'B~k~r2' }))).toBe(true);
      expect(await store.nextWakeAt()).toBeNull();
    });

    describe('cancel requests, progress, notes, assets', () => {
      it('requestCancel records the request once, with its cancel event', async () => {
        const cancel = eventOf('A', 'cancel-1', 'CANCEL', { source: 'cancel', at: T0 + 50 });
        expect(await store.requestCancel('A', 'user asked', cancel, T0 + 50)).toEqual({ first: true });
        expect(await store.getJob('A')).toMatchObject({ cancelRequestedAt: T0 + 50, cancelReason: 'user asked', revision: 1 });
        expect(await store.listEvents('A')).toMatchObject([{ eventId: 'cancel-1', type: 'CANCEL', source: 'cancel', status: 'pending' }]);

        const again = eventOf('A', 'cancel-2', 'CANCEL', { source: 'cancel', at: T0 + 60 });
        expect(await store.requestCancel('A', 'asked again', again, T0 + 60)).toEqual({ first: false });
        expect(await store.getJob('A')).toMatchObject({ cancelRequestedAt: T0 + 50, cancelReason: 'user asked' });
        expect(await store.listEvents('A')).toHaveLength(1);
        expect(await store.getJob('B')).toMatchObject({ cancelRequestedAt: null, cancelReason: null });
        expect(await store.requestCancel('nope', 'x', eventOf('A', 'cancel-nope', 'CANCEL', { source: 'cancel' }), T0 + 70)).toEqual({ first: false });
        expect(await store.listEvents('A')).toHaveLength(1);
      });

      it('setProgress changes an active job only, without a revision change', async () => {
        expect(await store.setProgress('A', 42.5, T0 + 5)).toBe(true);
        expect(await store.getJob('A')).toMatchObject({ progress: 42.5, revision: 1 });
        expect(await store.history('A')).toHaveLength(1);
        expect(await store.commit([commitOf('A', 1, { status: 'done' })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect(await store.setProgress('A', 99, T0 + 30)).toBe(false);
        expect(await store.getJob('A')).toMatchObject({ progress: 42.5, status: 'done' });
        expect(await store.setProgress('nope', 1, T0 + 30)).toBe(false);
      });

      it('setProgress under a lease (an activity reporting) never lowers the progress; without one it may', async () => {
        const [r] = await store.commit([{ ...commitOf('A', 1), lease: { runner: 'w1', fence: null, now: T0 + 1, until: T0 + 10_000 } }]);
        const fence = r?.ok ? r.fence! : -1;
        const lease = { runner: 'w1', fence };
        expect(await store.setProgress('A', 60, T0 + 2, lease)).toBe(true);
        expect(await store.setProgress('A', 20, T0 + 3, lease)).toBe(true); // an attempt run again, from its start
        expect(await store.getJob('A')).toMatchObject({ progress: 60 });
        expect(await store.setProgress('A', 80, T0 + 4, lease)).toBe(true);
        expect(await store.getJob('A')).toMatchObject({ progress: 80 });
        expect(await store.setProgress('A', 10, T0 + 5)).toBe(true);
        expect(await store.getJob('A')).toMatchObject({ progress: 10 });
        expect(await store.setProgress('A', 5, T0 + 6, { runner: 'w2', fence })).toBe(false); // not the holder
      });

      it("settleParent succeeds or (with error) fails the parent's waiting child invocation, and accepts its event there, once", async () => {
        const child = (id: string): NewJob => ({ ...newJob(id), parent: { jobId: 'A', effectId: id } });
        const ok = { ...effectOf('A', 'ok', 2), kind: 'child' as const, maxAttempts: 1 };
        const bad = { ...effectOf('A', 'bad', 2), kind: 'child' as const, maxAttempts: 1 };
        expect(await store.commit([commitOf('A', 1, { effects: { create: [ok, bad], deactivate: [] }, children: [child(ok.id), child(bad.id)] })])).toEqual([{ ok: true, revision: 2, fence: null }]);
        expect((await store.getEffect(bad.id))?.status).toBe('waiting');
        const doneEvent = { ...eventOf('A', `effect~${ok.id}~a1`, 'xstate.done.actor.ok', { source: 'effect', sourceId: ok.id, attempt: 1 }), payload: { type: 'xstate.done.actor.ok', output: 7 } };
        const errorEvent = { ...eventOf('A', `effect~${bad.id}~a1`, 'xstate.error.actor.bad', { source: 'effect', sourceId: bad.id, attempt: 1 }), payload: { type: 'xstate.error.actor.bad', error: { ...BOOM } } };
        const results = await store.commit([
          commitOf(ok.id, 1, { status: 'done', settleParent: { effectId: ok.id, output: 7, event: doneEvent } }),
          commitOf(bad.id, 1, { status: 'error', stopAll: true, settleParent: { effectId: bad.id, output: null, error: BOOM, event: errorEvent } }),
        ]);
        expect(results.every((r) => r.ok)).toBe(true);
        expect(await store.getEffect(ok.id)).toMatchObject({ status: 'succeeded', output: 7, error: null });
        expect(await store.getEffect(bad.id)).toMatchObject({ status: 'failed', error: BOOM, output: null });
        expect((await store.listEvents('A')).map((e) => [e.type, e.status, e.payload])).toEqual([
          ['xstate.done.actor.ok', 'pending', { type: 'xstate.done.actor.ok', output: 7 }],
          ['xstate.error.actor.bad', 'pending', { type: 'xstate.error.actor.bad', error: BOOM }],
        ]);
        expect(await store.getJob(bad.id)).toMatchObject({ status: 'error', revision: 2 });
        // No longer waiting: a second settle changes nothing there and accepts no event.
        await store.commit([commitOf(bad.id, 2, { status: 'error', settleParent: { effectId: bad.id, output: null, error: BOOM, event: { ...errorEvent, eventId: 'again' } } })]);
        expect(await store.listEvents('A')).toHaveLength(2);
      });

      it('notes are listed per job in the order they were added', async () => {
        await store.addNote({ jobId: 'A', kind: 'info', message: 'second by time', at: T0 + 20 });
        await store.addNote({ jobId: 'B', kind: 'info', message: 'other job', at: T0 + 5 });
        await store.addNote({ jobId: 'A', kind: 'warn', message: 'first by time', at: T0 + 10 });
        expect(await store.listNotes('A')).toEqual([
          { jobId: 'A', kind: 'info', message: 'second by time', at: T0 + 20 },
          { jobId: 'A', kind: 'warn', message: 'first by time', at: T0 + 10 },
        ]);
        expect(await store.listNotes('B')).toHaveLength(1);
        expect(await store.listNotes('nope')).toEqual([]);
      });

      it('attachAsset attaches once per (job, key); assets are listed by creation time, then key', async () => {
        const asset = { jobId: 'A', key: 'report', type: 'pdf', uri: 'file:///r1.pdf', size: 10, meta: { pages: 2 }, effectId: 'A~upload~r2', attempt: 1, createdAt: T0 + 30 };
        expect(await store.attachAsset(asset)).toBe(true);
        expect(await store.attachAsset({ ...asset, uri: 'file:///r2.pdf', attempt: 2 })).toBe(false);
        expect(await store.attachAsset({ ...asset, key: 'b-log', type: 'text', size: null, meta: null, effectId: null, attempt: null, createdAt: T0 + 10 })).toBe(true);
        expect(await store.attachAsset({ ...asset, key: 'a-log', createdAt: T0 + 30 })).toBe(true);
        expect(await store.attachAsset({ ...asset, jobId: 'B' })).toBe(true);
        const listed = await store.listAssets('A');
        expect(listed.map((a) => a.key)).toEqual(['b-log', 'a-log', 'report']);
        expect(listed[2]).toEqual(asset);
        expect(listed[0]).toMatchObject({ size: null, meta: null, effectId: null, attempt: null });
        expect(await store.listAssets('B')).toHaveLength(1);

        (listed[2]!.meta as { pages: number }).pages = 99;
        expect((await store.listAssets('A'))[2]!.meta).toEqual({ pages: 2 });
      });
    });

    it('listJobs filters by exhausted effects and by cancel request', async () => {
      await store.createJob(newJob('C'));
      await store.createJob(newJob('D'));
      const create = (jobId: string, maxAttempts: number) => commitOf(jobId, 1, { effects: { create: [effectOf(jobId, 'work', 2, { maxAttempts })], deactivate: [] } });
      expect(await store.commit([create('A', 1), create('B', 3), create('C', 3), create('D', 3)])).toEqual([
        { ok: true, revision: 2, fence: null },
        { ok: true, revision: 2, fence: null },
        { ok: true, revision: 2, fence: null },
        { ok: true, revision: 2, fence: null },
      ]);
      const id = (jobId: string) => `${jobId}~work~r2`;
      // A: failed on its last attempt.
      expect(await store.claimEffect(id('A'), 'w1', T0 + 100, T0 + 1000)).toBeDefined();
      expect(await store.finishAttempt(id('A'), 1, { kind: 'failed', error: BOOM, retryAt: null, event: null }, T0 + 110)).toBe('current');
      // B: failed before any attempt, as indeterminate.
      expect(await store.failEffect(id('B'), 0, { name: 'IndeterminateError', message: '?', code: 'SPOOL_INDETERMINATE' }, eventOf('B', 'b-err'), T0 + 110)).toBe(true);
      // C: failed with attempts left and an ordinary error code; D: waiting for a retry.
      expect(await store.claimEffect(id('C'), 'w1', T0 + 100, T0 + 1000)).toBeDefined();
      expect(await store.finishAttempt(id('C'), 1, { kind: 'failed', error: BOOM, retryAt: null, event: null }, T0 + 110)).toBe('current');
      expect(await store.claimEffect(id('D'), 'w1', T0 + 100, T0 + 1000)).toBeDefined();
      expect(await store.finishAttempt(id('D'), 1, { kind: 'failed', error: BOOM, retryAt: T0 + 500, event: null }, T0 + 110)).toBe('current');

      const ids = async (filter: Parameters<JobStore['listJobs']>[0]) => (await store.listJobs(filter)).map((j) => j.id);
      expect(await ids({ exhausted: true })).toEqual(['A', 'B']);
      expect(await ids({ exhausted: false })).toEqual(['C', 'D']);

      expect(await ids({ cancelRequested: true })).toEqual([]);
      expect(await store.requestCancel('C', 'stop', eventOf('C', 'cancel', 'CANCEL', { source: 'cancel' }), T0 + 120)).toEqual({ first: true });
      expect(await ids({ cancelRequested: true })).toEqual(['C']);
      expect(await ids({ cancelRequested: false })).toEqual(['A', 'B', 'D']);
      expect(await ids({ cancelRequested: false, exhausted: false })).toEqual(['D']);
    });

    describe('purgeJob', () => {
      it('removes the job with its inbox, history, effects, attempts, timers, notes and assets, and nothing of other jobs', async () => {
        const fillJob = async (jobId: string) => {
          await store.acceptEvent(eventOf(jobId, 'e1'));
          const eff = effectOf(jobId, 'work', 2);
          const w = effectOf(jobId, 'wait', 2);
          const t = timerOf(jobId, 'k', T0 + 100, 2);
          const late = timerOf(jobId, 'late', T0 + 5000, 2);
          expect(await store.commit([commitOf(jobId, 1, { effects: { create: [eff, w], deactivate: [] }, timers: { schedule: [t, late], cancel: [] } })])).toEqual([
            { ok: true, revision: 2, fence: null },
          ]);
          expect(await store.claimEffect(eff.id, 'w1', T0 + 100, T0 + 1000)).toBeDefined();
          expect(await store.claimEffect(w.id, 'w1', T0 + 100, T0 + 1000)).toBeDefined();
          expect(await store.finishAttempt(w.id, 1, { kind: 'waiting', token: `tok-${jobId}` }, T0 + 110)).toBe('current');
          expect(await store.fireTimer(t.id, eventOf(jobId, 'fire', 'T.k', { source: 'timer', sourceId: t.id }))).toBe(true);
          await store.addNote({ jobId, kind: 'info', message: 'n', at: T0 });
          expect(await store.attachAsset({ jobId, key: 'a', type: 't', uri: 'u', size: null, meta: null, effectId: null, attempt: null, createdAt: T0 })).toBe(true);
          await store.requestCancel(jobId, 'r', eventOf(jobId, 'cancel', 'CANCEL', { source: 'cancel' }), T0 + 1);
          return { eff, w, t };
        };
        const a = await fillJob('A');
        await fillJob('B');
        const b = await dumpJob(store, 'B');
        expect(await store.jobsWithPendingEvents(10)).toEqual(['A', 'B']);

        expect(await store.purgeJob('A')).toBe(true);
        expect(await dumpJob(store, 'A')).toEqual({ job: undefined, history: [], events: [], effects: [], attempts: [], timers: [], notes: [], assets: [] });
        expect(await store.getEffect(a.eff.id)).toBeUndefined();
        expect(await store.getEvent('A', 'e1')).toBeUndefined();
        expect(await store.effectByToken('tok-A')).toBeUndefined();
        expect(await store.listJobs({})).toMatchObject([{ id: 'B' }]);
        expect(await store.jobsWithPendingEvents(10)).toEqual(['B']);
        expect((await store.dueTimers(T0 + 10_000, 10)).map((t) => t.jobId)).toEqual(['B']);
        expect((await store.dueEffects(T0 + 10_000, 10)).map((e) => e.jobId)).toEqual(['B']);
        expect((await store.runningEffects(10)).map((e) => e.jobId)).toEqual(['B']);
        expect(await dumpJob(store, 'B')).toEqual(b);

        expect(await store.purgeJob('A')).toBe(false);
        expect(await store.purgeJob('nope')).toBe(false);
        // The id is free again: a new job starts from scratch.
        expect(await store.createJob(newJob('A'))).toMatchObject({ created: true, job: { revision: 1 } });
        expect(await store.history('A')).toHaveLength(1);
        expect(await store.listEffects('A')).toEqual([]);
      });
    });

    describe('all or nothing', () => {
      it('a commit that fails on one of its records writes none of them, and the next commit of the batch still applies', async () => {
        const [running] = await createEffects('running');
        await claimed(running!);
        const existing = timerOf('A', 'k', T0 + 100, 3);
        expect(await store.commit([commitOf('A', 2, { timers: { schedule: [existing], cancel: [] } })])).toEqual([{ ok: true, revision: 3, fence: null }]);
        const pending = await store.acceptEvent(eventOf('A', 'e1'));
        const beforeA = await dumpJob(store, 'A');
        const beforeB = await dumpJob(store, 'B');

        const failing = commitOf('A', 3, {
          progress: 77,
          event: { seq: pending.event.seq!, status: 'applied', error: null, payload: { type: 'GO' } },
          effects: { create: [effectOf('A', 'fresh', 4)], deactivate: ['running'] },
          timers: { schedule: [timerOf('A', 'new', T0 + 100, 4), existing], cancel: ['k'] },
          deliveries: [eventOf('A', 'self-1', 'SELF', { source: 'self' })],
        });
        const results = await store.commit([failing, commitOf('B', 1, { effects: { create: [effectOf('B', 'ok', 2)], deactivate: [] } })]);
        expect(results[0]).toMatchObject({ ok: false, reason: 'error' });
        expect(results[1]).toEqual({ ok: true, revision: 2, fence: null });
        expect(await dumpJob(store, 'A')).toEqual(beforeA);
        expect(await dumpJob(store, 'B')).not.toEqual(beforeB);
        expect(await store.listEffects('B')).toMatchObject([{ id: 'B~ok~r2', status: 'pending' }]);

        // A duplicate effect id and a delivery to an unknown job fail the same way.
        for (const bad of [
          commitOf('A', 3, { effects: { create: [effectOf('A', 'running', 2)], deactivate: [] } }),
          commitOf('A', 3, { deliveries: [eventOf('A', 'self-2', 'SELF', { source: 'self' }), eventOf('nope', 'x', 'SELF', { source: 'self' })] }),
        ]) {
          expect(await store.commit([bad])).toMatchObject([{ ok: false, reason: 'error' }]);
          expect(await dumpJob(store, 'A')).toEqual(beforeA);
        }
        // The inbox seq was not used up by the rolled-back events (SQLite: the table's rowid). A
        // Postgres identity is not rolled back with a transaction: there the seq only keeps growing.
        const next = await store.acceptEvent(eventOf('A', 'e2'));
        if (ON_POSTGRES) expect(next.event.seq!).toBeGreaterThan(pending.event.seq!);
        else expect(next.event.seq!).toBe(pending.event.seq! + 1);
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------

effectsContract(CONTRACT_STORE, async () => {
  if (ON_POSTGRES) return postgresContractStore();
  if (ON_SQLITE_WASM) return sqliteWasmContractStore();
  const dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
  mkdirSync(dir, { recursive: true });
  const store = storeUnderTest(await SqliteStore.open(join(dir, 'effects.db')));
  return {
    store,
    dispose: () => {
      if (store.db.open) throw new Error('the suite left the SQLite store open');
      rmSync(dir, { recursive: true, force: true });
      if (existsSync(dir)) throw new Error(`could not remove ${dir}`);
    },
  };
});
