/**
 * The `spool` commands that run work: `worker` (activities, retries and timers until a signal)
 * and `demo`.
 */
import { Option, type Command } from 'commander';
import { runWorker, type LogEntry, type RuntimeEvent, type StorageFaultEvent } from '../index.ts';
import { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import type { OpenedStore } from '../../persistence/openStore.ts';
import { describeWork, runDemo } from './demo.ts';
import { listenForDemo, serveDemo } from './demoServe.ts';
import { UsageError } from './errors.ts';
import { formatState, jsonText, oneLine } from './format.ts';
import { redactKeys } from '../views/redacted.ts';
import { paintError, paintOutcome } from './style.ts';
import { describeScheduleEvent } from './schedule.ts';
import { checkAtStart } from './doctor.ts';
import { onShutdownSignals } from './signals.ts';
import { addServeOptions, checkServeFlags, startServer, type ServeFlags } from './serve.ts';
import { commandPrefix, examples, globals, type CliIO } from './globals.ts';
import { withRuntime } from './withRuntime.ts';
import { runRemoteWorkerCommand } from './remoteWorker.ts';

/** The options of `spool worker`, as commander parses them. */
type WorkerOptions = { pollMs: string; graceMs: string; leaseMs: string; concurrency: string; log?: 'json'; activityConcurrency?: string; serve?: boolean; server?: string } & ServeFlags;

/** `--poll-ms`, `--grace-ms`, `--lease-ms`, `--concurrency`, each checked against its range. */
function workerNumbers(options: WorkerOptions): { pollMs: number; graceMs: number; leaseMs: number; concurrency: number } {
  const pollMs = Number(options.pollMs);
  if (!Number.isInteger(pollMs) || pollMs < 10 || pollMs > 60_000) throw new UsageError('--poll-ms must be an integer from 10 to 60000.');
  const graceMs = Number(options.graceMs);
  if (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > 3_600_000) throw new UsageError('--grace-ms must be an integer from 0 to 3600000.');
  const leaseMs = Number(options.leaseMs);
  if (!Number.isInteger(leaseMs) || leaseMs < 1000 || leaseMs > 3_600_000) throw new UsageError('--lease-ms must be an integer from 1000 to 3600000.');
  const concurrency = Number(options.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024) throw new UsageError('--concurrency must be an integer from 1 to 1024.');
  return { pollMs, graceMs, leaseMs, concurrency };
}

/** `spool worker`: run activities, retries and timers until SIGINT/SIGTERM. */
export function addWorkerCommand(program: Command, io: CliIO): void {
  addServeOptions(program
    .command('worker')
    .description('run activities, retries and timers until SIGINT/SIGTERM, printing what happens; --serve also serves the HTTP API')
    .addHelpText('after', examples('spool worker', 'spool --machines ./my-machines.ts worker --concurrency 16 --serve', 'spool worker --log json'))
    .option('--serve', 'also serve the HTTP API and event streams (see `spool serve --help`)'))
    .option('--server <url>', "run the activities against a remote `spool serve` at this address instead of a database (with --token: a worker token); see docs/remote-workers.md")
    .option('--poll-ms <ms>', 'how often to look for work from other processes', '250')
    .option('--grace-ms <ms>', 'on SIGINT/SIGTERM: how long running activities may finish before they are aborted', '10000')
    .option('--lease-ms <ms>', "how long this worker's lease on a job lasts without renewal; a crashed worker's jobs are taken over once it expires", '30000')
    .option('--concurrency <n>', 'activities this worker runs at once; the claims of one round, and outcomes that arrive together, share a disk sync', '8')
    .option('--activity-concurrency <limits>', 'attempts of an activity run at once by this worker, e.g. charge=2,ship=1 (the rest wait in the database)')
    .addOption(new Option('--log <format>', 'print structured logs instead: one JSON object per lifecycle event, sensitive fields redacted').choices(['json']))
    .action(async (options: WorkerOptions, command: Command) => {
      const g = globals(command);
      if (options.serve) checkServeFlags(options);
      const { pollMs, graceMs, leaseMs, concurrency } = workerNumbers(options);
      if (options.server !== undefined) {
        if (options.serve) throw new UsageError('--server runs against a remote server: it cannot --serve too.');
        return runRemoteWorkerCommand(g, io, { server: options.server, token: options.token, concurrency, graceMs });
      }
      const logJson = options.log === 'json';
      const logLine = (entry: LogEntry, sensitive: ReadonlySet<string>) => io.stdout(`${JSON.stringify(redactKeys(entry, sensitive))}\n`);
      // Installed until the runtime has closed, so that a second signal during the grace period exits at once (signals.ts).
      const controller = new AbortController();
      const releaseSignals = onShutdownSignals({
        first: (signal) => {
          io.stderr(`spool worker: ${signal}: claiming no new work; running activities may finish for ${graceMs} ms, then close (again to exit at once)\n`);
          controller.abort();
        },
        second: (signal, code) =>
          io.stderr(`spool worker: second ${signal}: exiting now with code ${code}, without waiting for running activities; the next worker takes them over\n`),
      });
      try {
        const activityConcurrency = options.activityConcurrency === undefined ? undefined : parseActivityLimits(options.activityConcurrency);
        // The cheap doctor check first: a damaged file stops the worker before it touches anything.
        const atOpen = (store: OpenedStore) =>
          store instanceof SqliteStore &&
          void checkAtStart(store, g.db, (json, human) =>
            io.stdout(logJson ? `${JSON.stringify({ level: 'warn', msg: 'damaged job rows', ...json })}\n` : g.json ? `${JSON.stringify(json)}\n` : `${human}\n`),
          );
        const rideOut = { signal: controller.signal, onFault: openFaultTeller(g.db, logJson, io) };
        const runOptions = { create: true, mode: 'run', effects: true, graceMs, leaseMs, concurrency, atOpen, rideOut } as const;
        await withRuntime(g, io, { ...runOptions, ...(activityConcurrency ? { activityConcurrency } : {}), ...(logJson ? { log: logLine } : {}) }, async (runtime) => {
          const unsubscribe = runtime.subscribe((event) => {
            if (logJson) return; // the log lines say it
            if (event.type === 'storage.fault' && !g.json) {
              io.stderr(`${new Date(runtime.clock.now()).toISOString()} spool worker: ${event.message} (${event.code}, fault ${event.attempt} in a row); trying again in ${event.retryInMs} ms\n`);
              return;
            }
            if (g.json) {
              io.stdout(`${JSON.stringify({ at: runtime.clock.now(), ...summarise(event) })}\n`);
              return;
            }
            const line = describeWork(event) ?? describeCommit(event) ?? describeScheduleEvent(event);
            if (line !== undefined) io.stdout(`${new Date(runtime.clock.now()).toISOString()} ${line.trim()}\n`);
          });
          // As SQLite reports it on this connection, not as asked.
          const synchronous = runtime.store instanceof SqliteStore ? runtime.store.synchronous : g.synchronous;
          const ready = { db: g.db, runner: runtime.runnerId, pid: process.pid, synchronous, concurrency };
          if (logJson) io.stdout(`${JSON.stringify({ at: runtime.clock.now(), level: 'info', msg: 'worker started', ...ready })}\n`);
          else if (!g.json) io.stdout(`spool worker on ${g.db} (runner ${runtime.runnerId}, ${concurrency} activities at once, synchronous ${synchronous}); Ctrl-C to stop\n`);
          else io.stdout(`${JSON.stringify({ type: 'worker.ready', ...ready })}\n`);
          // Recovery on open ran before anyone listened: say what it held back.
          const held = await runtime.list({ quarantined: true, limit: 101 });
          if (held.length > 0 && !g.json && !logJson) {
            io.stdout(`${held.length > 100 ? 'over 100' : held.length} quarantined job(s) held back (their machine version is not in this module, or no longer fits): \`spool list --quarantined\` says why\n`);
          }
          const server = options.serve ? await startServer(runtime, options, (json, human) => io.stdout(g.json || logJson ? `${JSON.stringify(json)}\n` : `${human}\n`)) : undefined;
          try {
            await runWorker(runtime, { signal: controller.signal, pollMs });
            await server?.close();
            // The grace period, still printing what finishes in it (withRuntime's close is then a no-op).
            await runtime.close({ graceMs });
          } finally {
            unsubscribe();
            await server?.close();
          }
          if (logJson) io.stdout(`${JSON.stringify({ at: runtime.clock.now(), level: 'info', msg: 'worker stopped', runner: runtime.runnerId })}\n`);
          else if (!g.json) io.stdout('spool worker: stopped\n');
        });
      } finally {
        releaseSignals();
      }
    });
}

/** `spool demo`: run the demo jobs to their ends, then (on a terminal, or with --serve) serve the dashboard until Ctrl-C. */
export function addDemoCommand(program: Command, io: CliIO): void {
  addServeOptions(
    program
      .command('demo')
      .description(
        'run eight jobs to their ends, printing each step: four job-lifecycle jobs driven by events, then four run by the worker loop; ' +
          'then, on a terminal, serve the dashboard and run a worker until Ctrl-C (what `npm start` runs)',
      )
      .addHelpText('after', examples('spool demo', 'spool demo --no-serve', 'spool --db /tmp/demo.db demo --serve --port 0'))
      .option('--serve', 'after the jobs, serve the dashboard and the HTTP API until Ctrl-C (the default when stdout is a terminal)')
      .option('--no-serve', 'run the jobs and exit (the default when stdout is not a terminal, as in scripts and tests)'),
  ).action(async (options: ServeFlags & { serve?: boolean }, command: Command) => {
    const g = globals(command);
    const serve = options.serve ?? (io.interactive === true && !g.json);
    if (serve) checkServeFlags(options);
    await withRuntime(g, io, { create: true, mode: 'run', needs: 'job-lifecycle', effects: true }, async (runtime) => {
      const print = (line: string) => io.stdout(`${line}\n`);
      // Listening first: a taken port stops the demo before it writes anything.
      const listening = serve ? await listenForDemo(runtime, options, command.getOptionValueSource('port') !== 'default', g.json ? undefined : print) : undefined;
      try {
        const jobs = await runDemo(runtime, { print: g.json ? () => {} : print, dbLabel: g.db, commandPrefix: commandPrefix(g) });
        if (g.json) io.stdout(`${jsonText({ db: g.db, jobs }, 2)}\n`);
        if (listening === undefined) return;
        const json = g.json ? { json: (value: Record<string, unknown>) => io.stdout(`${jsonText(value)}\n`) } : {};
        await serveDemo(runtime, listening, { print, ...json, stderr: io.stderr });
      } finally {
        await listening?.close();
      }
    });
  });
}

/** A runtime event as one JSON line: jobs by id, not whole. */
function summarise(event: RuntimeEvent): Record<string, unknown> {
  if (event.type === 'job.committed') {
    const t = event.transition;
    return { type: event.type, jobId: event.job.id, revision: t.revision, event: t.eventType, outcome: t.outcome, from: t.from, to: t.to, final: event.job.final };
  }
  if (event.type === 'job.started') return { type: event.type, jobId: event.job.id, machine: event.job.machineId, state: event.job.value };
  return { ...event };
}

function describeCommit(event: RuntimeEvent): string | undefined {
  if (event.type === 'job.started') return `${event.job.id} started ${event.job.machineId}@${event.job.machineVersion} in ${formatState(event.job.value)}`;
  if (event.type !== 'job.committed') return undefined;
  const t = event.transition;
  const move = t.from === null ? formatState(t.to) : `${formatState(t.from)} -> ${formatState(t.to)}`;
  const why = t.error ? ` (${t.error.code ?? t.error.name}: ${oneLine(t.error.message)})` : '';
  return `${event.job.id} rev ${t.revision} ${t.eventType} ${paintOutcome(t.outcome)}${why && paintError(why)}: ${move}${event.job.final ? ` (ended ${event.job.status})` : ''}`;
}

/** Tells once per kind of fault (its code) that the worker cannot open `db` yet and keeps trying (on stderr; a warn line with --log json). */
function openFaultTeller(db: string, logJson: boolean, io: CliIO): (fault: StorageFaultEvent) => void {
  const told = new Set<string>();
  return (fault) => {
    if (told.has(fault.code)) return;
    told.add(fault.code);
    if (logJson) io.stdout(`${JSON.stringify({ at: Date.now(), level: 'warn', msg: 'cannot open the database yet; retrying', db, code: fault.code, error: fault.message })}\n`);
    else io.stderr(`spool worker: cannot open ${db} yet: ${oneLine(fault.message)} (${fault.code}); retrying\n`);
  };
}

/** `--activity-concurrency charge=2,ship=1`: attempts of each named activity at once. */
function parseActivityLimits(text: string): Record<string, number> {
  const limits: Record<string, number> = {};
  for (const part of text.split(',')) {
    const m = /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(part);
    if (!m) throw new UsageError(`--activity-concurrency takes name=count pairs separated by commas, e.g. charge=2,ship=1; got "${part}".`);
    limits[m[1]!] = Number(m[2]);
  }
  return limits;
}
