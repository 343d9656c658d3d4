/**
 * Graceful shutdown: close() claims no new attempts, lets running activities finish within the
 * grace period (their outcomes recorded), aborts the rest and releases their claims, so the next
 * runtime takes them over at once. Nothing accepted is lost either way.
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
    expect(after.status).toBe('running');
    expect(after.claimExpiresAt).toBe(clock.now()); // released: any process may take it over now

    // A late result of the first attempt changes nothing; the next runtime runs the attempt again.
    gates.at(-1)!.release();
    current = gate();
    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [def], clock });
    await second.tick();
    await current.started;
    gates.at(-1)!.release();
    await second.waitFor(job.id, (j) => j.final);
    expect((await second.details(job.id)).attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'succeeded'],
    ]);
  });
});
