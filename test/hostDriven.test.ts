/**
 * Host-driven mode (desktop and edge embedding): Spool starts no interval of its own; the host's
 * `tick()` fires due timers exactly once per call and renews the claims of running activities.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { VirtualClock } from '../src/testing/index.ts';
import { Resources } from './helpers/resources.ts';

let release: (() => void) | undefined;
const machine = setup({
  actors: {
    slow: fromPromise(async ({ signal }) => {
      await new Promise<void>((resolve, reject) => {
        release = resolve;
        signal.addEventListener('abort', () => reject(new Error('aborted')));
      });
      return 'ok';
    }),
  },
}).createMachine({
  id: 'host',
  initial: 'waiting',
  states: {
    waiting: { after: { 5000: 'working' } },
    working: { invoke: { id: 'slow', src: 'slow', onDone: 'done' } },
    done: { type: 'final' },
  },
});

const resources = new Resources();
afterEach(async () => {
  release?.();
  vi.restoreAllMocks();
  await resources.dispose();
});

describe('host-driven mode', () => {
  it('starts no intervals; tick() fires due timers once per call and renews running claims', async () => {
    const setIntervalSpy = vi.spyOn(globalThis, 'setInterval');
    const clock = new VirtualClock();
    const store = await resources.sqlite(resources.dbPath(), { clock });
    const runtime = await resources.runtime({ store, machines: [machine], clock, hostDriven: true, leaseMs: 30_000 });
    const job = await runtime.start('host', {});
    expect(await runtime.tick()).toEqual({ timersFired: 0, activitiesStarted: 0 });

    const started: number[] = [];
    runtime.subscribe((e) => {
      if (e.type === 'activity.started') started.push(e.attempt);
    });
    clock.advance(5000);
    expect((await runtime.tick()).timersFired).toBe(1);
    expect((await runtime.tick()).timersFired).toBe(0); // once per due timer, however often the host ticks
    expect((await runtime.get(job.id)).value).toBe('working');
    expect(started).toEqual([1]);

    const [effect] = (await runtime.details(job.id)).effects;
    expect(effect?.status).toBe('running');
    const claimedUntil = effect!.claimExpiresAt!;
    clock.advance(20_000);
    await runtime.tick();
    const renewed = (await runtime.details(job.id)).effects[0]!;
    expect(renewed.claimExpiresAt).toBe(clock.now() + 30_000);
    expect(renewed.claimExpiresAt).toBeGreaterThan(claimedUntil);

    release!();
    await runtime.waitFor(job.id, (j) => j.final);
    expect(setIntervalSpy).not.toHaveBeenCalled();
  });

  it('a waitFor sees another process\'s commit at the host\'s next tick(), with no interval of its own', async () => {
    const setIntervalSpy = vi.spyOn(globalThis, 'setInterval');
    const clock = new VirtualClock();
    const path = resources.dbPath();
    const runtime = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [machine], clock, hostDriven: true });
    const other = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [machine], clock, hostDriven: true });
    const job = await runtime.start('host', {});
    let checks = 0;
    let firstCheck!: () => void;
    const checked = new Promise<void>((r) => (firstCheck = r));
    const waiting = runtime.waitFor(job.id, (j) => {
      checks += 1;
      firstCheck();
      return j.value === 'working';
    });
    await checked;
    clock.advance(5000);
    expect((await other.tick()).timersFired).toBe(1); // the other connection commits the timer's transition
    expect(checks).toBe(1);
    await runtime.tick();
    expect(await waiting).toMatchObject({ value: 'working' });
    expect(setIntervalSpy).not.toHaveBeenCalled();
  });
});
