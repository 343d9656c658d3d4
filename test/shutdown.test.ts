/**
 * Graceful shutdown: close() claims no new attempts, lets running activities finish within the
 * grace period (their outcomes recorded), aborts the rest and gives their attempts back (not
 * counted against maxAttempts; one unsafe to repeat is left to be taken over), so the next
 * runtime runs them at once. Nothing accepted is lost either way.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { VirtualClock } from '../src/testing/index.ts';
import { Resources } from './helpers/resources.ts';

const gates: { release: () => void; started: Promise<void> }[] = [];
function gate() {
  let release!: () => void;
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  const done = new Promise<void>((r) => (release = r));
  gates.push({ release, started });
  return { started, markStarted, done };
}
let current = gate();

const machine = setup({
  actors: {
    work: fromPromise(async ({ signal }) => {
      const g = current;
      g.markStarted();
      await new Promise<void>((resolve, reject) => {
        void g.done.then(resolve);
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
      return 'done';
    }),
  },
}).createMachine({
  id: 'shut',
  initial: 'working',
  states: { working: { invoke: { id: 'work', src: 'work', onDone: 'finished' } }, finished: { type: 'final' } },
});

/** An activity that ignores its abort signal: it ends only when its gate is released. */
const deaf = setup({
  actors: {
    work: fromPromise(async () => {
      const g = current;
      g.markStarted();
      await g.done;
      return 'done';
    }),
  },
}).createMachine({
  id: 'deaf',
  initial: 'working',
  states: { working: { invoke: { id: 'work', src: 'work', onDone: 'finished' } }, finished: { type: 'final' } },
});

const resources = new Resources();
afterEach(async () => {
  for (const g of gates) g.release();
  await resources.dispose();
});

describe('close({ graceMs })', () => {
  it('refuses a misspelt or wrong-typed option before stopping anything', async () => {
    const clock = new VirtualClock();
    const runtime = await resources.runtime({ store: await resources.sqlite(resources.dbPath(), { clock }), machines: [machine], clock, runEffects: false });
    await expect(runtime.close({ grace: 5000 } as never)).rejects.toThrow('close: unknown option grace (known: graceMs, releaseAttempts).');
    await expect(runtime.close({ graceMs: -1 })).rejects.toThrow('close: graceMs must be a number of ms, 0 or more.');
    await expect(runtime.close({ releaseAttempts: 'no' } as never)).rejects.toThrow('close: releaseAttempts must be a boolean.');
    expect((await runtime.start('shut', {})).value).toBe('working'); // still open
  });

  it('lets a running activity finish within the grace period and records its outcome', async () => {
    current = gate();
    const clock = new VirtualClock();
    const path = resources.dbPath();
    const runtime = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [machine], clock });
    const job = await runtime.start('shut', {});
    await current.started;
    const closing = runtime.close({ graceMs: 60_000 });
    gates.at(-1)!.release();
    await closing;
    const reopened = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [machine], clock, runEffects: false });
    expect((await reopened.get(job.id)).value).toBe('finished');
    expect((await reopened.details(job.id)).attempts.map((a) => a.outcome)).toEqual(['succeeded']);
  });

  it.each([
    ['aborts what is still running, releases its claim, and the next runtime takes it over at once', machine, 0],
    // The gate is never released while closing: that activity would run forever.
    ['does not wait for an activity that ignores its abort signal: close ends at its grace period and releases the claim', deaf, 20],
  ] as const)('%s', async (_name, def, graceMs) => {
    current = gate();
    const clock = new VirtualClock();
    const path = resources.dbPath();
    const first = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [def], clock });
    const job = await first.start(def.id, {});
    await current.started;
    await first.close({ graceMs });
    const after = (await (await resources.sqlite(path, { clock })).getEffect(`${job.id}~work~r1`))!;
    // Given back: pending again, for any process to run now, with the attempt not counted.
    expect(after).toMatchObject({ status: 'pending', attempt: 1, maxAttempts: 4, claimedBy: null, claimExpiresAt: null });

    // A late result of the first attempt changes nothing; the next runtime runs the attempt again.
    gates.at(-1)!.release();
    current = gate();
    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [def], clock });
    await second.tick();
    await current.started;
    gates.at(-1)!.release();
    await second.waitFor(job.id, (j) => j.final);
    expect((await second.details(job.id)).attempts.map((a) => [a.attempt, a.outcome, a.error?.code ?? null])).toEqual([
      [1, 'interrupted', 'SPOOL_RELEASED'],
      [2, 'succeeded', null],
    ]);
  });

  it('planned restarts never spend the retry budget: more graceful stops than maxAttempts, and the job still succeeds', async () => {
    const twice = { machine, version: 1, activities: { work: { maxAttempts: 2 } } };
    const clock = new VirtualClock();
    const path = resources.dbPath();
    let jobId = '';
    for (let stop = 0; stop < 3; stop += 1) {
      current = gate();
      const runtime = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [twice], clock });
      if (stop === 0) jobId = (await runtime.start('shut', {})).id;
      else await runtime.tick();
      await current.started;
      await runtime.close({ graceMs: 0 });
    }
    current = gate();
    const last = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [twice], clock });
    await last.tick();
    await current.started;
    gates.at(-1)!.release();
    expect((await last.waitFor(jobId, (j) => j.final)).value).toBe('finished');
    const details = await last.details(jobId);
    expect(details.attempts.map((a) => a.outcome)).toEqual(['interrupted', 'interrupted', 'interrupted', 'succeeded']);
    expect(details.effects[0]).toMatchObject({ status: 'succeeded', attempt: 4, maxAttempts: 5 });
  });

  it('an activity unsafe to repeat is not given back: its claim ends, and the next runtime records it indeterminate', async () => {
    const unsafe = { machine, version: 1, activities: { work: { unsafeToRepeat: true } } };
    current = gate();
    const clock = new VirtualClock();
    const path = resources.dbPath();
    const first = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [unsafe], clock });
    const job = await first.start('shut', {});
    await current.started;
    await first.close({ graceMs: 0 });
    const after = (await (await resources.sqlite(path, { clock })).getEffect(`${job.id}~work~r1`))!;
    expect(after).toMatchObject({ status: 'running', attempt: 1, maxAttempts: 3 });
    expect(after.claimExpiresAt).toBe(clock.now()); // any process takes it over now
    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [unsafe], clock });
    await second.tick();
    await second.idle();
    const [attempt] = (await second.details(job.id)).attempts;
    expect(attempt).toMatchObject({ attempt: 1, outcome: 'interrupted' });
    expect(attempt?.error?.code).not.toBe('SPOOL_RELEASED');
  });
});
