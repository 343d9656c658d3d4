/**
 * Redelivery: an event that failed (a poison event: a guard or action threw, so the job stayed
 * where it was; a caller's event, an activity's outcome, a timer's) applied again, once the code
 * is fixed, on the job's current state. The new application is a new event,
 * `redeliver~<event id>`, accepted into the inbox (durable like any other) with the failed event's payload (a caller's with `sourceId` = the failed event's id; the
 * runtime's own with its source, still checked for being current when applied): its history row
 * is a new record, and the first outcome stays as it was. One redelivery per event id: asking
 * again returns the first redelivery's outcome; a redelivery that failed too is redelivered by
 * its own id.
 */
import { UNCOMPARED_HASH, type InboxRecord, type JobRecord, type JsonValue, type NewInboxEvent } from '../ports/store.ts';
import { JobTerminalError, RedeliveryRefusedError } from '../base/errors.ts';
import { formatStateValue, hashJson } from '../base/json.ts';
import { sensitivePaths } from '../base/redaction.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { describeEnd, TERMINAL } from './jobView.ts';

/** Options of `redeliver`. */
export interface RedeliverOptions {
  /** Apply it even though the job has moved on since the event failed (its revision changed). */
  force?: boolean;
}

/** What event ids of redeliveries start with (reserved: a caller cannot choose one). */
export const REDELIVERY_PREFIX = 'redeliver~';

/** The id of the redelivery of `eventId`. */
export function redeliveryId(eventId: string): string {
  return `${REDELIVERY_PREFIX}${eventId}`;
}

/** The event id a redelivery's id redelivers, or undefined for any other id. */
export function redeliveryOf(eventId: string | null): string | undefined {
  return eventId !== null && eventId.startsWith(REDELIVERY_PREFIX) ? eventId.slice(REDELIVERY_PREFIX.length) : undefined;
}

/**
 * The inbox event that redelivers `original` to `record`, or a {@link RedeliveryRefusedError}
 * (a {@link JobTerminalError} for a finished job) saying why not and what to do instead.
 */
export function redelivery(record: JobRecord, original: InboxRecord | undefined, eventId: string, def: RegisteredMachine, force: boolean, at: number): NewInboxEvent {
  const jobId = record.id;
  if (!original) {
    throw new RedeliveryRefusedError(`Job ${jobId} has no event "${eventId}". Its events: \`spool show ${jobId}\`.`, { jobId, eventId, reason: 'unknown-event' });
  }
  if (original.status !== 'failed') {
    throw new RedeliveryRefusedError(
      `Event "${eventId}" of job ${jobId} did not fail (it is ${original.status}): only a failed event can be redelivered.`,
      { jobId, eventId, reason: 'not-failed', status: original.status },
    );
  }
  if (TERMINAL.has(record.status)) {
    throw new JobTerminalError(`Job ${jobId} is ${describeEnd(record)}: it accepts no more events, a redelivery neither.`, { jobId, status: record.status });
  }
  if (sensitivePaths(original.payload, def.sensitive).length > 0) {
    throw new RedeliveryRefusedError(
      `Event "${eventId}" of job ${jobId} carried sensitive fields, which Spool does not store: send it again with \`spool send\` instead.`,
      { jobId, eventId, reason: 'sensitive' },
    );
  }
  if (!force && original.revision !== record.revision) {
    throw new RedeliveryRefusedError(
      `Job ${jobId} has moved on since event "${eventId}" failed at revision ${original.revision} (it is at revision ${record.revision}, state ${formatStateValue(record.value)}): ` +
        `applying it now may not mean what it meant then. Check \`spool show ${jobId}\`, then redeliver with --force (force: true) to apply it anyway.`,
      { jobId, eventId, reason: 'moved-on', failedAt: original.revision, revision: record.revision },
    );
  }
  const payload = original.payload as JsonValue;
  const again = { jobId, eventId: redeliveryId(eventId), type: original.type, payload, at };
  // A caller's event links to the one it redelivers; the runtime's own (an activity's outcome, a
  // timer) keeps its source, so that it is still checked for being current when it is applied.
  if (original.source === 'external') return { ...again, payloadHash: hashJson(payload), source: 'external', sourceId: eventId };
  return { ...again, payloadHash: UNCOMPARED_HASH, source: original.source, sourceId: original.sourceId, attempt: original.attempt };
}
