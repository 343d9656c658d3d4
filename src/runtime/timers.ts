/**
 * Timers: firing the due ones. Each due timer fires once, into its job's inbox, as the event the
 * machine scheduled (a damaged row as an event no machine handles); applying it is the caller's.
 */
import { UNCOMPARED_HASH } from '../ports/store.ts';
import type { JobStore, JsonValue, NewInboxEvent, TimerRecord } from '../ports/store.ts';
import { crashPoint } from './crashPoints.ts';
import type { Tell } from './events.ts';
import { ROUND_BOUNDS } from './limits.ts';

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
