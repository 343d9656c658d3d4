import { createRuntime, type JobStore } from '../src/internal.ts';
import { jobLifecycle } from '../machines/index.ts';
import { timedSteps } from './stats.ts';
import { freshBenchDb, type StoreKind } from './benchDb.ts';
import { JOB_INPUT, MACHINE_ID, progressEvent } from './workload.ts';
import type { RunOptions, RunResult } from './rawRun.ts';

export interface SpoolRunOptions extends RunOptions {
  /** Wrap the store (e.g. to time its calls). Default: the store itself. */
  wrapStore?: (store: JobStore) => JobStore;
  /** Which store (default SQLite at `synchronous`; Postgres at the server's settings). */
  store?: StoreKind;
  /** Called right before the timed part starts (after set-up and warm-up). */
  onMeasureStart?: () => void;
}

/**
 * Durable transitions through the Spool runtime: `await runtime.send(jobId, event)` one after
 * another on one job, each a single commit, on a fresh database (bench/benchDb.ts: a SQLite file
 * in os.tmpdir(), or a Postgres database); with this process's CPU per send and (Postgres, on
 * this host) the server's.
 */
export async function runSpool(options: SpoolRunOptions): Promise<RunResult & { snapshotBytes: number; cpuUsPerOp: number; serverCpuUsPerOp: number | null }> {
  const db = await freshBenchDb(options.store ?? 'sqlite', `spool-${options.synchronous.toLowerCase()}`);
  const store = await db.openStore(options.synchronous);
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
    const meter = db.kind === 'postgres' ? await db.meter() : null;
    const cpu0 = process.cpuUsage();
    const { ops, seconds, perSec, latencies } = await timedSteps(options.durationMs, async () => {
      const r = await runtime.send(job.id, progressEvent(i++));
      if (r.status !== 'applied') notApplied += 1;
    });
    const cpu = process.cpuUsage(cpu0);
    const server = await meter?.stop();

    // One event = one commit: revision 1 (start) + START + every PROGRESS.
    const final = await runtime.get(job.id);
    const expected = 2 + options.warmupOps + ops;
    if (notApplied > 0 || final.revision !== expected) {
      throw new Error(`spool bench: ${notApplied} events not applied; revision ${final.revision}, expected ${expected}`);
    }
    const snapshotBytes = Buffer.byteLength(String(await db.scalar('SELECT snapshot FROM jobs WHERE id = ?', job.id)));
    const serverCpuUs = server?.serverCpuUs ?? null;
    return { ops, seconds, perSec, latencies, snapshotBytes, cpuUsPerOp: (cpu.user + cpu.system) / ops, serverCpuUsPerOp: serverCpuUs === null ? null : serverCpuUs / ops };
  } finally {
    await runtime.close();
    await db.dispose();
  }
}
