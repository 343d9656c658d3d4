/**
 * A worker process of the crash harness: `workerChild.ts <db> <pollMs>`.
 *
 * It starts as a standby: Node and every module are loaded, but the database is not touched
 * until the harness writes `go` on stdin (so the next worker can be spawned while the current one
 * runs; with N slots, N workers are on the file at once). Then it opens the store and a
 * runtime with recovery deferred, prints {type:'ready', pid}, recovers and runs `runWorker` on the
 * real clock until SIGTERM (graceful: prints {type:'stopped'}, exits 0) or until it is killed.
 * Closing its stdin (the harness is gone) makes it exit too, so no worker outlives its harness.
 *
 * Every line is printed after the fact it reports is committed (stdout is a pipe: synchronous on
 * Linux, so a line written before a SIGKILL still reaches the harness):
 *   {type:'timer', timerId, jobId}                 a timer moved into its job's inbox
 *   {type:'attempt', effectId, attempt}            an activity attempt claimed
 *   {type:'finished', effectId, attempt, outcome}  an attempt's outcome recorded
 *   {type:'commit', jobId, revision, final}        a transition committed
 *   {type:'log', level, msg, error}                the runtime logged an error
 * Crash points are armed by the harness through SPOOL_CRASH_AT. With SPOOL_CRASH_ASYNC_SEED set
 * (`--async-store`), the worker's store is behind the asynchronous boundary of the `async-store`
 * test project (test/helpers/asyncStore.ts), its hops drawn from that seed.
 */
import { createInterface } from 'node:readline';
import { createRuntime, rideOutFaults, runWorker, type RuntimeEvent } from '../../src/index.ts';
import { openStore } from '../../persistence/openStore.ts';
import { CRASH_MACHINES } from './machines.ts';
import { asyncStore } from '../helpers/asyncStore.ts';

const [dbPath, pollText] = process.argv.slice(2);
if (!dbPath) throw new Error('usage: workerChild.ts <db file or postgres:// URL> [pollMs]');

const print = (msg: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(msg)}\n`);

await new Promise<void>((resolve) => {
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (line.trim() === 'go') resolve();
  });
  rl.on('close', () => process.exit(0));
});

function summary(e: RuntimeEvent): Record<string, unknown> | undefined {
  switch (e.type) {
    case 'timer.fired':
      return { type: 'timer', timerId: e.timerId, jobId: e.jobId };
    case 'activity.started':
      return { type: 'attempt', effectId: e.effectId, attempt: e.attempt };
    case 'activity.finished':
      return { type: 'finished', effectId: e.effectId, attempt: e.attempt, outcome: e.outcome };
    case 'job.committed':
      return { type: 'commit', jobId: e.job.id, revision: e.job.revision, final: e.job.final };
    default:
      return undefined;
  }
}

const asyncSeed = process.env['SPOOL_CRASH_ASYNC_SEED'];
const controller = new AbortController();
process.on('SIGTERM', () => controller.abort());
// Opening and recovery ride out a retryable fault (the server restarting) for as long as it lasts, as `spool worker` does.
const opened = await rideOutFaults(() => openStore(dbPath), { signal: controller.signal });
const store = asyncSeed === undefined ? opened : asyncStore(opened, { seed: Number(asyncSeed) });
const runtime = await createRuntime({
  store,
  machines: CRASH_MACHINES,
  recover: false,
  log: (entry) => {
    if (entry.level === 'error') print({ type: 'log', level: entry.level, msg: entry.msg, error: entry['error'] ?? null });
  },
});
runtime.subscribe((e) => {
  const line = summary(e);
  if (line) print(line);
});
print({ type: 'ready', pid: process.pid });
await rideOutFaults(() => runtime.recover(), { signal: controller.signal });
await runWorker(runtime, { signal: controller.signal, pollMs: Number(pollText ?? 10) });
await runtime.close();
print({ type: 'stopped' });
process.exit(0);
