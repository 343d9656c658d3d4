/**
 * Shutdown's steps for running activities: let them finish until a grace deadline, then give the
 * attempts of the aborted ones back (a planned stop does not spend the retry budget).
 */
import type { JobStore } from '../ports/store.ts';
import type { Tell } from './events.ts';

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
