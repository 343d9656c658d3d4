/**
 * The `workers` section's child process: open the bench database (SqliteStore, synchronous FULL,
 * the default), createRuntime with the bench-work machine (and the given maxConcurrentActivities), print one `ready` JSON line, then
 * `runWorker` with pollMs 20 until SIGTERM; close and print one `stopped` JSON line.
 *
 *   node --import tsx bench/workerChild.ts <db path> [maxConcurrentActivities]
 */
import { performance } from 'node:perf_hooks';
import { createRuntime, runWorker } from '../src/index.ts';
import { SqliteStore } from '../persistence/sqlite/index.ts';
import { benchWork } from './workerMachines.ts';

const path = process.argv[2];
if (!path) {
  console.error('usage: workerChild.ts <db path>');
  process.exit(2);
}

const controller = new AbortController();
process.on('SIGTERM', () => controller.abort());
process.on('SIGINT', () => controller.abort());

const store = await SqliteStore.open(path);
const concurrency = process.argv[3] === undefined ? undefined : Number(process.argv[3]);
// The defaults, as `spool worker [--concurrency N]` would open.
const runtime = await createRuntime({ store, machines: [benchWork], ...(concurrency === undefined ? {} : { maxConcurrentActivities: concurrency }) });
process.stdout.write(`${JSON.stringify({ type: 'ready', pid: process.pid, atMs: performance.now() })}\n`);
let rounds = 0;
let activitiesStarted = 0;
await runWorker(runtime, {
  pollMs: 20,
  signal: controller.signal,
  onRound: (r) => {
    rounds += 1;
    activitiesStarted += r.activitiesStarted;
  },
});
await runtime.close();
process.stdout.write(`${JSON.stringify({ type: 'stopped', pid: process.pid, rounds, activitiesStarted })}\n`);
