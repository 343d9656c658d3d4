/**
 * Cancellation: a request recorded once on the job, and the machine's cancel event (default
 * `CANCEL`) delivered through its inbox. The job is cancelled only when the machine reaches its
 * cancelled state.
 */
import { UNCOMPARED_HASH } from '../ports/store.ts';
import type { Clock } from '../ports/clock.ts';
import type { JobRecord, JobStore, JsonValue, NewInboxEvent } from '../ports/store.ts';
import { JobTerminalError, ValidationError } from '../base/errors.ts';
import { quarantined } from './quarantine.ts';
import type { Tell } from './events.ts';
import { describeEnd, TERMINAL } from './jobView.ts';
import { eventSchemaFor, namesEventType, type MachineRegistry } from './registry.ts';
import { type RegisteredMachine } from '../base/definition.ts';

/** The cancel event for `def`: with the reason when its schema (if any) takes one. */
export function cancelPayload(def: RegisteredMachine, reason: string): JsonValue {
  const schema = eventSchemaFor(def, def.cancel.event);
  const withReason = { type: def.cancel.event, reason };
  if (!schema) return withReason;
  if (schema.safeParse(withReason).success) return withReason;
  return { type: def.cancel.event };
}

/** The inbox event that cancels job `jobId` of machine `def`. */
export function cancelEvent(jobId: string, def: RegisteredMachine, reason: string, at: number): NewInboxEvent {
  const payload = cancelPayload(def, reason);
  return { jobId, eventId: 'spool.cancel', type: def.cancel.event, payload, payloadHash: UNCOMPARED_HASH, at, source: 'cancel' };
}

/** The reason given to `cancel`: a string of at most 2000 characters. */
export function checkCancelReason(reason: unknown): void {
  if (typeof reason !== 'string' || reason.length > 2000) throw new ValidationError('A cancel reason must be a string of at most 2000 characters.');
}

/**
 * Record a cancel request for a job that can be cancelled (not ended, its machine registered and
 * naming the cancel event) with its event in the inbox; told once, on the first request.
 */
export async function requestCancel(store: JobStore, registry: MachineRegistry, clock: Clock, tell: Tell, record: JobRecord, reason: string): Promise<void> {
  const jobId = record.id;
  if (TERMINAL.has(record.status)) {
    throw new JobTerminalError(`Job ${jobId} is ${describeEnd(record)}: there is nothing to cancel.`, { jobId, status: record.status });
  }
  const def = registry.route(record.machineId, record.machineVersion)?.target;
  if (!def) throw quarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
  if (!namesEventType(def, def.cancel.event)) {
    // A child job is the parent's to stop: it ends when the parent leaves the invoking state.
    const how = record.parent
      ? `it is a child job of ${record.parent.jobId}: cancel that job (or send it an event that leaves the invoking state) to stop it`
      : `handle it or set \`cancel: { event }\` in its definition`;
    throw new ValidationError(`Machine ${def.id} has no "${def.cancel.event}" event, so it cannot be cancelled; ${how}.`);
  }
  const now = clock.now();
  const { first } = await store.requestCancel(jobId, reason, cancelEvent(jobId, def, reason, now), now);
  if (first) {
    tell.emit({ type: 'cancel.requested', jobId, reason });
    tell.log('info', 'cancel requested', { jobId, reason });
  }
}
