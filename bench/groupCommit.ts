/**
 * Section 1, group commit: durable transitions per second with many jobs sending at once through
 * ONE runtime, beside raw SQLite doing the same writes batched 100 to a transaction.
 *
 * Spool: 200 `job-lifecycle` jobs in `processing`, PROGRESS events, either a steady 64 sends in
 * flight (64 senders, each owning every 64th job, each awaiting its send before the next) or
 * waves (`Promise.all` of one send per job, 200 at once, then the next wave). The store is
 * wrapped to count commits per `store.commit` call: the batch sizes the group commit achieved.
 */
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createRuntime, type Runtime } from '../src/index.ts';
import { jobLifecycle } from '../machines/index.ts';
import { countingStore, StoreCounter, type BatchSummary } from './countingStore.ts';
import type { Synchronous } from './rawRun.ts';
import { Samples } from './stats.ts';
import { freshBenchDb, type StoreKind } from './benchDb.ts';
import { JOB_INPUT, MACHINE_ID, persistedSnapshotTemplate, progressEvent } from './workload.ts';

export const GROUP_JOBS = 200;
export const STEADY_IN_FLIGHT = 64;
export const RAW_BATCH = 100;

export type GroupMode = 'steady' | 'waves';

export interface GroupRunResult {
  perSec: number;
  ops: number;
  seconds: number;
  latencies: Samples;
  batches: BatchSummary;
  /** Share of the timed wall clock spent inside store.commit (SQLite work + disk sync). */
  commitShare: number;
  /** µs of wall clock per transition spent outside store calls: the engine's CPU and awaits. */
  engineUsPerOp: number;
  /** µs per transition inside store.commit. */
  commitUsPerOp: number;
  /** Store calls per send, by method. */
  storeCallsPerOp: Record<string, { calls: number; us: number }>;
  /** SQLite: WAL frames (4 KiB pages) written per transition, measured after the timed part (see walFrames); Postgres: null. */
  walFramesPerOp: number | null;
  /** This process's CPU time (user + system) per transition: steadier than wall time on a busy host. */
  cpuUsPerOp: number;
  /** Postgres: over the timed part, WAL bytes, write transactions and the server's CPU (null: not on this host) per transition (bench/benchDb.ts). */
  server: { walBytesPerOp: number | null; commitsPerOp: number | null; cpuUsPerOp: number | null } | null;
}

export async function runSpoolGroup(options: { synchronous: Synchronous; durationMs: number; mode: GroupMode; warmupWaves?: number; store?: StoreKind }): Promise<GroupRunResult> {
  const db = await freshBenchDb(options.store ?? 'sqlite', `group-${options.mode}-${options.synchronous.toLowerCase()}`);
  const store = await db.openStore(options.synchronous);
  const counter = new StoreCounter();
  const runtime = await createRuntime({ store: countingStore(store, counter), machines: [jobLifecycle] });
  try {
    const ids: string[] = [];
    for (let i = 0; i < GROUP_JOBS; i += 1) ids.push((await runtime.start(MACHINE_ID, JOB_INPUT)).id);
    await Promise.all(ids.map((id) => runtime.send(id, { type: 'START' })));
    const sends: GroupSends = { next: 0, notApplied: 0 };
    for (let w = 0; w < (options.warmupWaves ?? 3); w += 1) {
      const results = await Promise.all(ids.map((id) => runtime.send(id, progressEvent(sends.next++))));
      sends.notApplied += results.filter((r) => r.status !== 'applied').length;
    }
    const warmOps = sends.next;

    counter.reset();
    const latencies = new Samples();
    const meter = db.kind === 'postgres' ? await db.meter() : null;
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const { ops, last } = await sendUntil(runtime, ids, options.mode, start, start + options.durationMs, latencies, sends);
    const wallMs = last - start;
    const seconds = wallMs / 1000;
    const cpu = process.cpuUsage(cpu0);
    const metered = await meter?.stop();
    const commitMs = counter.ms('commit');
    const storeMs = counter.totalMs();
    const batches = counter.batchSummary();
    const storeCallsPerOp = counter.perUnit(ops);

    // One event = one commit: every job is at revision 2 (start, START) + its PROGRESS events.
    const jobs = await runtime.list({ machineId: MACHINE_ID, limit: GROUP_JOBS + 1 });
    const revisions = jobs.reduce((n, j) => n + j.revision, 0);
    const expected = GROUP_JOBS * 2 + warmOps + ops;
    if (sends.notApplied > 0 || revisions !== expected) {
      throw new Error(`group bench: ${sends.notApplied} events not applied; revisions ${revisions}, expected ${expected}`);
    }

    const result = {
      perSec: ops / seconds,
      ops,
      seconds,
      latencies,
      batches,
      commitShare: commitMs / wallMs,
      engineUsPerOp: ((wallMs - storeMs) * 1000) / ops,
      commitUsPerOp: (commitMs * 1000) / ops,
      storeCallsPerOp,
      cpuUsPerOp: (cpu.user + cpu.system) / ops,
    };
    if (!('db' in store)) {
      const per = (n: number | null | undefined) => (n === null || n === undefined ? null : n / ops);
      return { ...result, walFramesPerOp: null, server: { walBytesPerOp: per(metered?.walBytes), commitsPerOp: per(metered?.commits), cpuUsPerOp: per(metered?.serverCpuUs) } };
    }
    return { ...result, walFramesPerOp: await walFramesPerSend(runtime, ids, options.mode, walFrames(store.db, db.target), sends), server: null };
  } finally {
    await runtime.close();
    await db.dispose();
  }
}

