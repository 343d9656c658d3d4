/** Quarantine: a job held back, with a visible reason, until what it needs is registered or repaired. */
import { DAMAGED_RECORD, type JobRecord } from '../ports/store.ts';
import { JobQuarantined } from '../base/errors.ts';
import { parseSnapshot } from '../base/hydrate.ts';

/** The quarantine reason's prefix for a job whose commit the store refused (its rows are damaged). */
export const STORE_REFUSED = 'commit refused by the store: ';

/** The error for an event sent to a quarantined job: why it is held, and the way out. */
export function quarantined(jobId: string, reason: string): JobQuarantined {
  return new JobQuarantined(`Job ${jobId} is quarantined: ${reason}. ${wayOut(reason, jobId)}`, { jobId, reason });
}

/** Whether a quarantine reason is damage (its rows do not read, or the store refused its commit). */
export function isDamage(reason: string): boolean {
  return reason.startsWith(STORE_REFUSED) || reason.startsWith(DAMAGED_RECORD);
}

/**
 * The damage a job's record shows, whether or not it was quarantined for it yet: its damage
 * quarantine, a jobs column that does not parse, or a snapshot that is no XState snapshot; else null.
 */
export function damageOf(record: JobRecord): string | null {
  if (record.quarantine !== null && isDamage(record.quarantine)) return record.quarantine;
  if (record.corruption !== undefined) return record.corruption;
  const snapshot = parseSnapshot(record.snapshot);
  return typeof snapshot === 'string' ? `${DAMAGED_RECORD}jobs.snapshot: ${snapshot}` : null;
}

/** Refuse a write to a job whose rows are damaged, with the way out (purge it). */
export function refuseDamaged(record: JobRecord): void {
  const damage = damageOf(record);
  if (damage !== null) throw quarantined(record.id, damage);
}

/** What to do about a quarantine, by what happened: a damaged job is purged (or restored), a missing version registered. */
export function wayOut(reason: string, jobId = '<job>'): string {
  if (isDamage(reason)) {
    return `Its stored rows are damaged, so it can never run again: end it with \`spool purge ${jobId}\` (runtime.purge, POST /api/jobs/${jobId}/purge), or restore the rows from a backup and restart. \`spool doctor\` says more.`;
  }
  if (reason.startsWith('machine ')) return 'Register the machine version it runs on (or a migration from it), then restart.';
  return 'Its snapshot does not fit the registered machine: register the version it was written by, or a migration that makes it fit, then restart.';
}


/**
 * What to do about a failed (poison) caller event: fix the code, then redeliver it; one that
 * carried sensitive fields (not stored, so never redelivered) is sent again with its values.
 */
export function redeliveryWayOut(jobId: string, eventId: string, carriedSensitive = false, type = '<type>'): string {
  if (carriedSensitive) {
    return `fix what made it fail, then send it again with its sensitive values, \`spool send ${jobId} '{"type":"${type}",…}'\` (runtime.send): it carried sensitive fields, which Spool does not store, so it cannot be redelivered`;
  }
  return `fix what made it fail, then \`spool redeliver ${jobId} ${eventId}\` (runtime.redeliver) applies it again on the current state`;
}
