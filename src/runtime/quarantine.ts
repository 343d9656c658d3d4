/** Quarantine: a job held back, with a visible reason, until what it needs is registered or repaired. */
import { DAMAGED_RECORD } from '../ports/store.ts';
import { SpoolError } from '../base/errors.ts';

/** The quarantine reason's prefix for a job whose commit the store refused (its rows are damaged). */
export const STORE_REFUSED = 'commit refused by the store: ';

/** Events can no longer be sent to a quarantined job until it is released. */
export class JobQuarantined extends SpoolError {
  readonly code = 'SPOOL_QUARANTINED';
  readonly category = 'conflict';
  constructor(jobId: string, reason: string) {
    super(`Job ${jobId} is quarantined: ${reason}. ${wayOut(reason)}`, { jobId, reason });
  }
}

/** What to do about a quarantine, by what happened: damaged rows are restored, a missing version registered. */
export function wayOut(reason: string): string {
  if (reason.startsWith(STORE_REFUSED) || reason.startsWith(DAMAGED_RECORD)) {
    return 'Its stored rows are damaged: run `spool doctor` (and `--repair`), restore them from a backup or purge the job, then restart.';
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
