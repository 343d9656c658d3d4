/**
 * The remote section's runs (bench/remoteSection.ts), each a `spool serve` server (createServer,
 * what the command runs) on loopback in this process over a SQLite file:
 *
 *   throughput   the same backlog drained by a remote worker (`runRemoteWorker`, spool/client)
 *                against the local worker (`runWorker`) on the same store. Enqueued first
 *                (then-drain), c activities at once: the ratio is the price of the HTTP hop per
 *                attempt (a claim, a completion, and the server's drain of the outcome).
 *   light load   jobs started one at a time through the server's HTTP API (the client's `start`)
 *                at a paced rate, run by one remote worker long-polling `/api/workers/claim`, or
 *                by the server's runtime with `runWorker`; per job, the time from the start's
 *                commit (its `job.started` event: the commit that writes the activity's attempt)
 *                to the activity's handler starting.
 */
import { performance } from 'node:perf_hooks';
import { fromPromise, type AnyStateMachine } from 'xstate';
import { createRuntime, runWorker } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { createClient, runRemoteWorker } from '../src/client/index.ts';
import { freshBenchDb } from './benchDb.ts';
import type { JobShape } from './jobsRun.ts';
import { allFinal, metered, producers, type QueueCase, type QueueResult } from './queueRun.ts';
import { Samples } from './stats.ts';

const TOKEN = 'bench-token-0123456789abcdef';

/** Drain `c.backlog` jobs through a remote worker of `c.concurrency` slots (see the file's comment). */
export async function runRemoteQueue(c: QueueCase): Promise<QueueResult> {
  const db = await freshBenchDb(c.store, `queue-remote-${c.shape.name}-${c.synchronous.toLowerCase()}`);
  const id = c.shape.def.machine.id;
  try {
    const enqueuing = await db.openStore(c.synchronous);
    const enqueuer = await createRuntime({ store: enqueuing, machines: [c.shape.def], runEffects: false });
    await producers(c.backlog, (n) => enqueuer.start(id, { n }));
    await enqueuer.close();
    const runtime = await createRuntime({ store: await db.openStore(c.synchronous), machines: [c.shape.def], runEffects: false });
    const server = await createServer({ runtime, port: 0, token: TOKEN });
    try {
      return await metered(db, null, c.backlog, async () => {
        const finals = allFinal(runtime, c.backlog);
        const stop = new AbortController();
        const worker = runRemoteWorker({ url: server.url, token: TOKEN, concurrency: c.concurrency, signal: stop.signal, activities: { work: ({ input }) => (input as { n: number }).n + 1 } });
        await finals.done;
        finals.stop();
        stop.abort();
        await worker;
      });
    } finally {
      await server.close();
      await runtime.close();
    }
  } finally {
    await db.dispose();
  }
}

/** What one light-load run measured: per job, start commit → handler start (ms), and the start's HTTP round trip. */
export interface LatencyResult {
  jobs: number;
  claimToStart: Samples;
  startRoundTrip: Samples;
  /** This process's CPU (server, runtime, worker and producer) per job over the paced part. */
  cpuUsPerJob: number;
}

/**
 * The light load (see the file's comment): `jobs` jobs of `shape` started one at a time at
 * `perSec` through the server, after 20 unmeasured ones; `remote`: run by a remote worker
 * (the server's runtime runs no activities), else by `runWorker` on the server's runtime. SQLite NORMAL.
 */
export async function runClaimLatency(options: { shape: JobShape; perSec: number; jobs: number; remote: boolean }): Promise<LatencyResult> {
  const db = await freshBenchDb('sqlite', `remote-latency-${options.remote ? 'remote' : 'local'}`);
  const committedAt = new Map<number, number>();
  const startedAt = new Map<number, number>();
  const handler = ({ input }: { input: { n: number } }) => {
    startedAt.set(input.n, performance.now());
    return input.n + 1;
  };
  // The shape's machine, its activity stamping when it starts: the same handler runs locally or remotely.
  const machine = (options.shape.def.machine as AnyStateMachine).provide({ actors: { work: fromPromise(async (args) => handler(args as never)) } });
  const def = { ...options.shape.def, machine };
  const warmup = 20;
  const total = warmup + options.jobs;
  try {
    const runtime = await createRuntime({ store: await db.openStore('NORMAL'), machines: [def], runEffects: !options.remote });
    const unsubscribe = runtime.subscribe((e) => void (e.type === 'job.started' && committedAt.set((e.job.context as { n: number }).n, performance.now())));
    const server = await createServer({ runtime, port: 0, token: TOKEN });
    const stop = new AbortController();
    const finals = allFinal(runtime, total);
    const worker = options.remote
      ? runRemoteWorker({ url: server.url, token: TOKEN, signal: stop.signal, activities: { work: handler as never } })
      : runWorker(runtime, { signal: stop.signal });
    const client = createClient({ url: server.url, token: TOKEN });
    const id = options.shape.def.machine.id;
    const startRoundTrip = new Samples();
    try {
      for (let n = 0; n < warmup; n += 1) await client.start(id, { n });
      const cpu0 = process.cpuUsage();
      const interval = 1000 / options.perSec;
      const t0 = performance.now();
      for (let k = 0; k < options.jobs; k += 1) {
        const wait = t0 + k * interval - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const sent = performance.now();
        await client.start(id, { n: warmup + k });
        startRoundTrip.push(performance.now() - sent);
      }
      await finals.done;
      const cpu = process.cpuUsage(cpu0);
      const claimToStart = new Samples();
      for (let n = warmup; n < total; n += 1) claimToStart.push(startedAt.get(n)! - committedAt.get(n)!);
      return { jobs: options.jobs, claimToStart, startRoundTrip, cpuUsPerJob: (cpu.user + cpu.system) / options.jobs };
    } finally {
      finals.stop();
      unsubscribe();
      stop.abort();
      await worker;
      await server.close();
      await runtime.close();
    }
  } finally {
    await db.dispose();
  }
}
