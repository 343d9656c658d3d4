import { createRuntime, type JobStore } from '../src/index.ts';
import { SqliteStore } from '../persistence/sqlite/index.ts';
import { jobLifecycle } from '../machines/index.ts';
import { timedSteps } from './stats.ts';
import { freshDbPath } from './tempDb.ts';
import { JOB_INPUT, MACHINE_ID, progressEvent } from './workload.ts';
import type { RunOptions, RunResult } from './rawRun.ts';

export interface SpoolRunOptions extends RunOptions {
  /** Wrap the store (e.g. to time its calls). Default: the store itself. */
  wrapStore?: (store: SqliteStore) => JobStore;
  /** Called right before the timed part starts (after set-up and warm-up). */
  onMeasureStart?: () => void;
}

/**
 * Durable transitions through the Spool runtime: `await runtime.send(jobId, event)` one after
 * another on one job, each a single commit, with a fresh SqliteStore in os.tmpdir().
 */
export async function runSpool(options: SpoolRunOptions): Promise<RunResult & { snapshotBytes: number }> {
  const tmp = freshDbPath(`spool-${options.synchronous.toLowerCase()}`);
  const store = await SqliteStore.open(tmp.path, { synchronous: options.synchronous });
  const runtime = await createRuntime({ store: options.wrapStore ? options.wrapStore(store) : store, machines: [jobLifecycle] });
  try {
    const job = await runtime.start(MACHINE_ID, JOB_INPUT);
    await runtime.send(job.id, { type: 'START' });
    let i = 0;
    let notApplied = 0;
    for (; i < options.warmupOps; i += 1) {
      const r = await runtime.send(job.id, progressEvent(i));
      if (r.status !== 'applied') notApplied += 1;
    }

    options.onMeasureStart?.();
    const { ops, seconds, perSec, latencies } = await timedSteps(options.durationMs, async () => {
      const r = await runtime.send(job.id, progressEvent(i++));
      if (r.status !== 'applied') notApplied += 1;
    });

    // One event = one commit: revision 1 (start) + START + every PROGRESS.
    const final = await runtime.get(job.id);
    const expected = 2 + options.warmupOps + ops;
    if (notApplied > 0 || final.revision !== expected) {
      throw new Error(`spool bench: ${notApplied} events not applied; revision ${final.revision}, expected ${expected}`);
    }
    const snapshotBytes = Buffer.byteLength(store.db.prepare('SELECT snapshot FROM jobs WHERE id = ?').pluck().get(job.id) as string);
    return { ops, seconds, perSec, latencies, snapshotBytes };
  } finally {
    await runtime.close();
    tmp.dispose();
  }
}
