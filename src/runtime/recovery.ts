/**
 * Recovery: bring the store up to date when a runtime opens. Jobs whose machine version is not
 * registered or whose snapshot no longer fits are quarantined, jobs that fit again released,
 * jobs with a registered migration migrated, orphaned child jobs stopped, and every accepted but
 * unprocessed event applied (also `processPending`, and the drains of the worker's rounds).
 */
import type { Clock } from '../ports/clock.ts';
import type { JobFilter, JobRecord, JobStore } from '../ports/store.ts';
import { StorageAccessError, toErrorInfo } from '../base/errors.ts';
import { isRetryableFault } from './backoff.ts';
import type { Tell } from './events.ts';
import { ROUND_BOUNDS } from './limits.ts';
import type { MachineRegistry } from './registry.ts';
import type { CheckOutcome } from './jobCommits.ts';

/** With `verifySnapshots: 'auto'`, recovery hydrates every active job only up to this many. */
const AUTO_VERIFY_LIMIT = 10_000;
/** Jobs drained at once by recovery, the worker and tick(): their commits share transactions. */
const DRAIN_CONCURRENCY = 64;

/** What recovery needs of the runtime. */
export interface RecoveryHost {
  store: JobStore;
  clock: Clock;
  owner: string | null;
  registry: MachineRegistry;
  runnerId: string;
  /** Whether this runtime applies events. */
  process: boolean;
  verifySnapshots: boolean | 'auto';
  tell: Tell;
  /** Check one job (under its lock), starting from the row just listed. */
  check: (jobId: string, known: JobRecord) => Promise<CheckOutcome>;
  /** Stop a child job whose invoking state is gone, as one counted operation. */
  stopJob: (jobId: string) => Promise<void>;
  /** Apply a job's pending events, as one counted operation; how many were settled. */
  drain: (jobId: string) => Promise<number>;
}

/** What `recover` reports. */
export interface RecoveryReport {
  checked: number;
  quarantined: number;
  migrated: number;
  processed: number;
}

/** Recover the store (see the file's comment). */
export async function recoverStore(host: RecoveryHost): Promise<RecoveryReport> {
  const counts = { checked: 0, quarantined: 0, migrated: 0 };
  const checkAll = (filter: JobFilter) => checkJobs(host, filter, counts);
  // Counted up to the limit only: the pairs come from an index, so this does not grow with waiting jobs.
  const pairs = await host.store.activeMachineVersions(host.owner, AUTO_VERIFY_LIMIT + 1);
  const active = pairs.reduce((n, p) => n + p.jobs, 0);
  const verifyAll = host.verifySnapshots === 'auto' ? active <= AUTO_VERIFY_LIMIT : host.verifySnapshots;
  if (host.verifySnapshots === 'auto' && !verifyAll) {
    host.tell.log('info', 'recovery checks machine versions only', { activeJobsAtLeast: active, limit: AUTO_VERIFY_LIMIT, hint: 'snapshots are checked when each job is next loaded' });
  }
  if (verifyAll) {
    await checkAll({ status: 'active' });
  } else {
    // Only jobs whose version cannot run as it is (unregistered, or a migration waits), and
    // quarantined jobs that may be released: restart time does not grow with healthy waiting jobs.
    await checkAll({ status: 'active', quarantined: true });
    for (const pair of pairs) {
      const route = host.registry.route(pair.machineId, pair.machineVersion);
      if (!route || route.chain.length > 0) await checkAll({ status: 'active', machineId: pair.machineId, machineVersion: pair.machineVersion, quarantined: false });
    }
  }
  await stopOrphans(host);
  const processed = await processPending(host);
  return { ...counts, processed };
}

/** Check every job the filter lists (of this owner), page by page. */
async function checkJobs(host: RecoveryHost, filter: JobFilter, counts: { checked: number; quarantined: number; migrated: number }): Promise<void> {
  for (let afterId: string | undefined; ; ) {
    const page = await host.store.listJobs({ ...filter, owner: host.owner, limit: 500, ...(afterId ? { afterId } : {}) });
    if (page.length === 0) break;
    for (const record of page) {
      counts.checked += 1;
      const outcome = await host.check(record.id, record).catch(async (error: unknown) => {
        // A fault of the storage (full, I/O, busy, read-only) is no fault of the job's: it goes to the caller.
        if (isRetryableFault(error) || error instanceof StorageAccessError) throw error;
        // An unreadable row quarantines its job, never the whole file.
        const reason = `stored job is unreadable: ${toErrorInfo(error).message}`;
        await host.store.setQuarantine(record.id, reason, host.clock.now());
        host.tell.emit({ type: 'job.quarantined', jobId: record.id, reason });
        return 'quarantined' as const;
      });
      if (outcome === 'quarantined') counts.quarantined += 1;
      if (outcome === 'migrated') counts.migrated += 1;
    }
    afterId = page.at(-1)!.id;
  }
}

/** Child jobs orphaned by a crash between their parent's commit and their stop: stopped now. */
async function stopOrphans(host: RecoveryHost): Promise<void> {
  if (!host.process || !host.store.orphanedChildren) return;
  for (const id of await host.store.orphanedChildren(ROUND_BOUNDS.jobsPerRound)) {
    host.tell.log('warn', 'orphaned child job stopped', { jobId: id, reason: 'its invocation in the parent was no longer active' });
    await host.stopJob(id);
  }
}

/**
 * Apply every accepted but unprocessed event (sent by client-only runtimes, other processes, or
 * left by a crash). Returns how many were settled. Bounded (limits.ts): jobs beyond
 * `ROUND_BOUNDS.jobsPerRound` keep their events pending for the next call.
 */
export async function processPending(host: RecoveryHost): Promise<number> {
  if (!host.process) return 0;
  let processed = 0;
  const tried = new Set<string>();
  while (tried.size < ROUND_BOUNDS.jobsPerRound) {
    const ids = (await host.store.jobsWithPendingEvents(200, { runner: host.runnerId, now: host.clock.now() }))
      .filter((id) => !tried.has(id))
      .slice(0, ROUND_BOUNDS.jobsPerRound - tried.size);
    if (ids.length === 0) break;
    for (const id of ids) tried.add(id);
    processed += await drainAll(host.drain, ids);
  }
  return processed;
}

/** Drain many jobs at once, so their commits share transactions (group commit). */
export async function drainAll(drain: (jobId: string) => Promise<number>, ids: readonly string[]): Promise<number> {
  let settled = 0;
  for (let i = 0; i < ids.length; i += DRAIN_CONCURRENCY) {
    const counts = await Promise.all(ids.slice(i, i + DRAIN_CONCURRENCY).map((id) => drain(id)));
    settled += counts.reduce((a, b) => a + b, 0);
  }
  return settled;
}
