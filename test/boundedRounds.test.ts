/**
 * Bounded rounds: one `tick()` fires at most `ROUND_BOUNDS.timersPerTick` due timers and one
 * `processPending()` drains at most `ROUND_BOUNDS.jobsPerRound` jobs; the rest wait in the store,
 * still due, and the next round takes them. Nothing is lost or applied twice. The bounds are
 * lowered for the test (and restored), as a crash point is armed. A real SQLite file (NORMAL sync,
 * for speed), a VirtualClock.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { setup } from 'xstate';
import { ROUND_BOUNDS } from '../src/runtime/limits.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { T0 } from './helpers/durable.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
const saved = { ...ROUND_BOUNDS };
beforeEach(() => Object.assign(ROUND_BOUNDS, { jobsPerRound: 250, timersPerTick: 250 }));
afterEach(async () => {
  Object.assign(ROUND_BOUNDS, saved);
  await res.dispose();
});

const late = setup({}).createMachine({
  id: 'late',
  initial: 'waiting',
  states: { waiting: { after: { 1000: 'late' }, on: { GO: 'late' } }, late: { type: 'final' } },
});
const TOTAL = 275; // more than one bound, and more than one 200-row page

describe('bounded rounds', () => {
  it('one tick fires at most timersPerTick timers; the next tick fires the rest, each once', async () => {
    const clock = new VirtualClock(T0);
    const runtime = await res.runtime({ store: await res.sqlite(res.dbPath(), { clock, synchronous: 'NORMAL' }), machines: [late], clock });
    for (let i = 0; i < TOTAL; i += 1) await runtime.start('late', {}, { jobId: `j${i}` });
    clock.advance(1000);
    expect((await runtime.tick()).timersFired).toBe(250);
    expect(await runtime.list({ status: 'done', limit: TOTAL })).toHaveLength(250);
    expect(await runtime.nextWakeAt()).toBeLessThanOrEqual(clock.now()); // the rest are still due: a worker goes again at once
    expect((await runtime.tick()).timersFired).toBe(25);
    expect((await runtime.tick()).timersFired).toBe(0);
    const jobs = await runtime.list({ limit: TOTAL + 1 });
    expect(jobs.map((j) => [j.status, j.revision]).filter(([status, revision]) => status !== 'done' || revision !== 2)).toEqual([]);
  });

  it('one processPending call drains at most jobsPerRound jobs; the next call the rest', async () => {
    const clock = new VirtualClock(T0);
    const path = res.dbPath();
    const store = await res.sqlite(path, { clock, synchronous: 'NORMAL' });
    const client = await res.runtime({ store, machines: [late], clock, processEvents: false });
    for (let i = 0; i < TOTAL; i += 1) {
      await client.start('late', {}, { jobId: `j${i}` });
      await client.send(`j${i}`, { type: 'GO' });
    }
    expect(await store.pendingBacklog()).toBe(TOTAL);
    const processor = await res.runtime({ store: await res.sqlite(path, { clock, synchronous: 'NORMAL' }), machines: [late], clock, recover: false });
    expect(await processor.processPending()).toBe(250);
    expect(await store.pendingBacklog()).toBe(25);
    expect(await processor.processPending()).toBe(25);
    expect(await store.pendingBacklog()).toBe(0);
    expect(await processor.processPending()).toBe(0);
  });
});
