/** Quarantine: a job held back, with a visible reason, until what it needs is registered or repaired. */
import { SpoolError } from './errors.ts';

/** The quarantine reason's prefix for a job whose commit the store refused (its rows are damaged). */
export const STORE_REFUSED = 'commit refused by the store: ';

/** Events can no longer be sent to a quarantined job until it is released. */
export class JobQuarantined extends SpoolError {
  readonly code = 'SPOOL_QUARANTINED';
  readonly category = 'conflict';
  constructor(jobId: string, reason: string) {
    const next = reason.startsWith(STORE_REFUSED)
      ? 'Its stored rows are damaged: restore them from a backup (or purge the job), then restart.'
      : 'Register the machine version it runs on (or a migration), then restart.';
    super(`Job ${jobId} is quarantined: ${reason}. ${next}`, { jobId, reason });
  }
}
