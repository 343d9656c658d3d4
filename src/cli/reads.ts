/**
 * The `spool` commands that only read: show, list, machines, stats.
 */
import { Option, type Command } from 'commander';
import { JOB_STATUSES, MachineRegistry, type Job, type JobDetails, type JobStatus, type ListFilter, type RegisteredMachine, type Runtime, type RuntimeStats } from '../internal.ts';
import { UsageError } from './errors.ts';
import { formatState, formatTime, keyValues, table } from './format.ts';
import { redactDetails, redactJob } from '../views/redacted.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import { withRuntime } from './withRuntime.ts';
import { formatShow } from './showFormat.ts';
import { watchJob } from './showWatch.ts';
import { paintHeading, paintStatus } from './style.ts';
import { redeliveryWayOut } from '../runtime/quarantine.ts';

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

/** `spool show <jobId>`: a job with its history, events, activities and timers. */
export function addShowCommand(program: Command, io: CliIO): void {
  program
    .command('show')
    .description("a job's state, context, history, pending events, activities and timers")
    .addHelpText('after', examples('spool show resize-1', 'spool show resize-1 --watch', 'spool show resize-1 --history all --json'))
    .argument('<jobId>', 'the job')
    .option('--history <n>', 'history rows to print, the latest (all, or a number; --json always has every one)', '100')
    .option('--watch', 'then follow the job: a line per commit, by any process, until it ends (exit 0) or Ctrl-C')
    .action(async (jobId: string, options: { history: string; watch?: boolean }, command: Command) => {
      const g = globals(command);
      const rows = options.history === 'all' ? Number.POSITIVE_INFINITY : Number(options.history);
      if (!(rows === Number.POSITIVE_INFINITY || (Number.isSafeInteger(rows) && rows >= 0))) throw new UsageError('--history must be "all" or a whole number of rows.');
      await withRuntime(g, io, { create: false, mode: 'read' }, async (runtime) => {
        if (options.watch) {
          const render = (details: JobDetails) => formatShow(details, versionNote(runtime, details.job), rows);
          return watchJob(runtime, jobId, { stdout: io.stdout, stderr: io.stderr, json: g.json === true, render });
        }
        const details = redactDetails(runtime, await runtime.details(jobId));
        write(io, g, details, () => formatShow(details, versionNote(runtime, details.job), rows));
      });
    });
}

/** What `list --stuck` says under its table. */
const STUCK_WAY_OUT = `A job stuck after an event failed (\`spool show <job>\` lists it under failed events): ${redeliveryWayOut('<job>', '<event id>')}; else \`spool retry\`, \`spool send\` or \`spool cancel\`.`;

/** `spool list`: jobs, filtered and paged. */
export function addListCommand(program: Command, io: CliIO): void {
  program
    .command('list')
    .description('jobs, ordered by id')
    .addHelpText('after', examples('spool list --state processing', 'spool list --machine job-lifecycle --status active --limit 50', 'spool list --stuck --json'))
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
        const wayOut = options.stuck && jobs.length > 0 ? `\n\n${STUCK_WAY_OUT}` : '';
        write(io, g, jobs, () => formatList(jobs) + more + wayOut);
      });
    });
}

/** `spool machines`: the registered machines. */
export function addMachinesCommand(program: Command, io: CliIO): void {
  program
    .command('machines')
    .description('the registered machines: versions, event types, description')
    .addHelpText('after', examples('spool machines', 'spool --machines ./my-machines.ts machines --json'))
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
}

/** `spool stats`: counts, backlog, lag, claims and leases. */
export function addStatsCommand(program: Command, io: CliIO): void {
  program
    .command('stats')
    .description('jobs by machine, state and status; stuck, suspended, quarantined and exhausted jobs; backlog, timer lag, attempts, claims held')
    .addHelpText('after', examples('spool stats', 'spool --db ./jobs.db stats --json'))
    .action(async (_options: unknown, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false, mode: 'read' }, async (runtime) => {
        const stats = await runtime.stats();
        write(io, g, stats, () => formatStats(stats));
      });
    });
}

/** Why what an active job waits for is not known here: its own machine version is not in this module. */
function versionNote(runtime: Runtime, job: Job): string | undefined {
  if (job.final || runtime.registry.get(job.machineId, job.machineVersion)) return undefined;
  const route = runtime.registry.route(job.machineId, job.machineVersion);
  return route
    ? `${job.machineVersion} is not in this module; a migration to ${route.target.version} is: the next worker, or the next event sent, migrates the job`
    : `${job.machineVersion} is not in this module, so what the job waits for is unknown here; a worker without it quarantines the job`;
}

/** A machine's event types, without XState's own. */
export function eventTypes(m: RegisteredMachine): string[] {
  return [...m.eventTypes].filter((t) => !t.startsWith('xstate.')).sort();
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
      paintStatus(j.final ? `${j.status} (final)` : j.suspended !== null ? `${j.status}, suspended` : j.status),
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
      ? `${paintHeading('jobs:')} none`
      : `${paintHeading('jobs:')}\n${table(['MACHINE', 'STATUS', 'STATE', 'JOBS'], s.jobs.map((j) => [`${j.machineId}@${j.machineVersion}`, paintStatus(j.status), formatState(j.value), String(j.count)]))}`,
  );
  if (s.activities.length > 0) {
    sections.push(
      `${paintHeading('activities:')}\n${table(
        ['SRC', 'EFFECTS', 'FAILED FOR GOOD', 'ATTEMPTS', 'SUCCEEDED', 'FAILED', 'INTERRUPTED', 'STALE', 'RUNNING', 'WAITING'],
        s.activities.map((a) => [a.src, a.effects, a.effectsFailed, a.attempts, a.succeeded, a.failed, a.interrupted, a.stale, a.running, a.waiting].map(String)),
      )}`,
    );
  }
  sections.push(
    s.running.length === 0
      ? `${paintHeading('claims held:')} none`
      : `${paintHeading('claims held:')}\n${table(
          ['JOB', 'SRC', 'ATTEMPT', 'RUNNER', 'CLAIM UNTIL'],
          s.running.map((r) => [r.jobId, r.src, String(r.attempt), r.runner ?? '-', `${formatTime(r.claimExpiresAt)}${r.expired ? ' (expired)' : ''}`]),
        )}`,
  );
  sections.push(
    s.leases.length === 0
      ? `${paintHeading('leases held:')} none`
      : `${paintHeading('leases held:')}
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
