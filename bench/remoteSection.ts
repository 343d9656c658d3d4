/**
 * The remote section (`npm run bench -- --only remote`; issue 30): remote activity workers
 * (spool/client's `runRemoteWorker` through a server on loopback, bench/remoteRun.ts) against
 * the local worker (`runWorker`), in the same run, SQLite NORMAL, the 1-step job:
 *
 *   throughput   a backlog (500 with --quick, else 1k) drained c16 then-drain: jobs/s, their ratio, CPU per job
 *   light load   300 jobs (--quick 150) started one at a time through the server at 50/s: p50/p99
 *                of the start's commit → the activity's handler starting, and CPU per job
 */
import { JOB_SHAPES, type JobShape } from './jobsRun.ts';
import { runSpoolQueue, type QueueMode } from './queueRun.ts';
import { runClaimLatency, runRemoteQueue } from './remoteRun.ts';
import { fmtMs, fmtRate, hostLoad, loadNow, printLoadNote, printTable, round } from './format.ts';
import type { SectionContext } from './sections.ts';
import { latencySummary } from './stats.ts';

const LIGHT_PER_SEC = 50;

export async function remoteSection(ctx: SectionContext) {
  const load0 = loadNow();
  const shape = JOB_SHAPES.find((s) => s.steps === 1)!;
  console.log(`\n== Remote workers: runRemoteWorker through a server on loopback vs runWorker, SQLite NORMAL, ${shape.name}`);
  const throughput = await throughputLine(ctx, shape, ctx.quick ? 500 : 1000);
  const lightLoad = await lightLoadLine(ctx, shape, ctx.quick ? 150 : 300);
  const load = hostLoad(load0);
  printLoadNote(load);
  return {
    method: {
      throughput: 'then-drain c16: the backlog enqueued first, then drained by runRemoteWorker through createServer on 127.0.0.1 (same process) or by runWorker; first claim → last final commit',
      lightLoad: `jobs started one at a time by the client's start (HTTP) at ${LIGHT_PER_SEC}/s after 20 unmeasured; per job, the start's commit (its job.started event, the commit that writes the activity's attempt) → the activity handler starting; the remote worker long-polls /api/workers/claim`,
      cpu: 'process.cpuUsage() per job: server, runtime, worker and producer are one process',
    },
    throughput,
    lightLoad,
    hostLoad: load,
  };
}

/** Remote worker vs local worker draining a backlog: the 1-step job, c16, then-drain; jobs/s of each and their ratio. */
async function throughputLine(ctx: SectionContext, shape: JobShape, backlog: number) {
  const k = { store: 'sqlite' as const, synchronous: 'NORMAL' as const, shape, concurrency: 16, backlog, mode: 'then-drain' as QueueMode };
  ctx.gc();
  const local = await runSpoolQueue(k);
  ctx.gc();
  const remote = await runRemoteQueue(k);
  const ratio = round(remote.jobsPerSec / local.jobsPerSec);
  console.log(`  throughput (c16 then-drain, ${backlog} jobs): remote ${fmtRate(remote.jobsPerSec)} vs local ${fmtRate(local.jobsPerSec)} jobs/s, ratio ${ratio}; CPU ${Math.round(remote.cpuUsPerJob)} vs ${Math.round(local.cpuUsPerJob)} µs/job`);
  return { backlog, job: shape.name, concurrency: 16, localJobsPerSec: round(local.jobsPerSec), remoteJobsPerSec: round(remote.jobsPerSec), ratio, localCpuUsPerJob: round(local.cpuUsPerJob), remoteCpuUsPerJob: round(remote.cpuUsPerJob) };
}

/** The claim-to-start latency at light load, remote and local (bench/remoteRun.ts `runClaimLatency`). */
async function lightLoadLine(ctx: SectionContext, shape: JobShape, jobs: number) {
  const rows = [];
  for (const remote of [true, false]) {
    ctx.gc();
    const r = await runClaimLatency({ shape, perSec: LIGHT_PER_SEC, jobs, remote });
    const latency = latencySummary([r.claimToStart]);
    const roundTrip = latencySummary([r.startRoundTrip]);
    rows.push({ worker: remote ? 'remote' : 'local', jobs, perSec: LIGHT_PER_SEC, claimToStart: latency, startRoundTripP50Ms: roundTrip.p50Ms, cpuUsPerJob: round(r.cpuUsPerJob, 0) });
  }
  console.log(`\n  light load: ${jobs} jobs started one at a time through the server at ${LIGHT_PER_SEC}/s; the start's commit → the activity handler starting`);
  printTable(
    ['worker', 'p50', 'p99', 'max', 'start round trip p50', 'CPU µs/job'],
    rows.map((r) => [r.worker, fmtMs(r.claimToStart.p50Ms), fmtMs(r.claimToStart.p99Ms), fmtMs(r.claimToStart.maxMs), fmtMs(r.startRoundTripP50Ms), String(r.cpuUsPerJob)]),
  );
  return rows;
}
