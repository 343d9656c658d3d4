/**
 * Crashes with effects and timers in flight: a real child process is SIGKILLed while its activity
 * is awaiting (or while its jobs' timers are pending), then a runtime in this process opens the same
 * SQLite file and carries on. The dead runner's claim is taken over at once (its pid is gone), with
 * no waiting for claim expiry. Plus in-process restarts (a closed runtime's claims).
 */
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { approvalFlow, exportJob } from '../machines/index.ts';
import type { Runtime } from '../src/index.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { Resources } from './helpers/resources.ts';
import { ChildScript } from './helpers/proc.ts';
import { T0, gate, nextEvent, openRuntime, releaseGates, runToEnd, untilAborted, type Opened } from './helpers/durable.ts';
import { work, workHooks } from './fixtures/workMachine.ts';
import { AFTER_EVENT, EXPIRE_MS, PING_MS, REMIND_MS, timing } from './fixtures/timingMachine.ts';

const CHILD = fileURLToPath(new URL('./fixtures/effectsChild.ts', import.meta.url));
const res = new Resources();
const children: ChildScript[] = [];
const defaults = { ...workHooks };
beforeEach(() => Object.assign(workHooks, defaults));
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  releaseGates();
  await res.dispose();
});

const MACHINES = [work, exportJob, timing, approvalFlow];

/** Run the child fixture in `mode` on a fresh file until it prints `until`, then SIGKILL it. */
async function crashChild(mode: string, until: (line: { type: string }) => boolean) {
  const path = res.dbPath();
  const child = new ChildScript(CHILD, [mode, path, String(T0)]);
  children.push(child);
  const line = await child.waitFor(until);
  const exit = await child.kill('SIGKILL');
  expect(exit.signal).toBe('SIGKILL');
  return { path, line, pid: child.proc.pid };
}

describe('crash mid-activity (real child process, SIGKILL)', () => {
  it('a new runtime re-runs a safe activity at once with the same idempotency key (attempt 2) and the job completes', async () => {
    const { path, line, pid } = await crashChild('activity', (l) => l.type === 'activity');
    expect(line).toMatchObject({ src: 'work', attempt: 1 });

    const calls: Array<{ key: string; attempt: number }> = [];
    workHooks.work = async (args) => {
      calls.push({ key: args.idempotencyKey, attempt: args.attempt });
      return { rerun: true };
    };
    const clock = new VirtualClock(T0);
    const o = await openRuntime(res, MACHINES, { path, clock });
    const jobId = line['jobId'] as string;
    const [before] = await o.store.listEffects(jobId);
    expect(before).toMatchObject({ status: 'running', attempt: 1 });
    expect(before!.claimedBy).toMatch(new RegExp(`/${pid}/`));
    expect(before!.claimExpiresAt!).toBeGreaterThan(clock.now()); // the claim has not expired...

    const started = nextEvent(o.runtime, 'activity.started');
    await o.runtime.tick(); // ...and is taken over anyway: its process is gone
    expect(await started).toMatchObject({ attempt: 2, effectId: line['key'] });
    await o.runtime.idle();
    expect(clock.now()).toBe(T0);

    expect(calls).toEqual([{ key: line['key'], attempt: 2 }]);
    const details = await o.runtime.details(jobId);
    expect(details.job).toMatchObject({ value: 'review', context: { output: { rerun: true } } });
    expect(details.attempts.map((a) => [a.attempt, a.outcome, a.runner?.split('/')[1]])).toEqual([
      [1, 'interrupted', String(pid)],
      [2, 'succeeded', String(process.pid)],
    ]);
  });

  it('an unsafe-to-repeat activity is not re-run: export-job gets SPOOL_INDETERMINATE, reconciles and completes', async () => {
    const { path, line } = await crashChild('export', (l) => l.type === 'activity');
    expect(line).toMatchObject({ src: 'export', attempt: 1 });
    const jobId = line['jobId'] as string;

    const clock = new VirtualClock(T0);
    const o = await openRuntime(res, MACHINES, { path, clock });
    const end = await runToEnd(o.runtime, clock, jobId);
    expect(end).toMatchObject({ value: 'completed', progress: 100, context: { reconciled: true, progress: 100, error: null } });
    expect(clock.now()).toBe(T0); // no waiting for a claim to expire

    const details = await o.runtime.details(jobId);
    expect(details.history.slice(1).map((h) => [h.eventType, h.to, h.outcome])).toEqual([
      ['xstate.done.actor.reserve', 'exporting', 'applied'],
      ['xstate.error.actor.export', 'reconciling', 'applied'],
      ['xstate.done.actor.lookup', 'completed', 'applied'],
    ]);
    const exportError = details.events.find((e) => e.type === 'xstate.error.actor.export')!.payload as { error: { code: string; name: string } };
    expect(exportError.error).toMatchObject({ code: 'SPOOL_INDETERMINATE', name: 'IndeterminateOutcomeError' });
    const exportEffect = details.effects.find((e) => e.src === 'export')!;
    expect(exportEffect).toMatchObject({ status: 'failed', attempt: 1, unsafe: true, id: line['key'] });
    expect(details.attempts.filter((a) => a.effectId === exportEffect.id).map((a) => [a.attempt, a.outcome])).toEqual([[1, 'interrupted']]);
    expect(details.assets).toHaveLength(1);
    expect(details.assets[0]!.uri).toBe((end.context as { result: { uri: string } }).result.uri);
    // "could not safely be re-run" is what list({ exhausted: true }) is documented to find.
    expect((await o.runtime.list({ exhausted: true })).map((j) => j.id)).toEqual([jobId]);
  });
});

