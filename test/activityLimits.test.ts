/**
 * Per-activity concurrency (`activityConcurrency`): at most N attempts of a named activity run at
 * once in a runtime; the rest stay pending in the store, unclaimed, and start as slots free; other
 * activities are not held behind them; 0 leaves the activity to another process. Activities wait
 * on gates the test opens; a real SQLite file and a VirtualClock, no sleeping.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { ValidationError, type Runtime } from '../src/index.ts';
import { gate, nextEvent, openRuntime, releaseGates } from './helpers/durable.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
afterEach(async () => {
  releaseGates();
  await res.dispose();
});

/** What the activities see: how many run now, the most seen at once, and a gate per job. */
const seen = { running: new Map<string, number>(), most: new Map<string, number>(), gates: new Map<string, ReturnType<typeof gate<void>>>() };

function activity(name: string) {
  return fromPromise(async ({ signal, ...spool }) => {
    const { jobId } = spool as unknown as { jobId: string };
    const now = (seen.running.get(name) ?? 0) + 1;
    seen.running.set(name, now);
    seen.most.set(name, Math.max(seen.most.get(name) ?? 0, now));
    const g = gate();
    seen.gates.set(jobId, g);
    try {
      await Promise.race([g.promise, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      return name;
    } finally {
      seen.running.set(name, (seen.running.get(name) ?? 1) - 1);
    }
  });
}

const uploads = setup({ actors: { upload: activity('upload') } }).createMachine({
  id: 'uploads',
  initial: 'uploading',
  states: { uploading: { invoke: { id: 'upload', src: 'upload', onDone: 'done' } }, done: { type: 'final' } },
});
const thumbs = setup({ actors: { thumb: activity('thumb') } }).createMachine({
  id: 'thumbs',
  initial: 'drawing',
  states: { drawing: { invoke: { id: 'thumb', src: 'thumb', onDone: 'done' } }, done: { type: 'final' } },
});
const MACHINES = [uploads, thumbs];

function resetSeen(): void {
  seen.running.clear();
  seen.most.clear();
  seen.gates.clear();
}

const started = (runtime: Runtime, src: string) => nextEvent(runtime, 'activity.started', (e) => e.src === src);

describe('activityConcurrency', () => {
  it('runs at most N attempts of an activity at once; the rest wait in the store, unclaimed, and all finish', async () => {
    resetSeen();
    // A small maxConcurrentActivities makes the scan read past held rows (they come first in due order).
    const { runtime, store } = await openRuntime(res, MACHINES, { activityConcurrency: { upload: 1 }, maxConcurrentActivities: 2 });
    const firstUpload = started(runtime, 'upload');
    for (const id of ['u1', 'u2', 'u3', 'u4']) await runtime.start('uploads', {}, { jobId: id });
    expect((await firstUpload).jobId).toBe('u1');
    const thumb = started(runtime, 'thumb');
    await runtime.start('thumbs', {}, { jobId: 't1' });
    expect((await thumb).jobId).toBe('t1'); // not held behind the waiting uploads

    // The held uploads were looked at and left alone: pending, never claimed.
    for (const id of ['u2', 'u3', 'u4']) {
      expect(await store.getEffect(`${id}~upload~r1`)).toMatchObject({ status: 'pending', attempt: 0, claimedBy: null });
    }
    expect(seen.running.get('upload')).toBe(1);

    // Each finished upload frees the slot for the next, in order.
    for (const [done, next] of [
      ['u1', 'u2'],
      ['u2', 'u3'],
      ['u3', 'u4'],
    ] as const) {
      const following = started(runtime, 'upload');
      seen.gates.get(done)!.resolve();
      expect((await following).jobId).toBe(next);
      expect(seen.running.get('upload')).toBe(1);
    }
    seen.gates.get('u4')!.resolve();
    seen.gates.get('t1')!.resolve();
    for (const id of ['u1', 'u2', 'u3', 'u4', 't1']) expect((await runtime.waitFor(id, (j) => j.final)).value).toBe('done');
    expect(seen.most.get('upload')).toBe(1);
    for (const id of ['u1', 'u2', 'u3', 'u4']) {
      expect((await runtime.details(id)).attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'succeeded']]);
    }
  });

  it('0 leaves the activity to another runtime, which runs it', async () => {
    resetSeen();
    const first = await openRuntime(res, MACHINES, { activityConcurrency: { upload: 0 } });
    await first.runtime.start('uploads', {}, { jobId: 'u1' });
    const thumb = started(first.runtime, 'thumb');
    await first.runtime.start('thumbs', {}, { jobId: 't1' });
    await thumb;
    await first.runtime.tick();
    expect(await first.store.getEffect('u1~upload~r1')).toMatchObject({ status: 'pending', attempt: 0, claimedBy: null });
    seen.gates.get('t1')!.resolve();
    await first.runtime.waitFor('t1', (j) => j.final);
    await first.runtime.close();

    const second = await openRuntime(res, MACHINES, { path: first.path, clock: first.clock });
    const upload = started(second.runtime, 'upload');
    await second.runtime.tick();
    expect((await upload).jobId).toBe('u1');
    seen.gates.get('u1')!.resolve();
    expect((await second.runtime.waitFor('u1', (j) => j.final)).value).toBe('done');
  });

  it('refuses limits that are not whole numbers or name no activity', async () => {
    for (const activityConcurrency of [{ upload: -1 }, { upload: 1.5 }, { uplaod: 1 }]) {
      await expect(openRuntime(res, MACHINES, { activityConcurrency })).rejects.toBeInstanceOf(ValidationError);
    }
  });
});