/** The PROGRESS events of one run: the next event's number, and how many sends were not applied. */
interface GroupSends {
  next: number;
  notApplied: number;
}

/**
 * The timed part: send in `mode` until `end` (waves: one send per job at once; steady:
 * STEADY_IN_FLIGHT senders), each send's latency into `latencies`: the sends made, and when the
 * last one returned.
 */
async function sendUntil(runtime: Runtime, ids: string[], mode: GroupMode, start: number, end: number, latencies: Samples, sends: GroupSends): Promise<{ ops: number; last: number }> {
  let ops = 0;
  let last = start;
  if (mode === 'waves') {
    while (last < end) {
      const t0 = performance.now();
      const results = await Promise.all(ids.map((id) => runtime.send(id, progressEvent(sends.next++))));
      last = performance.now();
      for (const r of results) if (r.status !== 'applied') sends.notApplied += 1;
      // Every send of a wave is acknowledged when the wave resolves at the latest; count each from the wave's start.
      for (let k = 0; k < results.length; k += 1) latencies.push(last - t0);
      ops += results.length;
    }
  } else {
    const sender = async (w: number) => {
      const mine = ids.filter((_, k) => k % STEADY_IN_FLIGHT === w);
      let n = 0;
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await runtime.send(mine[n++ % mine.length]!, progressEvent(sends.next++));
        const t1 = performance.now();
        latencies.push(t1 - t0);
        if (r.status !== 'applied') sends.notApplied += 1;
        ops += 1;
        if (t1 > last) last = t1;
      }
    };
    await Promise.all(Array.from({ length: STEADY_IN_FLIGHT }, (_, w) => sender(w)));
  }
  return { ops, last };
}

/**
 * SQLite: WAL frames per transition, after the timed part: checkpoint, stop auto-checkpoints, send
 * the same way for a few batches, and read the WAL's size.
 */
async function walFramesPerSend(runtime: Runtime, ids: string[], mode: GroupMode, wal: ReturnType<typeof walFrames>, sends: GroupSends): Promise<number> {
  wal.start();
  let walOps = 0;
  if (mode === 'waves') {
    for (let w = 0; w < 5; w += 1) walOps += (await Promise.all(ids.map((id) => runtime.send(id, progressEvent(sends.next++))))).length;
  } else {
    await Promise.all(
      Array.from({ length: STEADY_IN_FLIGHT }, async (_, w) => {
        const mine = ids.filter((_, k) => k % STEADY_IN_FLIGHT === w);
        for (let n = 0; n < 15; n += 1) {
          await runtime.send(mine[n % mine.length]!, progressEvent(sends.next++));
          walOps += 1;
        }
      }),
    );
  }
  return wal.frames() / walOps;
}

/**
 * Count WAL frames written from `start()` on: checkpoint (TRUNCATE) and turn auto-checkpoints off,
 * then `frames()` reads the WAL file's size. Used only after the timed part of a run.
 */
export function walFrames(db: { pragma: (source: string) => unknown }, path: string): { start: () => void; frames: () => number } {
  return {
    start: () => {
      db.pragma('wal_checkpoint(TRUNCATE)');
      db.pragma('wal_autocheckpoint = 0');
    },
    frames: () => {
      const size = statSync(`${path}-wal`).size;
      return size <= 32 ? 0 : (size - 32) / (4096 + 24);
    },
  };
}

/** The snapshot JSON the raw limit writes: the same bytes a Spool job of this workload stores. */
export function workloadSnapshot(): (i: number) => string {
  const template = persistedSnapshotTemplate();
  return (i: number) => JSON.stringify({ ...template, context: { ...template.context, progress: i % 101 } });
}
