/**
 * Child jobs whose invoking state was left: stopped by their parent's decision (status `stopped`,
 * their effects and timers cancelled, any lease on them ended), and their own children after them.
 * What a transition means for child jobs (to create, to send to, to stop) is planned by the pure
 * step (`src/step/children.ts`); the commit path calls this after the parent's commit.
 */
import type { Clock } from '../ports/clock.ts';
import type { JobStore } from '../ports/store.ts';
import { stopStep } from '../step/step.ts';
import type { Tell } from './events.ts';
import type { JobLocks } from './jobLocks.ts';
import { TERMINAL } from './jobView.ts';
import type { LeaseKeeper } from './leases.ts';
import type { AttemptAbort } from './activities.ts';

const MAX_CONFLICT_RETRIES = 100;

/** What stopping a child job uses: the store, the job's lock and lease, and the runtime's state of the job. */
export interface ChildJobsDeps {
  store: JobStore;
  clock: Clock;
  locks: JobLocks;
  leaseKeeper: Pick<LeaseKeeper, 'claimFor'>;
  events: Tell;
  /** The snapshot cache and leases held here (the stopped job leaves both); attempts running here (aborted). */
  snapshots: { delete(jobId: string): boolean };
  leases: Map<string, number>;
  running: ReadonlyMap<string, { jobId: string; controller: Pick<AttemptAbort, 'abort'> }>;
}

/** Stop a child job whose invoking state was left: status `stopped`, its effects and timers cancelled, its own children stopped. */
export async function stopChildJob(deps: ChildJobsDeps, jobId: string): Promise<void> {
  const grandchildren = await deps.locks.run(jobId, async () => {
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
      const record = await deps.store.getJob(jobId);
      if (!record || TERMINAL.has(record.status)) return [];
      const children = (await deps.store.listEffects(jobId)).filter((e) => e.kind === 'child' && e.active).map((e) => e.id);
      const now = deps.clock.now();
      // The parent's decision overrides any lease on the child: the holder's next write fails its fence.
      const [result] = await deps.store.commit([{ ...stopStep(record, now), lease: { ...deps.leaseKeeper.claimFor(jobId, false, now), force: true } }]);
      if (result?.ok) {
        deps.snapshots.delete(jobId);
        deps.leases.delete(jobId);
        for (const running of deps.running.values()) if (running.jobId === jobId) running.controller.abort(new Error('stopped: its parent left the invoking state'));
        deps.events.log('info', 'child job stopped', { jobId });
        return children;
      }
    }
    return [];
  });
  for (const child of grandchildren) await stopChildJob(deps, child);
}
