import { createRuntime, type TransitionCommit } from '../src/internal.ts';
import { jobLifecycle } from '../machines/index.ts';
import { timedSteps } from './stats.ts';
import { freshBenchDb, type StoreKind } from './benchDb.ts';
import { JOB_INPUT, MACHINE_ID, persistedSnapshotTemplate, progressEvent } from './workload.ts';
import type { RunOptions, RunResult } from './rawRun.ts';

/**
 * The ceiling of Spool's storage layout: the store's own commit, one after another on one job,
 * with no engine and no job read. Each step is the commit the runtime makes for an inline
 * PROGRESS event (the job row `WHERE id = ? AND revision = ?` with its lease, the history row, the
 * inbox row accepted and settled), built from the workload's snapshot JSON as the raw limit's is.
 */
export async function runStoreOnly(options: RunOptions & { store?: StoreKind }): Promise<RunResult> {
  const db = await freshBenchDb(options.store ?? 'sqlite', `store-${options.synchronous.toLowerCase()}`);
  const store = await db.openStore(options.synchronous);
  try {
    const runtime = await createRuntime({ store, machines: [jobLifecycle] });
    const job = await runtime.start(MACHINE_ID, JOB_INPUT);
    await runtime.send(job.id, { type: 'START' });
    const runner = runtime.runnerId;
    let revision = (await runtime.get(job.id)).revision;
    const snapshot = persistedSnapshotTemplate();
    const step = async (i: number) => {
      const event = progressEvent(i);
      snapshot.context['progress'] = event.percent;
      const at = Date.now();
      const commit: TransitionCommit = {
        jobId: job.id,
        expectedRevision: revision,
        job: { status: 'active', value: 'processing', statePaths: ['processing'], context: snapshot.context as never, snapshot: JSON.stringify(snapshot), machineVersion: job.machineVersion, progress: event.percent, at },
        transition: { eventId: `e${i}`, eventType: event.type, payload: event, from: 'processing', to: 'processing', outcome: 'applied', error: null, at },
        event: { accept: { jobId: job.id, eventId: `e${i}`, type: event.type, payload: event, payloadHash: `h${i}`, at }, status: 'applied', error: null, payload: event },
        lease: { runner, fence: null, now: at, until: null },
      };
      const [result] = await store.commit([commit]);
      if (!result?.ok) throw new Error(`store-only bench: commit refused: ${JSON.stringify(result)}`);
      revision = result.revision;
    };
    let i = 0;
    for (; i < options.warmupOps; i += 1) await step(i);
    const run = await timedSteps(options.durationMs, () => step(i++));
    await runtime.close();
    return run;
  } finally {
    await store.close();
    await db.dispose();
  }
}
