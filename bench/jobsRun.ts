/**
 * Section 2, jobs per second: whole jobs from `start` to a final state, one after another and
 * with many in flight, with latency from each call to its durable acknowledgement.
 *
 *   one-step:   approval-flow  start (schedules its reminder and deadline timers) + APPROVE → approved
 *   three-step: job-lifecycle  start { items: 2 } + START + ITEM_DONE + ITEM_DONE → completed
 *
 * Each `start` / `send` resolves after the commit that holds it, so its latency is the time to a
 * durable acknowledgement. Concurrent: 64 job chains in flight, each running its jobs' steps in
 * order. The store is wrapped to count commits per `store.commit` call.
 */
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { performance } from 'node:perf_hooks';
import { createRuntime, type Runtime } from '../src/index.ts';
import { SqliteStore } from '../persistence/sqlite/index.ts';
import { approvalFlow, jobLifecycle } from '../machines/index.ts';
import { countingStore, StoreCounter, type BatchSummary } from './countingStore.ts';
import type { Synchronous } from './rawRun.ts';
import { Samples } from './stats.ts';
import { freshDbPath } from './tempDb.ts';

export const JOBS_IN_FLIGHT = 64;

export interface JobShape {
  name: 'one-step' | 'three-step';
  description: string;
  /** Events after start. */
  steps: number;
  run: (runtime: Runtime, n: number, ops: Samples) => Promise<void>;
  /** Persisted snapshots of this machine (a context number varies with i), for the raw limit to write the same bytes. */
  snapshot: () => (i: number) => string;
}

async function timed<T>(ops: Samples, work: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const r = await work();
  ops.push(performance.now() - t0);
  return r;
}

function persisted(machine: AnyStateMachine, input: unknown, events: { type: string }[], field: string): (i: number) => string {
  let [s] = initialTransition(machine, input) as [AnyMachineSnapshot, unknown[]];
  for (const e of events) [s] = transition(machine, s, e) as [AnyMachineSnapshot, unknown[]];
  const template = JSON.parse(JSON.stringify(machine.getPersistedSnapshot(s))) as { context: Record<string, unknown> };
  return (i) => JSON.stringify({ ...template, context: { ...template.context, [field]: i % 101 } });
}

const APPROVAL_INPUT = { subject: 'bench approval', remindAfterMs: 86_400_000, deadlineMs: 3 * 86_400_000 };
const LIFECYCLE_INPUT = { name: 'bench job', items: 2 };

export const JOB_SHAPES: readonly JobShape[] = [
  {
    name: 'one-step',
    description: 'approval-flow: start (2 timers) + APPROVE → approved',
    steps: 1,
    run: async (runtime, n, ops) => {
      const job = await timed(ops, () => runtime.start('approval-flow', APPROVAL_INPUT));
      const r = await timed(ops, () => runtime.send(job.id, { type: 'APPROVE', by: `u${n}` }));
      if (r.status !== 'applied' || !r.job.final) throw new Error(`jobs bench: approval ${job.id} ended ${r.status} in ${JSON.stringify(r.job.value)}`);
    },
    snapshot: () => persisted(approvalFlow.machine, APPROVAL_INPUT, [], 'reminders'),
  },
  {
    name: 'three-step',
    description: 'job-lifecycle {items: 2}: start + START + ITEM_DONE ×2 → completed',
    steps: 3,
    run: async (runtime, _n, ops) => {
      const job = await timed(ops, () => runtime.start('job-lifecycle', LIFECYCLE_INPUT));
      for (const type of ['START', 'ITEM_DONE', 'ITEM_DONE'] as const) {
        const r = await timed(ops, () => runtime.send(job.id, { type }));
        if (r.status !== 'applied') throw new Error(`jobs bench: ${type} to ${job.id} was ${r.status}`);
        if (type === 'ITEM_DONE' && r.job.final && r.job.value !== 'completed') throw new Error(`jobs bench: ${job.id} ended in ${JSON.stringify(r.job.value)}`);
      }
      const end = await runtime.get(job.id);
      if (end.value !== 'completed') throw new Error(`jobs bench: ${job.id} ended in ${JSON.stringify(end.value)}, expected completed`);
    },
    snapshot: () => persisted(jobLifecycle.machine, LIFECYCLE_INPUT, [{ type: 'START' }], 'progress'),
  },
];

export interface SpoolJobsResult {
  jobsPerSec: number;
  /** Durable acknowledgements (start + sends) per second. */
  opsPerSec: number;
  jobs: number;
  seconds: number;
  /** start/send call → durable acknowledgement. */
  opLatencies: Samples;
  /** start call → the acknowledgement of the event that made the job final. */
  jobLatencies: Samples;
  batches: BatchSummary;
  /** Store calls per job, by method. */
  storeCallsPerJob: Record<string, { calls: number; us: number }>;
  /** This process's CPU time (user + system) per job. */
  cpuUsPerJob: number;
}

export async function runSpoolJobs(options: { synchronous: Synchronous; durationMs: number; shape: JobShape; concurrency: number; warmupJobs?: number }): Promise<SpoolJobsResult> {
  const tmp = freshDbPath(`jobs-${options.shape.name}-${options.synchronous.toLowerCase()}`);
  const store = await SqliteStore.open(tmp.path, { synchronous: options.synchronous });
  const counter = new StoreCounter();
  const runtime = await createRuntime({ store: countingStore(store, counter), machines: [approvalFlow, jobLifecycle] });
  try {
    let n = 0;
    const scratch = new Samples();
    const warm = options.warmupJobs ?? Math.max(50, options.concurrency * 2);
    const chain = async (count: number) => {
      for (let k = 0; k < count; k += 1) await options.shape.run(runtime, n++, scratch);
    };
    await Promise.all(Array.from({ length: options.concurrency }, () => chain(Math.ceil(warm / options.concurrency))));

    counter.reset();
    const opLatencies = new Samples();
    const jobLatencies = new Samples();
    let jobs = 0;
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const end = start + options.durationMs;
    let last = start;
    const worker = async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await options.shape.run(runtime, n++, opLatencies);
        const t1 = performance.now();
        jobLatencies.push(t1 - t0);
        jobs += 1;
        if (t1 > last) last = t1;
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, () => worker()));
    const seconds = (last - start) / 1000;
    const cpu = process.cpuUsage(cpu0);
    return {
      jobsPerSec: jobs / seconds,
      opsPerSec: (jobs * (options.shape.steps + 1)) / seconds,
      jobs,
      seconds,
      opLatencies,
      jobLatencies,
      batches: counter.batchSummary(),
      storeCallsPerJob: counter.perUnit(jobs),
      cpuUsPerJob: (cpu.user + cpu.system) / jobs,
    };
  } finally {
    await runtime.close();
    tmp.dispose();
  }
}
