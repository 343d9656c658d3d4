/**
 * The `spool` command: start jobs, send them events, and look at them, on a SQLite file.
 * A client of the public API only; `bin/spool.js` loads it through tsx, so TypeScript machine
 * modules run without a build step.
 *
 * @example
 * spool start job-lifecycle --input '{"name":"resize","items":2}' --id resize-1
 * spool send resize-1 START
 * spool send resize-1 '{"type":"ITEM_FAILED","reason":"timeout"}' --event-id webhook-7
 * spool show resize-1 --json
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolve } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import {
  JOB_STATUSES,
  MachineRegistry,
  SpoolError,
  createRuntime,
  runWorker,
  type Job,
  type JobDetails,
  type JobStatus,
  type ListFilter,
  type LogEntry,
  type RegisteredMachine,
  type Runtime,
  type RuntimeEvent,
  type RuntimeStats,
  type SendResult,
} from '../index.ts';
import { SqliteStore } from '../../persistence/sqlite/index.ts';
import { describeWork, runDemo } from './demo.ts';
import { BadJsonArgumentError, DatabaseError, UsageError, argumentText, firstLine, parseJsonArgument, parseJsonText } from './errors.ts';
import { formatBlock, formatJson, formatState, formatTime, keyValues, table } from './format.ts';
import { knowsMachine, redactDetails, redactJob, redactKeys, sensitiveKeys } from '../views/redacted.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { parseDuration } from './duration.ts';
import { addScheduleCommands, describeScheduleEvent } from './schedule.ts';
import { addDoctorCommand, checkAtStart } from './doctor.ts';
import { onShutdownSignals } from './signals.ts';
import { addGraphCommand } from './graph.ts';
import { addTailCommand } from './tail.ts';
import { addServeCommand, addServeOptions, checkServeFlags, startServer, type ServeFlags } from './serve.ts';
import { collectPathTests, isPathTestSubject, runPathTests, type MachinePathResult, type PathTestProgress } from '../testing/runPathTests.ts';

/** Where the command writes, and what it resolves relative paths against. Default: the process's. */
export interface CliIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
}

interface ListOptions {
  machine?: string;
  state?: string;
  status?: JobStatus;
  quarantined?: boolean;
  exhausted?: boolean;
  cancelRequested?: boolean;
  suspended?: boolean;
  stuck?: boolean;
  limit?: string;
  after?: string;
}

/** Global options, shared by every command. */
interface GlobalOptions {
  /** Default `./spool.db`. */
  db: string;
  /** Default: the project's `machines/index.ts`. */
  machines?: string;
  json?: boolean;
  /** Tenant scope: the runtime sees only this owner's jobs. Default: unscoped. */
  owner?: string;
  /** `--max-backlog`: backpressure on start and send (the runtime's `maxBacklog`). Default 100000. */
  maxBacklog?: string;
  /** `--synchronous`: FULL (default: an acknowledged write survives power loss) or NORMAL (survives a process crash only). */
  synchronous: 'FULL' | 'NORMAL';
}

/** A bare event type accepted in place of JSON: `START` means `{"type":"START"}`. */
const EVENT_TYPE_SHORTHAND = /^[A-Za-z_][A-Za-z0-9_.:-]*$/;

const processIO: CliIO = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  cwd: process.cwd(),
};

/**
 * Run the command line `args` (without `node` and the script) and resolve with the exit code.
 * Errors are reported on `io.stderr` as one line (or one JSON object with `--json`); nothing throws.
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2));
 */
export async function main(args: readonly string[], io: CliIO = processIO): Promise<number> {
  const wantsJson = args.includes('--json');
  try {
    let code = 0;
    await buildProgram(io, (c) => (code = c)).parseAsync([...args], { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0) return 0;
      if (error.code === 'commander.help') return error.exitCode || 1;
      const message = error.message.replace(/^error: /, '');
      return report(new UsageError(`${message.replace(/\.?$/, '.')} See \`spool --help\`.`), wantsJson, io);
    }
    return report(error, wantsJson, io);
  }
}