describe('timers of a crashed child process', () => {
  it('fire after the restart, each once, at its original deadline', async () => {
    const { path, line } = await crashChild('timers', (l) => l.type === 'ready');
    const timingId = line['timing'] as string;
    const approvalId = line['approval'] as string;

    const clock = new VirtualClock(T0);
    const o = await openRuntime(res, MACHINES, { path, clock });
    const due = (await o.runtime.details(timingId)).timers.map((t) => [t.key, t.dueAt - T0, t.status]);
    expect(due).toEqual([
      ['remind', REMIND_MS, 'scheduled'],
      ['ping', PING_MS, 'scheduled'],
      [AFTER_EVENT, EXPIRE_MS, 'scheduled'],
    ]);
    const fired: string[] = [];
    o.runtime.subscribe((e) => {
      if (e.type === 'timer.fired') fired.push(`${clock.now() - T0}:${e.eventType}`);
    });
    for (const t of [REMIND_MS, PING_MS, EXPIRE_MS, 60_000, 180_000]) {
      clock.set(T0 + t - 1);
      await o.runtime.tick();
      clock.set(T0 + t);
      await o.runtime.tick();
      await o.runtime.tick();
    }
    expect(fired).toEqual([
      `${REMIND_MS}:REMIND`,
      `${PING_MS}:PING`,
      `${EXPIRE_MS}:${AFTER_EVENT}`,
      '60000:REMIND',
      '180000:xstate.after.deadline.approval-flow.pending',
    ]);
    expect(await o.runtime.get(timingId)).toMatchObject({ value: 'expired', context: { reminders: 1, pings: 1 } });
    expect(await o.runtime.get(approvalId)).toMatchObject({ value: 'expired', context: { reminders: 1 } });
  });
});

describe('in-process restart: a closed runtime’s running attempts', () => {
  /** Three `work` jobs whose attempts are left running by a runtime that closed. */
  async function leaveThreeRunning(): Promise<{ path: string; clock: VirtualClock; jobs: string[] }> {
    const first: Opened = await openRuntime(res, MACHINES);
    const started = [gate(), gate(), gate()];
    let n = 0;
    workHooks.work = async (args) => {
      started[n++]!.resolve();
      return untilAborted(args.signal);
    };
    const jobs: string[] = [];
    for (let i = 0; i < 3; i += 1) jobs.push((await first.runtime.start('work', { auto: true })).id);
    await Promise.all(started.map((g) => g.promise));
    await first.runtime.close();
    return { path: first.path, clock: first.clock, jobs };
  }

  async function reopenCounting(path: string, clock: VirtualClock, maxConcurrentActivities: number) {
    const running = { now: 0, max: 0 };
    const release = gate<unknown>();
    workHooks.work = async (args) => {
      running.now += 1;
      running.max = Math.max(running.max, running.now);
      try {
        return await Promise.race([release.promise, untilAborted(args.signal)]);
      } finally {
        running.now -= 1;
      }
    };
    const o = await openRuntime(res, MACHINES, { path, clock, maxConcurrentActivities });
    return { o, running, release };
  }

  async function finish(runtime: Runtime, clock: VirtualClock, jobs: string[], release: { resolve: (v: unknown) => void }) {
    release.resolve('done');
    for (const id of jobs) await runToEnd(runtime, clock, id, (j) => j.value !== 'working');
  }

  // Regression: taken-over attempts used to bypass the concurrency limit (every orphan started at once).
  it('takes the attempts over within maxConcurrentActivities', async () => {
    const { path, clock, jobs } = await leaveThreeRunning();
    const { o, running, release } = await reopenCounting(path, clock, 1);
    await o.runtime.tick();
    expect(running.max).toBe(1);
    await finish(o.runtime, clock, jobs, release);
    expect(running.max).toBe(1);
    for (const id of jobs) expect(await o.runtime.get(id)).toMatchObject({ value: 'review', context: { output: 'done' } });
  });

  // Regression: taken-over attempts used not to be counted, so tick() reported activitiesStarted 0
  // (and runWorker's onRound was not called) for a round that took work over.
  it('counts taken-over attempts in tick().activitiesStarted', async () => {
    const { path, clock, jobs } = await leaveThreeRunning();
    const { o, release } = await reopenCounting(path, clock, 8);
    const starts: number[] = [];
    o.runtime.subscribe((e) => {
      if (e.type === 'activity.started') starts.push(e.attempt);
    });
    const { activitiesStarted } = await o.runtime.tick();
    expect(starts).toEqual([2, 2, 2]);
    expect(activitiesStarted).toBe(3);
    await finish(o.runtime, clock, jobs, release);
  });
});
