/**
 * Time-driven work: one round of `tick()` (timers, schedules, leases, activities), and firing the
 * due timers. Each due timer fires once, into its job's inbox, as the event the machine scheduled
 * (a damaged row as an event no machine handles); applying it is the round's.
 */
import { UNCOMPARED_HASH } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { JobStore, JsonValue, NewInboxEvent, TimerRecord } from '../ports/store.ts';
import { crashPoint } from './crashPoints.ts';
import type { Tell } from './events.ts';
import { ROUND_BOUNDS } from './limits.ts';
import type { LeaseKeeper } from './leases.ts';
import type { ActivityExecutor } from './executor.ts';

/** What one round of `tick()` works with: the runtime's parts, and its modes. */
export interface TickHost {
  store: JobStore;
  clock: Clock;
  tell: Tell;
  process: boolean;
  runEffects: boolean;
  hostDriven: boolean;
  leaseKeeper: Pick<LeaseKeeper, 'renewClaims' | 'heartbeatDue' | 'heartbeat' | 'expire'>;
  executor: Pick<ActivityExecutor, 'pumped' | 'pump'>;
  /** Host-driven mode: read other processes' commits for those waiting (waiters.ts), when anyone waits. */
  pollWaiters: () => Promise<void>;
  /** Drain many jobs at once, so their commits share transactions (recovery.ts). */
  drainAll: (jobIds: readonly string[]) => Promise<number>;
  /** Due schedule occurrences start their jobs (schedules.ts). */
  fireSchedules: () => Promise<unknown>;
}

/**
 * One round of time-driven work at the clock's current time (Runtime.tick): due timers fired and
 * applied, due schedules fired, claims and leases renewed, expired leases freed (their jobs
 * drained), then due activities started (and orphans taken over).
 */
export async function tickRound(host: TickHost): Promise<{ timersFired: number; activitiesStarted: number }> {
  const { leaseKeeper, executor } = host;
  if (host.hostDriven) await host.pollWaiters();
  let timersFired = 0;
  if (host.runEffects) {
    const { fired, jobs } = await fireDueTimers(host.store, host.tell, host.clock.now());
    timersFired = fired;
    if (host.process) await host.drainAll(jobs);
    await host.fireSchedules();
  }
  if (host.hostDriven) await leaseKeeper.renewClaims();
  // This process is alive: renew its own leases before freeing expired ones (host-driven mode has
  // no other heartbeat; otherwise the clock may have moved past the interval's last beat).
  if (host.hostDriven || leaseKeeper.heartbeatDue()) await leaseKeeper.heartbeat();
  const freed = await leaseKeeper.expire();
  if (host.process && freed.length > 0) await host.drainAll(freed);
  // A round already under way (started by a commit of this tick) finishes first: its claims wait
  // for their jobs' commits in flight, and what it starts is started when tick() returns.
  await executor.pumped();
  const activitiesStarted = await executor.pump(true);
  return { timersFired, activitiesStarted };
}

/**
 * Fire every timer due at `now`, up to `ROUND_BOUNDS.timersPerTick` (the rest stay scheduled,
 * due, for the next round). Returns how many fired and the jobs whose inboxes they went to.
 */
export async function fireDueTimers(store: JobStore, tell: Tell, now: number): Promise<{ fired: number; jobs: string[] }> {
  let fired = 0;
  const jobs = new Set<string>();
  // A timer the store keeps listing but cannot fire (a damaged index or row) is seen once, then left.
  const seen = new Set<string>();
  while (seen.size < ROUND_BOUNDS.timersPerTick) {
    const due = (await store.dueTimers(now, 200)).filter((t) => !seen.has(t.id)).slice(0, ROUND_BOUNDS.timersPerTick - seen.size);
    if (due.length === 0) break;
    for (const timer of due) {
      seen.add(timer.id);
      const event = timerEvent(timer, now);
      if (!(await store.fireTimer(timer.id, event))) continue;
      crashPoint('after-fire');
      fired += 1;
      jobs.add(timer.jobId);
      tell.emit({ type: 'timer.fired', jobId: timer.jobId, timerId: timer.id, eventType: event.type, dueAt: timer.dueAt, firedAt: now });
    }
  }
  return { fired, jobs: [...jobs] };
}

/** The inbox event a timer fires as. A damaged row still fires once, as an event no machine handles: visible in the history, never blocking. */
function timerEvent(timer: TimerRecord, now: number): NewInboxEvent {
  const stored = timer.event as { type?: unknown } | null;
  const payload: JsonValue = stored !== null && typeof stored === 'object' && typeof stored.type === 'string' ? timer.event : { type: 'spool.unreadable-timer', timerId: timer.id };
  return {
    jobId: timer.jobId,
    eventId: `timer~${timer.id}`,
    type: (payload as { type: string }).type,
    payload,
    payloadHash: UNCOMPARED_HASH,
    at: now,
    source: 'timer',
    sourceId: timer.id,
  };
}
