/**
 * Shutdown (Runtime.close): its steps in order, and those for running activities: let them finish
 * until a grace deadline, then give the attempts of the aborted ones back (a planned stop does
 * not spend the retry budget).
 */
import type { Clock } from '../ports/clock.ts';
import type { JobStore } from '../ports/store.ts';
import { retireRunner } from './activities.ts';
import type { BackgroundWork } from './background.ts';
import { ClosedError } from '../base/errors.ts';
import type { RuntimeEvents, Tell } from './events.ts';
import type { ActivityExecutor } from './executor.ts';
import type { LeaseKeeper } from './leases.ts';
import type { RunningActivity } from './parts.ts';
import type { Waiters } from './waiters.ts';

/** The runtime's parts `close()` works with. */
export interface ShutdownParts {
  store: JobStore;
  clock: Clock;
  runnerId: string;
  events: RuntimeEvents;
  running: ReadonlyMap<string, RunningActivity>;
  background: BackgroundWork;
  executor: Pick<ActivityExecutor, 'stop'>;
  leaseKeeper: Pick<LeaseKeeper, 'releaseAll'>;
  waiters: Pick<Waiters, 'endAll'>;
}

/** The steps of `close()` only the runtime can take: its own state. */
export interface ShutdownSteps {
  /** From here on no new attempt is claimed. */
  beginClosing: () => void;
  /** Resolve once nothing runs and no event processing is in flight (Runtime.idle). */
  idle: () => Promise<void>;
  /** The runtime is closed: its calls refuse from here on. */
  markClosed: () => void;
}

/**
 * Close (Runtime.close, options checked): claim no new attempts; with `graceMs`, let running
 * activities finish until then; abort the rest and give their attempts back (or, with
 * `releaseAttempts` false, leave them as a crash would); wait for work in flight; stop renewing
 * claims and give every lease back; reject the waiters, drop the listeners; close the store.
 */
export async function closeRuntime(parts: ShutdownParts, steps: ShutdownSteps, graceMs: number, releaseAttempts: boolean): Promise<void> {
  const { running, events } = parts;
  steps.beginClosing();
  if (graceMs > 0 && running.size > 0) await letRunningFinish(() => running.size, () => parts.background.pending(), graceMs);
  const aborted = [...running.entries()];
  for (const [, attempt] of aborted) attempt.controller.abort(new Error('runtime shutting down'));
  await giveBackAttempts(parts.store, parts.runnerId, aborted.map(([effectId]) => effectId), releaseAttempts, parts.clock.now(), events);
  await steps.idle();
  parts.executor.stop();
  await parts.leaseKeeper.releaseAll();
  steps.markClosed();
  retireRunner(parts.runnerId);
  parts.waiters.endAll(new ClosedError('The runtime closed before the awaited condition held.'));
  events.listeners.clear();
  await parts.store.close();
}

/** Wait until nothing runs (`running()` is 0) or `graceMs` real milliseconds have passed, whichever is first. */
export async function letRunningFinish(running: () => number, background: () => Promise<unknown>[], graceMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let expired = false;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(() => ((expired = true), resolve()), graceMs)));
  const drained = (async () => {
    // Stops at the deadline: racing a settled deadline again would spin on microtasks and starve the event loop.
    while (running() > 0 && !expired) await Promise.race([Promise.allSettled(background()), deadline]);
  })();
  await Promise.race([drained, deadline]);
  if (timer) clearTimeout(timer);
}

/**
 * Give the attempts of aborted activities back (recorded `interrupted`, not counted), so any
 * process on any host runs them again now. One unsafe to repeat cannot be given back (nor any,
 * with `giveBack` false): its claim ends now, and whoever takes it over records it as after a crash.
 */
export async function giveBackAttempts(store: JobStore, runner: string, effectIds: readonly string[], giveBack: boolean, now: number, tell: Tell): Promise<void> {
  for (const effectId of effectIds) {
    const effect = await store.getEffect(effectId).catch(() => undefined);
    if (effect?.claimedBy !== runner) continue;
    const released = giveBack && store.releaseAttempt ? await store.releaseAttempt(effectId, effect.attempt, runner, now).catch(() => false) : false;
    if (released) tell.log('info', 'activity attempt released', { jobId: effect.jobId, effectId, attempt: effect.attempt });
    else await store.renewClaim(effectId, effect.attempt, runner, now, now).catch(() => false);
  }
}