/** Two activities one after another; each waits on the gate `<jobId>:<src>`. */
const stepGates = new Map<string, ReturnType<typeof gate<void>>>();
function stepGate(key: string): ReturnType<typeof gate<void>> {
  let g = stepGates.get(key);
  if (!g) stepGates.set(key, (g = gate()));
  return g;
}
const gated = (src: string) =>
  fromPromise(async (args) => {
    const { jobId } = args as unknown as { jobId: string };
    await stepGate(`${jobId}:${src}`).promise;
    return src;
  });
const twoSteps = setup({ actors: { first: gated('first'), second: gated('second') } }).createMachine({
  id: 'two-steps',
  initial: 'one',
  states: {
    one: { invoke: { id: 'first', src: 'first', onDone: 'two' } },
    two: { invoke: { id: 'second', src: 'second', onDone: 'done' } },
    done: { type: 'final' },
  },
});

describe('a slot freed by an ending activity', () => {
  it("goes to its job's next activity in the commit that applies the outcome, ahead of older waiting work, without a batch claim", async () => {
    stepGates.clear();
    const { runtime, store } = await openRuntime(res, [twoSteps], { maxConcurrentActivities: 1 });
    // Batch claims (a pump's, or one a batch of outcomes carries for the slots they free) counted from here on.
    let batchClaims = 0;
    const writeBatch = store.writeBatch.bind(store);
    store.writeBatch = (batch) => {
      batchClaims += batch.dueClaims?.length ?? 0;
      return writeBatch(batch);
    };
    const order: string[] = [];
    runtime.subscribe((e) => {
      if (e.type === 'activity.started') order.push(`${e.jobId}:${e.src}`);
    });
    const aFirst = started(runtime, 'first');
    await runtime.start('two-steps', {}, { jobId: 'a' });
    await aFirst;
    // B's first activity waits in the store: the one slot is A's.
    await runtime.start('two-steps', {}, { jobId: 'b' });
    expect(await store.getEffect('b~first~r1')).toMatchObject({ status: 'pending', claimedBy: null });

    const next = nextEvent(runtime, 'activity.started');
    stepGate('a:first').resolve();
    expect(await next).toMatchObject({ jobId: 'a', src: 'second' });
    expect(batchClaims).toBe(0); // claimed by A's outcome commit, not by a pump round
    expect(await store.getEffect('b~first~r1')).toMatchObject({ status: 'pending', claimedBy: null });

    // A's end frees the slot for the backlog: B runs to its end.
    const bSecond = nextEvent(runtime, 'activity.started', (e) => e.jobId === 'b' && e.src === 'second');
    stepGate('a:second').resolve();
    stepGate('b:first').resolve();
    await bSecond;
    // B's first activity was claimed by a batch claim, in the transaction of A's last outcome or after it.
    expect(batchClaims).toBeGreaterThan(0);
    stepGate('b:second').resolve();
    await runtime.idle();
    expect(order).toEqual(['a:first', 'a:second', 'b:first', 'b:second']);
    expect((await runtime.get('a')).value).toBe('done');
    expect((await runtime.get('b')).value).toBe('done');
  });

  it("goes, when its job takes it not, to the backlog's oldest activity in the same transaction as the outcome that freed it", async () => {
    stepGates.clear();
    const { runtime, store } = await openRuntime(res, [twoSteps], { maxConcurrentActivities: 1 });
    // Each write batch: the jobs whose outcomes it commits, and the effects its batch claims took.
    const batches: { outcomes: string[]; claimed: string[] }[] = [];
    const writeBatch = store.writeBatch.bind(store);
    store.writeBatch = async (batch) => {
      const r = await writeBatch(batch);
      const outcomes = [...(batch.commits ?? []).filter((c) => c.finish).map((c) => c.finish!.id), ...(batch.finishes ?? []).map((f) => f.id)];
      batches.push({ outcomes, claimed: (r.dueClaims ?? []).flatMap((d) => d.claimed.map((e) => e.id)) });
      return r;
    };
    const commit = store.commit.bind(store);
    store.commit = async (commits) => {
      batches.push({ outcomes: commits.filter((c) => c.finish).map((c) => c.finish!.id), claimed: [] });
      return commit(commits);
    };
    const aFirst = started(runtime, 'first');
    await runtime.start('two-steps', {}, { jobId: 'a' });
    await aFirst;
    await runtime.start('two-steps', {}, { jobId: 'b' });
    const aSecond = nextEvent(runtime, 'activity.started', (e) => e.jobId === 'a' && e.src === 'second');
    stepGate('a:first').resolve();
    await aSecond;
    const bFirst = nextEvent(runtime, 'activity.started', (e) => e.jobId === 'b' && e.src === 'first');
    stepGate('a:second').resolve();
    await bFirst;
    // A's last outcome ended A; B's first activity was claimed in that same transaction.
    expect(batches).toContainEqual({ outcomes: ['a~second~r2'], claimed: ['b~first~r1'] });
    expect(await store.getEffect('b~first~r1')).toMatchObject({ status: 'running', attempt: 1 });
    expect((await runtime.get('a')).status).toBe('done');
    stepGate('b:first').resolve();
    stepGate('b:second').resolve();
    await runtime.idle();
    expect((await runtime.get('b')).value).toBe('done');
    expect((await store.listEffects('b')).every((e) => e.attempt === 1)).toBe(true);
  });
});
