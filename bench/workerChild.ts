/**
 * The `workers` section's child process: open the bench database (a SQLite file at synchronous
 * FULL, the default, or a Postgres URL, through the CLI's opener), createRuntime with the
 * bench-work machine (and the given maxConcurrentActivities), print one `ready` JSON line, then
 * `runWorker` with its default poll (250 ms, as `spool worker`; `SPOOL_BENCH_POLL_MS` sets another) until SIGTERM; close and print one `stopped` JSON line with this
 * process's CPU time from ready to stop.
 *
 *   node --import tsx bench/workerChild.ts <db path or postgres:// URL> [maxConcurrentActivities]
 */
import { performance } from 'node:perf_hooks';
import { createRuntime, runWorker } from '../src/index.ts';
import { openStore } from '../persistence/openStore.ts';
import { benchWork } from './workerMachines.ts';

const path = process.argv[2];
if (!path) {
  console.error('usage: workerChild.ts <db path or postgres:// URL>');
  process.exit(2);
}

const controller = new AbortController();
process.on('SIGTERM', () => controller.abort());
process.on('SIGINT', () => controller.abort());

const store = await openStore(path);
// SPOOL_BENCH_NO_WATCH=1: no LISTEN/NOTIFY wake-ups (polling only), to see what they cost or save.
if (process.env['SPOOL_BENCH_NO_WATCH'] === '1') (store as { watchChanges?: unknown }).watchChanges = undefined;
const concurrency = process.argv[3] === undefined ? undefined : Number(process.argv[3]);
// The defaults, as `spool worker [--concurrency N]` would open.
const runtime = await createRuntime({ store, machines: [benchWork], ...(concurrency === undefined ? {} : { maxConcurrentActivities: concurrency }) });
const cpu0 = process.cpuUsage();
process.stdout.write(`${JSON.stringify({ type: 'ready', pid: process.pid, atMs: performance.now() })}\n`);
let rounds = 0;
let activitiesStarted = 0;
await runWorker(runtime, {
  ...(process.env['SPOOL_BENCH_POLL_MS'] === undefined ? {} : { pollMs: Number(process.env['SPOOL_BENCH_POLL_MS']) }),
  signal: controller.signal,
  onRound: (r) => {
    rounds += 1;
    activitiesStarted += r.activitiesStarted;
  },
});
const cpu = process.cpuUsage(cpu0);
await runtime.close();
process.stdout.write(`${JSON.stringify({ type: 'stopped', pid: process.pid, rounds, activitiesStarted, cpuUs: cpu.user + cpu.system })}\n`);