/** `setExitCode`: a command that finished its output but failed (a test run with gaps) reports it here. */
function buildProgram(io: CliIO, setExitCode: (code: number) => void): Command {
  const program = new Command('spool')
    .description('Durable XState jobs on SQLite: start jobs, send them events, inspect their history.')
    .version(readVersion(), '--version')
    .option('--db <file>', 'SQLite database file', './spool.db')
    .option('--machines <module>', 'a .ts or .js module exporting your machines (default: the bundled machines/index.ts)')
    .option('--json', 'print one JSON document on stdout (errors: one JSON object on stderr)')
    .option('--owner <id>', "tenant scope: see and start only this owner's jobs (another owner's job reads like a missing one)")
    .option('--max-backlog <n>', 'refuse start and send (SPOOL_BACKPRESSURE, nothing written) while n events wait to be applied (default 100000)')
    .addOption(
      new Option('--synchronous <mode>', 'FULL: an acknowledged write survives power loss; NORMAL: faster, survives a crash of the process but not of the machine')
        .choices(['FULL', 'NORMAL'])
        .default('FULL'),
    )
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      // Commander's own error text is reported by main(), as one line in Spool's format.
      outputError: () => {},
    })
    .showSuggestionAfterError(true)
    .addHelpText(
      'after',
      `
Events are JSON ('{"type":"PROGRESS","percent":40}') or a bare event type (START).

Examples:
  spool demo
  spool start job-lifecycle --input '{"name":"resize","items":2}' --id resize-1
  spool send resize-1 START
  spool show resize-1
  spool list --state processing
  spool --machines ./my-machines.ts machines`,
    );

  program
    .command('start')
    .description('start a job of the newest version of <machine>')
    .argument('<machine>', 'machine id, see `spool machines`')
    .option('--input <json>', 'the job input as a JSON object (- reads standard input, @file a file)', '{}')
    .option('--id <id>', 'your own job id (default: a random UUID)')
    .option('--idempotency-key <key>', 'starting again with this key and the same input returns the same job')
    .action(async (machineId: string, options: { input: string; id?: string; idempotencyKey?: string }, command: Command) => {
      const g = globals(command);
      const input = parseJsonArgument(options.input, '--input', `--input '{"name":"resize"}'`);
      await withRuntime(g, io, { create: true }, async (runtime) => {
        let created = false;
        const unsubscribe = runtime.subscribe((event) => {
          if (event.type === 'job.started') created = true;
        });
        let job: Job;
        try {
          job = await runtime.start(machineId, input, {
            ...(options.id !== undefined ? { jobId: options.id } : {}),
            ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
          });
        } finally {
          unsubscribe();
        }
        job = redactJob(runtime, job);
        write(io, g, { created, job }, () =>
          keyValues([
            ['job', job.id],
            ['machine', `${job.machineId}@${job.machineVersion}`],
            ['created', created ? 'yes' : 'no: a job with this id or idempotency key and the same input already exists'],
            ['status', describeStatus(job)],
            ['state', formatState(job.value)],
            ['revision', String(job.revision)],
            ['context', formatBlock(job.context)],
          ]),
        );
      });
    });

  program
    .command('send')
    .description('send an event to a job and print its outcome')
    .argument('<jobId>', 'the job')
    .argument('<event>', 'the event as JSON, e.g. \'{"type":"PROGRESS","percent":40}\', or a bare type: START (- reads standard input, @file a file)')
    .option('--event-id <id>', 'deduplication id: sending it again returns the first outcome')
    .action(async (jobId: string, eventText: string, options: { eventId?: string }, command: Command) => {
      const g = globals(command);
      const event = parseEvent(eventText);
      await withRuntime(g, io, { create: false }, async (runtime, module) => {
        await requireMachineOf(runtime, jobId, module);
        // An action that throws after the commit leaves the event applied: say so, it did not do its work.
        const failures: { revision: number; action: string; message: string }[] = [];
        const unsubscribe = runtime.subscribe((e) => {
          if (e.type === 'action.failed' && e.jobId === jobId) failures.push({ revision: e.revision, action: e.action, message: e.error.message });
        });
        let sent: SendResult;
        try {
          sent = await runtime.send(jobId, event, options.eventId !== undefined ? { eventId: options.eventId } : {});
        } finally {
          unsubscribe();
        }
        // This event's own commit only (a send may also drain events queued before it).
        const actionsFailed = failures.filter((f) => f.revision === sent.revision).map(({ action, message }) => ({ action, message }));
        const result: SendResult & { actionsFailed?: typeof actionsFailed } = { ...sent, job: redactJob(runtime, sent.job), ...(actionsFailed.length > 0 ? { actionsFailed } : {}) };
        write(io, g, result, () =>
          [formatSendResult(result, eventText, event), ...actionsFailed.map((f) => `warning: action ${f.action} failed after the commit (the transition stands): ${oneLine(f.message)}`)].join('\n'),
        );
      });
    });

  program
    .command('show')
    .description("a job's state, context, history, pending events, activities and timers")
    .argument('<jobId>', 'the job')
    .option('--history <n>', 'history rows to print, the latest (all, or a number; --json always has every one)', '100')
    .action(async (jobId: string, options: { history: string }, command: Command) => {
      const g = globals(command);
      const rows = options.history === 'all' ? Number.POSITIVE_INFINITY : Number(options.history);
      if (!(rows === Number.POSITIVE_INFINITY || (Number.isSafeInteger(rows) && rows >= 0))) throw new UsageError('--history must be "all" or a whole number of rows.');
      await withRuntime(g, io, { create: false, mode: 'read' }, async (runtime) => {
        const details = redactDetails(runtime, await runtime.details(jobId));
        write(io, g, details, () => formatShow(details, versionNote(runtime, details.job), rows));
      });
    });

  program
    .command('list')
    .description('jobs, ordered by id')
    .option('--machine <id>', 'only jobs of this machine')
    .option('--state <path>', 'only jobs in this state path, e.g. processing or checkout.paying')
    .addOption(new Option('--status <status>', 'only jobs with this status').choices(JOB_STATUSES))
    .option('--quarantined', 'only quarantined jobs (held back: an unregistered machine version, a snapshot that no longer fits, or a damaged record)')
    .option('--exhausted', 'only jobs with an activity that used up its attempts')
    .option('--cancel-requested', 'only jobs with a cancel request')
    .option('--suspended', 'only suspended jobs (they accept events but process nothing until resumed)')
    .option('--stuck', 'only jobs nothing will move: no pending event, timer or activity, and a state that waits for no event')
    .option('--limit <n>', 'at most this many jobs (a page)')
    .option('--after <jobId>', 'the page after this job id (jobs are ordered by id)')
    .action(async (options: ListOptions, command: Command) => {
      const g = globals(command);
      const limit = options.limit === undefined ? undefined : Number(options.limit);
      if (limit !== undefined && !(Number.isSafeInteger(limit) && limit > 0)) throw new UsageError('--limit must be a positive whole number of jobs.');
      const filter: ListFilter = {
        ...(options.machine !== undefined ? { machineId: options.machine } : {}),
        ...(options.state !== undefined ? { state: options.state } : {}),
        ...(options.status !== undefined ? { status: options.status } : {}),
        ...(options.quarantined ? { quarantined: true } : {}),
        ...(options.exhausted ? { exhausted: true } : {}),
        ...(options.cancelRequested ? { cancelRequested: true } : {}),
        ...(options.suspended ? { suspended: true } : {}),
        ...(options.stuck ? { stuck: true as const } : {}),
        ...(limit !== undefined ? { limit } : {}),
        ...(options.after !== undefined ? { afterId: options.after } : {}),
      };
      await withRuntime(g, io, { create: false, mode: 'read' }, async (runtime) => {
        const jobs = (await runtime.list(filter)).map((job) => redactJob(runtime, job));
        const more = limit !== undefined && jobs.length === limit ? `\n\n(${limit} shown; the next page: --after ${jobs.at(-1)!.id})` : '';
        write(io, g, jobs, () => formatList(jobs) + more);
      });
    });

  program
    .command('machines')
    .description('the registered machines: versions, event types, description')
    .action(async (_options: unknown, command: Command) => {
      const g = globals(command);
      const { path, definitions } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
      const machines = new MachineRegistry(definitions).all();
      const json = machines.map((m) => ({
        id: m.id,
        version: m.version,
        events: eventTypes(m),
        description: m.description ?? null,
        inputSchema: m.input !== undefined,
      }));
      write(io, g, { module: path, machines: json }, () => `${formatMachines(machines)}\n\n(from ${path})`);
    });

  program
    .command('cancel')
    .description('request cancellation: the machine receives its cancel event and decides; shows the request')
    .argument('<jobId>', 'the job')
    .option('--reason <text>', 'why', 'cancelled from the command line')
    .action(async (jobId: string, options: { reason: string }, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false }, async (runtime, module) => {
        await requireMachineOf(runtime, jobId, module);
        const job = redactJob(runtime, await runtime.cancel(jobId, options.reason));
        write(io, g, job, () =>
          keyValues([
            ['job', job.id],
            ['cancel', job.cancel?.completed ? 'cancelled' : 'requested; the job is not cancelled yet (a worker may need to finish its step)'],
            ['state', formatState(job.value)],
            ['status', describeStatus(job)],
          ]),
        );
      });
    });

  for (const [name, verb] of [
    ['complete', 'complete'],
    ['fail', 'fail'],
  ] as const) {
    program
      .command(name)
      .description(`${verb} an activity that waits out of band, with its single-use completion token`)
      .argument('<token>', 'the completion token the activity handed out')
      .argument('[json]', name === 'complete' ? 'the output as JSON (default null; - reads standard input, @file a file)' : 'the error as JSON, e.g. \'{"message":"declined"}\' (- reads standard input, @file a file)')
      .action(async (token: string, text: string | undefined, _options: unknown, command: Command) => {
        const g = globals(command);
        const value = text === undefined ? (name === 'complete' ? null : { message: 'failed' }) : parseJsonArgument(text, name === 'complete' ? 'The output' : 'The error', `'{"ok":true}'`);
        await withRuntime(g, io, { create: false }, async (runtime, module, store) => {
          const waiting = await store.effectByToken(token).catch(() => undefined);
          if (waiting) await requireMachineOf(runtime, waiting.jobId, module);
          const job = redactJob(runtime, name === 'complete' ? await runtime.complete(token, value) : await runtime.fail(token, value));
          write(io, g, job, () => keyValues([['job', job.id], ['state', formatState(job.value)], ['status', describeStatus(job)], ['revision', String(job.revision)]]));
        });
      });
  }

  program
    .command('retry')
    .description('redrive a failed activity whose invoking state is still current; --as-new starts a new job with a finished job\'s input')
    .argument('<jobId>', 'the job')
    .option('--as-new', 'start a new job of the same machine with the same input (for a finished job)')
    .option('--id <id>', 'with --as-new: the new job\'s id')
    .option('--allow-unsafe', 'also redrive an activity marked unsafeToRepeat (reconcile with the provider first)')
    .action(async (jobId: string, options: { asNew?: boolean; id?: string; allowUnsafe?: boolean }, command: Command) => {
      const g = globals(command);
      if (options.id !== undefined && !options.asNew) throw new UsageError('--id goes with --as-new.');
      await withRuntime(g, io, { create: false }, async (runtime, module) => {
        await requireMachineOf(runtime, jobId, module);
        if (options.asNew) {
          const { job, created } = await runtime.retryAsNew(jobId, options.id !== undefined ? { jobId: options.id } : {});
          const shown = redactJob(runtime, job);
          write(io, g, { retryOf: jobId, created, job: shown }, () =>
            keyValues([
              ['job', shown.id],
              ['retry of', jobId],
              ['created', created ? 'yes' : 'no: this job was already retried as this one'],
              ['machine', `${shown.machineId}@${shown.machineVersion}`],
              ['state', formatState(shown.value)],
              ['status', describeStatus(shown)],
            ]),
          );
          return;
        }
        const { job, effects } = await runtime.retry(jobId, options.allowUnsafe ? { allowUnsafe: true } : {});
        const shown = redactJob(runtime, job);
        const keys = sensitiveKeys(runtime, job.machineId);
        const redriven = effects.map((e) => ({ ...e, input: redactKeys(e.input, keys), output: redactKeys(e.output, keys) }));
        write(io, g, { job: shown, effects: redriven }, () =>
          keyValues([
            ['job', shown.id],
            ...redriven.map((e): [string, string] => ['redriven', `${e.src}: attempts ${e.attempt + 1} to ${e.maxAttempts} may run (idempotency key ${e.id})`]),
            ['state', formatState(shown.value)],
            ['status', describeStatus(shown)],
            ['next', shown.suspended !== null ? `the job is suspended: \`spool resume ${shown.id}\` first` : 'a worker runs the attempts (`spool worker`)'],
          ]),
        );
      });
    });

  program
    .command('suspend')
    .description('suspend a job: it keeps accepting events but processes none, fires no timers and starts no activity until resumed')
    .argument('<jobId>', 'the job')
    .option('--reason <text>', 'why', 'suspended from the command line')
    .action(async (jobId: string, options: { reason: string }, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false }, async (runtime) => {
        const job = redactJob(runtime, await runtime.suspend(jobId, options.reason));
        write(io, g, job, () =>
          keyValues([
            ['job', job.id],
            ['suspended', `since ${formatTime(job.suspended?.at)}${job.suspended?.reason ? ` (${job.suspended.reason})` : ''}`],
            ['state', formatState(job.value)],
            ['status', describeStatus(job)],
          ]),
        );
      });
    });

  program
    .command('resume')
    .description('resume a suspended job: pending events are applied, due timers fire, activities run again')
    .argument('<jobId>', 'the job')
    .action(async (jobId: string, _options: unknown, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false }, async (runtime, module) => {
        await requireMachineOf(runtime, jobId, module);
        const job = redactJob(runtime, await runtime.resume(jobId));
        write(io, g, job, () =>
          keyValues([
            ['job', job.id],
            ['suspended', job.suspended === null ? 'no' : 'yes'],
            ['state', formatState(job.value)],
            ['status', describeStatus(job)],
            ['revision', String(job.revision)],
          ]),
        );
      });
    });

  program
    .command('purge')
    .description('delete finished jobs with their history and assets: one by id, or every one older than --older-than')
    .argument('[jobId]', 'one finished job')
    .option('--older-than <duration>', 'retention: finished jobs last updated longer ago than this, e.g. 30d, 12h')
    .addOption(new Option('--status <status>', 'with --older-than: only jobs that ended with this status').choices(['done', 'error', 'stopped']))
    .action(async (jobId: string | undefined, options: { olderThan?: string; status?: JobStatus }, command: Command) => {
      const g = globals(command);
      if ((jobId === undefined) === (options.olderThan === undefined)) throw new UsageError('Give a job id or --older-than <duration> (one of them).');
      if (options.status !== undefined && options.olderThan === undefined) throw new UsageError('--status goes with --older-than.');
      const olderThanMs = options.olderThan === undefined ? undefined : parseDuration(options.olderThan, '--older-than');
      await withRuntime(g, io, { create: false }, async (runtime) => {
        if (jobId !== undefined) {
          await runtime.purge(jobId);
          write(io, g, { purged: 1, jobId }, () => `purged job ${jobId} with its history, events, activities, timers, notes and assets`);
          return;
        }
        const before = runtime.clock.now() - olderThanMs!;
        const { purged } = await runtime.purgeFinished({ olderThanMs: olderThanMs!, ...(options.status !== undefined ? { status: options.status } : {}) });
        write(io, g, { purged, before, status: options.status ?? null }, () =>
          `purged ${purged} finished job(s)${options.status ? ` with status ${options.status}` : ''} last updated before ${formatTime(before)}`,
        );
      });
    });

  program
    .command('stats')
    .description('jobs by machine, state and status; stuck, suspended, quarantined and exhausted jobs; backlog, timer lag, attempts, claims held')
    .action(async (_options: unknown, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false, mode: 'read' }, async (runtime) => {
        const stats = await runtime.stats();
        write(io, g, stats, () => formatStats(stats));
      });
    });

  addServeOptions(program
    .command('worker')
    .description('run activities, retries and timers until SIGINT/SIGTERM, printing what happens; --serve also serves the HTTP API')
    .option('--serve', 'also serve the HTTP API and event streams (see `spool serve --help`)'))
    .option('--poll-ms <ms>', 'how often to look for work from other processes', '250')
    .option('--grace-ms <ms>', 'on SIGINT/SIGTERM: how long running activities may finish before they are aborted', '10000')
    .option('--lease-ms <ms>', "how long this worker's lease on a job lasts without renewal; a crashed worker's jobs are taken over once it expires", '30000')
    .option('--concurrency <n>', 'activities this worker runs at once; the claims of one round, and outcomes that arrive together, share a disk sync', '8')
    .option('--activity-concurrency <limits>', 'attempts of an activity run at once by this worker, e.g. charge=2,ship=1 (the rest wait in the database)')
    .addOption(new Option('--log <format>', 'print structured logs instead: one JSON object per lifecycle event, sensitive fields redacted').choices(['json']))
    .action(async (options: { pollMs: string; graceMs: string; leaseMs: string; concurrency: string; log?: 'json'; activityConcurrency?: string; serve?: boolean } & ServeFlags, command: Command) => {
      const g = globals(command);
      if (options.serve) checkServeFlags(options);
      const pollMs = Number(options.pollMs);
      if (!Number.isInteger(pollMs) || pollMs < 10 || pollMs > 60_000) throw new UsageError('--poll-ms must be an integer from 10 to 60000.');
      const graceMs = Number(options.graceMs);
      if (!Number.isInteger(graceMs) || graceMs < 0 || graceMs > 3_600_000) throw new UsageError('--grace-ms must be an integer from 0 to 3600000.');
      const leaseMs = Number(options.leaseMs);
      if (!Number.isInteger(leaseMs) || leaseMs < 1000 || leaseMs > 3_600_000) throw new UsageError('--lease-ms must be an integer from 1000 to 3600000.');
      const concurrency = Number(options.concurrency);
      if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024) throw new UsageError('--concurrency must be an integer from 1 to 1024.');
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
        const atOpen = (store: SqliteStore) =>
          void checkAtStart(store, g.db, (json, human) =>
            io.stdout(logJson ? `${JSON.stringify({ level: 'warn', msg: 'damaged job rows', ...json })}\n` : g.json ? `${JSON.stringify(json)}\n` : `${human}\n`),
          );
        const runOptions = { create: true, mode: 'run', effects: true, graceMs, leaseMs, concurrency, atOpen } as const;
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

  program
    .command('test')
    .description("walk each machine's graph: cover every transition, replay every path through the runtime, with a restart between every two steps")
    .option('--machine <id>', 'only this machine')
    .option('--no-crash', 'skip the replay with a restart between every two steps')
    .option('--child-crash <n>', 'paths per machine also replayed in a child process SIGKILLed between steps', '1')
    .action(async (options: { machine?: string; crash: boolean; childCrash: string }, command: Command) => {
      const g = globals(command);
      const childCrash = Number(options.childCrash);
      if (!Number.isInteger(childCrash) || childCrash < 0 || childCrash > 1000) throw new UsageError('--child-crash must be an integer from 0 to 1000.');
      const { path, namespace } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
      let subjects = collectPathTests(namespace);
      if (options.machine !== undefined) {
        subjects = subjects.filter((s) => new MachineRegistry([isPathTestSubject(s) ? s.definition : s]).all()[0]?.id === options.machine);
        if (subjects.length === 0) throw new UsageError(`No machine "${options.machine}" in ${path}; see \`spool machines\`.`);
      }
      const dir = mkdtempSync(join(tmpdir(), 'spool-test-'));
      try {
        const result = await runPathTests({
          definitions: subjects,
          crash: options.crash,
          sampleChildCrash: childCrash,
          module: path,
          dir,
          onProgress: (event) => {
            const line = g.json ? undefined : describeProgress(event);
            if (line !== undefined) io.stderr(`${line}\n`);
          },
        });
        write(io, g, result, () => formatPathResults(result.machines, result.durationMs));
        if (!result.ok) setExitCode(1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

  program
    .command('demo')
    .description('run eight jobs to their ends, printing each step: four job-lifecycle jobs driven by events, then four run by the worker loop (what `npm start` runs)')
    .action(async (_options: unknown, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: true, mode: 'run', needs: 'job-lifecycle', effects: true }, async (runtime) => {
        const jobs = await runDemo(runtime, {
          print: g.json ? () => {} : (line) => io.stdout(`${line}\n`),
          dbLabel: g.db,
          commandPrefix: commandPrefix(g),
        });
        if (g.json) io.stdout(`${JSON.stringify({ db: g.db, jobs }, null, 2)}\n`);
      });
    });

  addGraphCommand(program, {
    registry: async (command) => new MachineRegistry((await loadMachines(globals(command).machines ?? DEFAULT_MACHINES_MODULE, io.cwd)).definitions),
    withReadRuntime: (command, work) => withRuntime(globals(command), io, { create: false, mode: 'read' }, (runtime) => work(runtime)),
    stdout: (text) => io.stdout(text),
  });

  addTailCommand(program, {
    withReadRuntime: (command, work) => withRuntime(globals(command), io, { create: false, mode: 'read' }, (runtime) => work(runtime)),
    json: (command) => globals(command).json === true,
    stdout: (text) => io.stdout(text),
    stderr: (text) => io.stderr(text),
  });

  addServeCommand(program, {
    withRuntime: (command, work) => withRuntime(globals(command), io, { create: true }, (runtime) => work(runtime)),
    print: (command, json, human) => io.stdout(globals(command).json ? `${JSON.stringify(json)}\n` : `${human}\n`),
    stderr: (text) => io.stderr(text),
  });

  addScheduleCommands(program, {
    withRuntime: (command, create, work) => withRuntime(globals(command), io, { create }, (runtime) => work(runtime, globals(command).json === true)),
    write: (command, json, human) => write(io, globals(command), json, human),
    sensitiveKeys,
  });
  addDoctorCommand(program, { stdout: io.stdout, cwd: io.cwd, setExitCode });

  return program;
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
  return `${event.job.id} rev ${t.revision} ${t.eventType} ${t.outcome}${why}: ${move}${event.job.final ? ` (ended ${event.job.status})` : ''}`;
}

function describeProgress(event: PathTestProgress): string | undefined {
  switch (event.type) {
    case 'machine.started':
      return `${event.machineId}@${event.version}: generating paths`;
    case 'machine.generated':
      return `${event.machineId}: ${event.states} states, ${event.covered}/${event.transitions} transitions covered by ${event.paths} paths; replaying`;
    case 'path.finished':
      return `  ${event.ok ? 'ok  ' : 'FAIL'} ${event.machineId} path ${event.path} (${event.mode}, ${event.durationMs} ms)${event.ok ? '' : `: ${event.message}`}`;
    case 'machine.finished':
      return `${event.result.machineId}: ${event.result.ok ? 'passed' : 'FAILED'}`;
  }
}

function formatPathResults(machines: MachinePathResult[], durationMs: number): string {
  const rows = machines.flatMap((m) => [
    [
    `${m.machineId}@${m.version}`,
    String(m.states),
    String(m.transitions),
    `${m.covered}${m.waived ? ` (+${m.waived} waived)` : ''}`,
    // Its own: the child rows below count theirs (`gaps` lists both).
    String(m.gaps.length - m.children.reduce((n, c) => n + c.gaps.length, 0)),
    String(m.paths),
    `${m.runs.plain}/${m.runs.restart}/${m.runs.child}`,
    String(m.failures.length),
    m.ok ? 'ok' : 'FAILED',
    ],
    ...m.children.map((c) => [
      `  ${c.machineId} (child)`,
      '-',
      String(c.transitions),
      `${c.covered}${c.waived ? ` (+${c.waived} waived)` : ''}`,
      String(c.gaps.length),
      '-',
      '(same paths)',
      '-',
      c.gaps.length === 0 && c.unusedWaivers.length === 0 ? 'ok' : 'FAILED',
    ]),
  ]);
  const lines = [table(['MACHINE', 'STATES', 'TRANSITIONS', 'COVERED', 'GAPS', 'PATHS', 'RUNS plain/restart/child', 'FAILURES', 'RESULT'], rows)];
  for (const m of machines) {
    if (m.error) lines.push(`${m.machineId}: ${m.error}`);
    for (const gap of m.gaps) lines.push(`${m.machineId}: gap: state ${gap.source}, event ${gap.event}, guard ${gap.guard ?? '-'}, target ${gap.targets.join(', ') || '-'}${gap.note ? ` (${gap.note})` : ''}`);
    for (const f of m.failures) lines.push(`${m.machineId}: path ${f.path} (${f.mode}) failed: ${oneLine(f.message)}`);
  }
  lines.push(`${machines.every((m) => m.ok) ? 'all machines passed' : 'some machines FAILED'} in ${(durationMs / 1000).toFixed(1)} s`);
  return lines.join('\n');
}

// ------------------------------------------------------------------ plumbing

function globals(command: Command): GlobalOptions {
  return command.optsWithGlobals<GlobalOptions>();
}

/** `--owner`: a tenant id, or null (unscoped) when not given. */
function ownerOf(g: GlobalOptions): string | null {
  if (g.owner === undefined) return null;
  if (!/^[\x21-\x7e]{1,200}$/.test(g.owner)) throw new UsageError('--owner must be 1-200 printable ASCII characters without spaces.');
  return g.owner;
}

/** `--max-backlog`: a positive integer. */
function maxBacklogOf(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError('--max-backlog must be a positive integer (events waiting to be applied).');
  return n;
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

function readVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/**
 * Load the machines, open the database, open a runtime, run `work`, close everything. Machines
 * are checked before the database is touched, so a bad module changes nothing.
 *
 * `mode` says what the command may change: `read` (show, list, stats) writes nothing and applies
 * nothing; `write` (start, send, cancel, ...) changes only the jobs it names; `run` (worker, demo)
 * recovers the whole store on open (quarantines jobs whose machine this process does not have,
 * migrates, applies pending events). A one-off command run without the right `--machines` must
 * not quarantine every job of the machines it lacks.
 */
async function withRuntime(
  g: GlobalOptions,
  io: CliIO,
  options: {
    create: boolean;
    mode?: 'read' | 'write' | 'run';
    needs?: string;
    effects?: boolean;
    graceMs?: number;
    leaseMs?: number;
    concurrency?: number;
    activityConcurrency?: Record<string, number>;
    log?: (entry: LogEntry, sensitive: ReadonlySet<string>) => void;
    /** Run on the opened store before the runtime opens (the worker's cheap doctor check); what it throws closes the store. */
    atOpen?: (store: SqliteStore) => void;
  },
  work: (runtime: Runtime, module: string, store: SqliteStore) => Promise<void>,
): Promise<void> {
  const { path, definitions } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
  const registry = new MachineRegistry(definitions); // throws MachineDefinitionError for an unusable definition
  if (options.needs !== undefined && !registry.all().some((m) => m.id === options.needs)) {
    throw new UsageError(`This command runs the machine ${options.needs}, which ${path} does not export; run it without --machines.`);
  }
  const maxBacklog = g.maxBacklog === undefined ? undefined : maxBacklogOf(g.maxBacklog); // checked before the file is touched
  const store = await openStore(resolve(io.cwd, g.db), g.db, options.create, g.synchronous);
  let runtime: Runtime;
  try {
    // runEffects false: a command records transitions, effects and timers, and leaves running
    // activities to a worker; closing a runtime mid-activity would abort it.
    const log = options.log;
    const sensitive = new Set(registry.all().flatMap((m) => [...m.sensitive]));
    const mode = options.mode ?? 'write';
    options.atOpen?.(store);
    runtime = await createRuntime({
      store,
      machines: definitions,
      recover: mode === 'run',
      ...(mode === 'read' ? { processEvents: false } : {}),
      runEffects: options.effects ?? false,
      owner: ownerOf(g),
      ...(maxBacklog !== undefined ? { maxBacklog } : {}),
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(options.concurrency !== undefined ? { maxConcurrentActivities: options.concurrency } : {}),
      ...(options.activityConcurrency ? { activityConcurrency: options.activityConcurrency } : {}),
      ...(log ? { log: (entry: LogEntry) => log(entry, sensitive) } : {}),
    });
  } catch (error) {
    await store.close();
    throw error;
  }
  try {
    await work(runtime, path, store);
  } finally {
    await runtime.close(options.graceMs !== undefined ? { graceMs: options.graceMs } : {});
  }
}

async function openStore(path: string, label: string, create: boolean, synchronous: 'FULL' | 'NORMAL'): Promise<SqliteStore> {
  if (!create && !existsSync(path)) {
    throw new DatabaseError(`No Spool database at ${label}. Start a job first (\`spool start <machine>\` or \`spool demo\`), or pass --db <file>.`, {
      db: label,
    });
  }
  try {
    return await SqliteStore.open(path, { synchronous });
  } catch (error) {
    if (error instanceof SpoolError) throw error;
    throw new DatabaseError(`Could not open the database ${label}: ${firstLine((error as Error).message)}`, { db: label });
  }
}

/** Why what an active job waits for is not known here: its own machine version is not in this module. */
function versionNote(runtime: Runtime, job: Job): string | undefined {
  if (job.final || runtime.registry.get(job.machineId, job.machineVersion)) return undefined;
  const route = runtime.registry.route(job.machineId, job.machineVersion);
  return route
    ? `${job.machineVersion} is not in this module; a migration to ${route.target.version} is: the next worker, or the next event sent, migrates the job`
    : `${job.machineVersion} is not in this module, so what the job waits for is unknown here; a worker without it quarantines the job`;
}

/**
 * Refuse a command that would run a job whose machine this process does not have (a missing or
 * wrong `--machines`): it would otherwise quarantine the job. The job itself is left unchanged.
 */
async function requireMachineOf(runtime: Runtime, jobId: string, module: string): Promise<void> {
  const job = await runtime.get(jobId);
  if (job.final) return;
  if (!knowsMachine(runtime, job.machineId)) {
    throw new UsageError(`Job ${jobId} runs machine ${job.machineId}, which ${module} does not export; pass --machines <the module that defines it>.`);
  }
  if (!runtime.registry.route(job.machineId, job.machineVersion)) {
    const has = runtime.registry.all().filter((m) => m.id === job.machineId).map((m) => m.version);
    throw new UsageError(
      `Job ${jobId} runs ${job.machineId} version ${job.machineVersion}; ${module} registers version ${has.join(', ')} and no migration from ${job.machineVersion}. ` +
        `Pass --machines <a module that registers version ${job.machineVersion}>, or register a migration from it. Nothing was changed.`,
    );
  }
}

function write(io: CliIO, g: GlobalOptions, json: unknown, human: () => string): void {
  io.stdout(g.json ? `${JSON.stringify(json, null, 2)}\n` : `${human()}\n`);
}

/** Print one error line (or one JSON object) on stderr; returns the exit code. */
function report(error: unknown, json: boolean, io: CliIO): number {
  if (error instanceof SpoolError) {
    io.stderr(json ? `${JSON.stringify(error.toJSON())}\n` : `spool: ${error.code}: ${oneLine(error.message)}\n`);
    return 1;
  }
  const e = error instanceof Error ? error : new Error(String(error));
  const rawCode: unknown = (e as Error & { code?: unknown }).code;
  if (typeof rawCode === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(rawCode)) {
    // A damaged file is not a bug to report: say what it is and what to do.
    return report(new DatabaseError(`The database file is damaged (${rawCode}: ${oneLine(e.message)}). Restore it from a backup, or salvage it with \`sqlite3 <file> .recover\`.`, { code: rawCode }), json, io);
  }
  const code = typeof rawCode === 'string' ? rawCode : 'SPOOL_INTERNAL';
  const message = `${oneLine(e.message)} (an unexpected error: please report it; set SPOOL_DEBUG=1 for the stack)`;
  io.stderr(json ? `${JSON.stringify({ code, category: 'internal', message })}\n` : `spool: ${code}: ${message}\n`);
  if (process.env['SPOOL_DEBUG']) io.stderr(`${e.stack ?? ''}\n`);
  return 1;
}

/** A message on one line; a stored message that is not text (written by an older Spool) as JSON. */
function oneLine(text: unknown): string {
  return (typeof text === 'string' ? text : (JSON.stringify(text) ?? String(text))).replace(/\s*\n\s*/g, ' ').trim();
}

function parseEvent(raw: string): unknown {
  const text = argumentText(raw, 'The event');
  const trimmed = text.trim();
  if (EVENT_TYPE_SHORTHAND.test(trimmed) && !['true', 'false', 'null'].includes(trimmed)) return { type: trimmed };
  const event = parseJsonText(text, 'The event', `'{"type":"START"}' or START`);
  if (event === null || typeof event !== 'object' || Array.isArray(event)) {
    const shown = text.length > 200 ? `${text.slice(0, 200)}...` : text;
    throw new BadJsonArgumentError(`The event must be a JSON object with a "type", e.g. '{"type":"START"}' (or just START); got ${shown}.`);
  }
  return event;
}

/** Global options to repeat in suggested commands (`--db` and `--machines` when not the defaults). */
function commandPrefix(g: GlobalOptions): string {
  const parts = ['npx spool'];
  if (g.db !== './spool.db') parts.push(`--db ${shellQuote(g.db)}`);
  if (g.machines !== undefined) parts.push(`--machines ${shellQuote(g.machines)}`);
  if (g.owner !== undefined) parts.push(`--owner ${shellQuote(g.owner)}`);
  return parts.join(' ');
}

function shellQuote(text: string): string {
  return /^[\w./:@-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

// ------------------------------------------------------------------ human output

function describeStatus(job: Job): string {
  const base = job.final ? `${job.status} (final)` : job.status;
  const held = [job.quarantine !== null ? 'quarantined' : '', job.suspended !== null ? 'suspended' : ''].filter(Boolean);
  return held.length > 0 ? `${base}, ${held.join(', ')}` : base;
}

function eventTypes(m: RegisteredMachine): string[] {
  return [...m.eventTypes].filter((t) => !t.startsWith('xstate.')).sort();
}

function formatSendResult(result: SendResult, eventText: string, event: unknown): string {
  const type = (event as { type?: unknown }).type;
  const pairs: [string, string][] = [
    ['job', result.jobId],
    ['event', `${typeof type === 'string' ? type : eventText} (event id ${result.eventId})`],
    ['outcome', result.status],
  ];
  if (result.duplicate) pairs.push(['duplicate', 'yes: this event id was sent before; this is its first outcome']);
  if (result.error) pairs.push(['error', `${result.error.code ?? result.error.name}: ${oneLine(result.error.message)}`]);
  if (result.status === 'ignored') pairs.push(['note', `no transition for this event in state ${formatState(result.job.value)}; nothing changed`]);
  if (result.status === 'pending') {
    const lease = result.job.lease;
    pairs.push(['note', lease ? `accepted durably; ${lease.owner} holds the job (its activity runs there) and applies it` : 'accepted durably; a worker applies it']);
  }
  pairs.push(
    ['revision', result.revision === null ? '-' : String(result.revision)],
    ['state', formatState(result.job.value)],
    ['status', describeStatus(result.job)],
  );
  if (result.job.final && result.job.output !== undefined) pairs.push(['output', formatBlock(result.job.output)]);
  return keyValues(pairs);
}

function formatShow(details: JobDetails, versionNote?: string, historyRows = Number.POSITIVE_INFINITY): string {
  const { job } = details;
  // The latest rows; a long-lived job's whole history is in --json.
  const history = details.history.length > historyRows ? details.history.slice(details.history.length - historyRows) : details.history;
  const earlier = details.history.length - history.length;
  const pairs: [string, string][] = [
    ['job', job.id],
    ['machine', `${job.machineId}@${job.machineVersion}`],
    ['status', describeStatus(job)],
    ['state', formatState(job.value)],
    ['revision', String(job.revision)],
  ];
  if (job.progress !== null) pairs.push(['progress', `${job.progress}%`]);
  if (job.cancel !== null) {
    const reason = job.cancel.reason === null ? '' : ` (${job.cancel.reason})`;
    pairs.push(['cancel', `requested ${formatTime(job.cancel.requestedAt)}${reason}: ${job.cancel.completed ? 'cancelled' : 'not cancelled yet'}`]);
  }
  if (job.quarantine !== null) pairs.push(['quarantine', job.quarantine]);
  if (job.suspended !== null) {
    pairs.push(['suspended', `since ${formatTime(job.suspended.at)}${job.suspended.reason ? ` (${job.suspended.reason})` : ''}: events stay pending, timers and activities wait (\`spool resume ${job.id}\`)`]);
  }
  if (job.lease !== null) pairs.push(['lease', `held by ${job.lease.owner} (fence ${job.lease.fence}) until ${formatTime(job.lease.until)}`]);
  if (versionNote !== undefined) pairs.push(['version', versionNote]);
  else if (!job.final) pairs.push(['waiting for', details.waitingFor.length > 0 ? details.waitingFor.join(', ') : 'no event']);
  if (details.stuck) pairs.push(['stuck', 'yes: no pending event, timer or activity, and no event but a cancel moves it (`spool retry`, `spool send`, `spool cancel`)']);
  if (job.idempotencyKey !== null) pairs.push(['idempotency', job.idempotencyKey]);
  pairs.push(
    ['created', formatTime(job.createdAt)],
    ['updated', formatTime(job.updatedAt)],
    ['input', formatBlock(job.input)],
    ['context', formatBlock(job.context)],
  );
  if (job.output !== undefined) pairs.push(['output', formatBlock(job.output)]);
  const sections = [keyValues(pairs)];

  const withErrors = history.some((h) => h.error !== null);
  // Which runner committed each revision, under which lease fence (the audit trail of leases).
  const withRunners = history.some((h) => h.runner !== null);
  sections.push(
    `history${earlier > 0 ? ` (the latest ${history.length}; ${earlier} earlier, see --history all)` : ''}:\n${table(
      ['REV', 'EVENT', 'OUTCOME', 'FROM -> TO', 'TIME', ...(withRunners ? ['RUNNER (FENCE)'] : []), ...(withErrors ? ['ERROR'] : [])],
      history.map((h) => [
        String(h.revision),
        h.eventType,
        h.outcome,
        `${h.from === null ? '-' : formatState(h.from)} -> ${formatState(h.to)}`,
        formatTime(h.at),
        ...(withRunners ? [h.runner === null ? '-' : `${h.runner} (${h.fence ?? '-'})`] : []),
        ...(withErrors ? [h.error ? `${h.error.name}: ${oneLine(h.error.message)}` : ''] : []),
      ]),
    )}`,
  );

  const pending = details.events.filter((e) => e.status === 'pending');
  sections.push(
    pending.length === 0
      ? 'pending events: none'
      : `pending events (accepted, not yet applied):\n${table(
          ['SEQ', 'EVENT ID', 'TYPE', 'ACCEPTED'],
          pending.map((e) => [String(e.seq), e.eventId, e.type, formatTime(e.acceptedAt)]),
        )}`,
  );

  if (details.effects.length > 0) {
    const waitingForWorker = details.effects.some((e) => e.active && ['pending', 'backoff', 'running'].includes(e.status));
    sections.push(
      `activities:\n${table(
        ['SRC', 'STATUS', 'ATTEMPTS', 'NEXT RUN', 'RESULT'],
        details.effects.map((e) => [
          e.src,
          e.active ? e.status : `${e.status} (state left)`,
          // A child job is not an attempt of anything: its own show has its history.
          e.kind === 'child' ? '-' : `${e.attempt}/${e.maxAttempts}${e.unsafe ? ' unsafe' : ''}`,
          formatTime(e.nextRunAt),
          e.error
            ? `${e.error.code ?? e.error.name}: ${oneLine(e.error.message)}`
            : e.token !== null
              ? `token ${e.token}`
              : e.kind === 'child'
                ? `child job ${e.id}${e.output === null ? '' : ` -> ${formatJson(e.output)}`}`
                : e.output === null
                  ? ''
                  : formatJson(e.output),
        ]),
      )}${waitingForWorker ? '\n(activities and timers run in a worker process, see runWorker; spool commands only record them)' : ''}${
        details.effects.some((e) => e.token !== null) ? "\n(an activity waiting on a token: `spool complete <token> '<output json>'` or `spool fail <token>` settles it)" : ''
      }`,
    );
  }
  // Failed and interrupted ones: an interrupted attempt (its runner died or stopped) has no error of its own.
  const failedAttempts = details.attempts.filter((a) => a.error !== null || a.outcome === 'interrupted');
  if (failedAttempts.length > 0) {
    const srcOf = new Map(details.effects.map((e) => [e.id, e.src]));
    const why = (a: (typeof failedAttempts)[number]) =>
      a.error ? `${a.error.code ?? a.error.name}: ${oneLine(a.error.message)}` : `its runner ${a.runner ?? '?'} stopped or died before it finished; taken over`;
    sections.push(
      `attempts that failed or were interrupted:\n${table(
        ['ACTIVITY', 'ATTEMPT', 'OUTCOME', 'STARTED', 'ERROR'],
        failedAttempts.map((a) => [srcOf.get(a.effectId) ?? a.effectId, String(a.attempt), a.outcome, formatTime(a.startedAt), why(a)]),
      )}`,
    );
  }
  if (details.timers.length > 0) {
    sections.push(
      `timers:\n${table(
        ['EVENT', 'KIND', 'DUE', 'STATUS'],
        details.timers.map((t) => [String((t.event as { type?: unknown } | null)?.type ?? '-'), t.kind, formatTime(t.dueAt), t.status]),
      )}`,
    );
  }
  if (details.assets.length > 0) {
    sections.push(
      `assets:\n${table(
        ['TYPE', 'URI', 'SIZE', 'ADDED'],
        details.assets.map((a) => [a.type, a.uri, a.size === null ? '-' : String(a.size), formatTime(a.createdAt)]),
      )}`,
    );
  }
  if (details.notes.length > 0) {
    sections.push(`notes:\n${table(['TIME', 'KIND', 'MESSAGE'], details.notes.map((n) => [formatTime(n.at), n.kind, oneLine(n.message)]))}`);
  }
  return sections.join('\n\n');
}

function formatList(jobs: readonly Job[]): string {
  if (jobs.length === 0) return 'No jobs match.';
  const anyQuarantined = jobs.some((j) => j.quarantine !== null);
  const note = anyQuarantined
    ? '\n\nQuarantined jobs are held back until a worker runs with their machine version (or a migration from it) registered: `spool --machines <module> worker`. A failed migration is fixed in the module.'
    : '';
  return table(
    ['ID', 'MACHINE', 'STATUS', 'STATE', 'PROGRESS', 'REV', 'UPDATED', ...(anyQuarantined ? ['QUARANTINED'] : [])],
    jobs.map((j) => [
      j.id,
      `${j.machineId}@${j.machineVersion}`,
      j.final ? `${j.status} (final)` : j.suspended !== null ? `${j.status}, suspended` : j.status,
      formatState(j.value),
      j.progress === null ? '-' : `${j.progress}%`,
      String(j.revision),
      formatTime(j.updatedAt),
      ...(anyQuarantined ? [j.quarantine ?? ''] : []),
    ]),
  ) + note;
}

function formatStats(s: RuntimeStats): string {
  const ms = (v: number | null) => (v === null ? '-' : `${v} ms`);
  const sections = [
    keyValues([
      ['at', formatTime(s.at)],
      ...(s.owner !== null ? [['owner', s.owner] as [string, string]] : []),
      ['stuck', String(s.stuck)],
      ['waiting for input', String(s.waitingForInput)],
      ['suspended', String(s.suspended)],
      ['quarantined', String(s.quarantined)],
      ['exhausted', String(s.exhausted)],
      ['cancel requested', String(s.cancelRequested)],
      ['backlog', `${s.backlog.events} pending event(s) of ${s.backlog.jobs} job(s), ${s.backlog.held} held; oldest waiting ${ms(s.backlog.oldestAgeMs)}`],
      ['timers', `${s.timers.scheduled} scheduled, ${s.timers.due} due, ${s.timers.held} held; lag ${ms(s.timers.lagMs)}`],
    ]),
  ];
  sections.push(
    s.jobs.length === 0
      ? 'jobs: none'
      : `jobs:\n${table(['MACHINE', 'STATUS', 'STATE', 'JOBS'], s.jobs.map((j) => [`${j.machineId}@${j.machineVersion}`, j.status, formatState(j.value), String(j.count)]))}`,
  );
  if (s.activities.length > 0) {
    sections.push(
      `activities:\n${table(
        ['SRC', 'EFFECTS', 'FAILED FOR GOOD', 'ATTEMPTS', 'SUCCEEDED', 'FAILED', 'INTERRUPTED', 'STALE', 'RUNNING', 'WAITING'],
        s.activities.map((a) => [a.src, a.effects, a.effectsFailed, a.attempts, a.succeeded, a.failed, a.interrupted, a.stale, a.running, a.waiting].map(String)),
      )}`,
    );
  }
  sections.push(
    s.running.length === 0
      ? 'claims held: none'
      : `claims held:\n${table(
          ['JOB', 'SRC', 'ATTEMPT', 'RUNNER', 'CLAIM UNTIL'],
          s.running.map((r) => [r.jobId, r.src, String(r.attempt), r.runner ?? '-', `${formatTime(r.claimExpiresAt)}${r.expired ? ' (expired)' : ''}`]),
        )}`,
  );
  sections.push(
    s.leases.length === 0
      ? 'leases held: none'
      : `leases held:
${table(
          ['RUNNER', 'JOBS', 'EARLIEST EXPIRY'],
          s.leases.map((l) => [l.runner, String(l.jobs), formatTime(l.earliestUntil)]),
        )}`,
  );
  return sections.join('\n\n');
}

function formatMachines(machines: readonly RegisteredMachine[]): string {
  return table(
    ['MACHINE', 'VERSION', 'EVENTS', 'DESCRIPTION'],
    machines.map((m) => [m.id, m.version, eventTypes(m).join(', ') || '-', m.description ?? '']),
  );
}
