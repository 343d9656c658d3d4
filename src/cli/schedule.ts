/**
 * `spool schedule add|list|remove`: schedules that start jobs from cron expressions or intervals.
 * A client of the public API; the worker (`spool worker`) fires the occurrences.
 *
 * @example
 * spool schedule add nightly export-job --cron '0 3 * * *' --timezone Europe/Paris --overlap skip --catch-up run-once
 * spool schedule add poll approval-flow --every 15m --overlap buffer-one --catch-up skip-missed --input '{"subject":"x"}'
 * spool schedule list --json
 * spool schedule remove nightly
 */
import { Command, Option } from 'commander';
import { ScheduleNotFoundError, type Runtime, type RuntimeEvent, type Schedule, type ScheduleSpec } from '../index.ts';
import { parseDuration } from './duration.ts';
import { UsageError, parseJsonArgument } from './errors.ts';
import { formatBlock, formatTime, keyValues, table } from './format.ts';
import { examples } from './globals.ts';
import { redactKeys } from '../views/redacted.ts';

/** What the schedule commands need from main.ts. */
export interface ScheduleCommandsHost {
  /** Open a runtime on the database of `command`'s global options, run `work`, close it. */
  withRuntime(command: Command, create: boolean, work: (runtime: Runtime, json: boolean) => Promise<void>): Promise<void>;
  /** Print `json` (with --json) or `human()`. */
  write(command: Command, json: unknown, human: () => string): void;
  /** Property names the machine marks sensitive (redacted in what is printed). */
  sensitiveKeys(runtime: Runtime, machineId: string): Set<string>;
}

interface AddOptions {
  cron?: string;
  timezone?: string;
  every?: string;
  overlap: ScheduleSpec['overlap'];
  catchUp: string;
  input: string;
  startAt?: string;
  grace?: string;
}

const OVERLAPS = ['skip', 'buffer-one', 'allow-all', 'cancel-previous'] as const;

/** Add the `schedule` command and its subcommands to `program`. */
export function addScheduleCommands(program: Command, host: ScheduleCommandsHost): void {
  const schedule = program
    .command('schedule')
    .description('schedules: cron expressions and intervals that start jobs (a worker fires them)')
    .addHelpText(
      'after',
      `
Examples:
  spool schedule add nightly export-job --cron '0 3 * * *' --timezone Europe/Paris --overlap skip --catch-up run-once --input '{"dataset":"orders"}'
  spool schedule add poll approval-flow --every 15m --overlap buffer-one --catch-up run-each:3 --input '{"subject":"x"}'
  spool schedule list
  spool schedule remove nightly`,
    );

  addScheduleAddCommand(schedule, host);
  addScheduleListCommand(schedule, host);
  addScheduleRemoveCommand(schedule, host);
}

/** `spool schedule add <id> <machine>`: create or update a schedule. */
function addScheduleAddCommand(schedule: Command, host: ScheduleCommandsHost): void {
  schedule
    .command('add')
    .description('create or update (by id) a schedule; the same definition again changes nothing')
    .addHelpText('after', examples('spool schedule add nightly export-job --cron \'0 3 * * *\' --overlap skip --catch-up run-once --input \'{"dataset":"orders"}\'', 'spool schedule add poll approval-flow --every 15m --overlap buffer-one --catch-up run-each:3 --input \'{"subject":"x"}\''))
    .argument('<id>', 'your id for the schedule')
    .argument('<machine>', 'the machine it starts (its newest version at each occurrence), see `spool machines`')
    .option('--cron <expression>', 'a cron expression: 5 fields, or 6 with seconds first; @daily, @hourly ...')
    .option('--timezone <zone>', 'with --cron: the IANA time zone it is read in (default UTC)')
    .option('--every <duration>', 'an interval instead of --cron, e.g. 30s, 15m, 1h (at least 1s)')
    .addOption(new Option('--overlap <policy>', 'when the previous run has not finished').choices(OVERLAPS).makeOptionMandatory())
    .requiredOption('--catch-up <policy>', 'missed occurrences (downtime): skip-missed, run-once or run-each:<n>')
    .option('--input <json>', 'the input of every job it starts, as a JSON object (- reads standard input, @file a file)', '{}')
    .option('--start-at <time>', 'no occurrence before this time (ISO 8601 or epoch ms); an interval counts from it')
    .option('--grace <duration>', 'how late an occurrence may fire and still be on time (default 1m)')
    .action(async (id: string, machineId: string, options: AddOptions, command: Command) => {
      const spec: ScheduleSpec = {
        id,
        machineId,
        input: parseJsonArgument(options.input, '--input', `--input '{"name":"resize"}'`),
        overlap: options.overlap,
        catchUp: parseCatchUp(options.catchUp),
        ...(options.cron !== undefined ? { cron: options.cron } : {}),
        ...(options.timezone !== undefined ? { timezone: options.timezone } : {}),
        ...(options.every !== undefined ? { everyMs: parseDuration(options.every, '--every') } : {}),
        ...(options.startAt !== undefined ? { startAt: parseTime(options.startAt) } : {}),
        ...(options.grace !== undefined ? { graceMs: parseDuration(options.grace, '--grace') } : {}),
      };
      if ((options.cron === undefined) === (options.every === undefined)) throw new UsageError('Give --cron <expression> or --every <duration> (one of them).');
      await host.withRuntime(command, true, async (runtime) => {
        const result = await runtime.schedule(spec);
        const shown = redact(host, runtime, result.schedule);
        host.write(command, { status: result.status, schedule: shown }, () =>
          keyValues([
            ['schedule', shown.id],
            ['status', result.status === 'unchanged' ? 'unchanged: it already had this definition' : result.status],
            ['machine', shown.machineId],
            ['when', describeWhen(shown)],
            ['overlap', shown.overlap],
            ['catch-up', describeCatchUp(shown.catchUp)],
            ['next', formatTime(shown.nextDueAt)],
            ['input', formatBlock(shown.input)],
            ['note', 'a worker (`spool worker`) starts the jobs when they fall due'],
          ]),
        );
      });
    });
}

/** `spool schedule list`: the schedules as a table. */
function addScheduleListCommand(schedule: Command, host: ScheduleCommandsHost): void {
  schedule
    .command('list')
    .description('the schedules: when they fire, their policies, the next occurrence, the last job')
    .addHelpText('after', examples('spool schedule list', 'spool schedule list --json'))
    .action(async (_options: unknown, command: Command) => {
      await host.withRuntime(command, false, async (runtime) => {
        const schedules = (await runtime.schedules()).map((s) => redact(host, runtime, s));
        host.write(command, schedules, () =>
          schedules.length === 0
            ? 'No schedules. Add one with `spool schedule add <id> <machine> --cron ... --overlap ... --catch-up ...`.'
            : table(
                ['ID', 'MACHINE', 'WHEN', 'OVERLAP', 'CATCH-UP', 'NEXT', 'BUFFERED', 'LAST JOB', 'MISSED'],
                schedules.map((s) => [
                  s.id,
                  s.machineId,
                  describeWhen(s),
                  s.overlap,
                  describeCatchUp(s.catchUp),
                  formatTime(s.nextDueAt),
                  s.bufferedDueAt === null ? '-' : formatTime(s.bufferedDueAt),
                  s.lastJobId ?? '-',
                  String(s.missed),
                ]),
              ) + schedules.filter((s) => s.damaged !== undefined).map((s) => `\nschedule ${s.id}: ${s.damaged}`).join(''),
        );
      });
    });
}

/** `spool schedule remove <id>`: remove a schedule. */
function addScheduleRemoveCommand(schedule: Command, host: ScheduleCommandsHost): void {
  schedule
    .command('remove')
    .description('remove a schedule; the jobs it started carry on')
    .addHelpText('after', examples('spool schedule remove nightly'))
    .argument('<id>', 'the schedule')
    .action(async (id: string, _options: unknown, command: Command) => {
      await host.withRuntime(command, false, async (runtime) => {
        if (!(await runtime.unschedule(id))) throw new ScheduleNotFoundError(id);
        host.write(command, { removed: true, id }, () => `removed schedule ${id}; the jobs it started carry on`);
      });
    });
}

function parseCatchUp(text: string): ScheduleSpec['catchUp'] {
  if (text === 'skip-missed' || text === 'run-once') return text;
  const each = /^run-each[:=](\d{1,4})$/.exec(text);
  if (each) return { runEach: Number(each[1]) };
  throw new UsageError(`--catch-up must be skip-missed, run-once or run-each:<n> (e.g. run-each:3); got "${text}".`);
}

function parseTime(text: string): number {
  const t = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (!Number.isSafeInteger(t)) throw new UsageError(`--start-at must be an ISO 8601 time (2026-01-01T03:00:00Z) or epoch milliseconds; got "${text}".`);
  return t;
}

/** A schedule event as one line of `spool worker` output (other events: undefined). */
export function describeScheduleEvent(event: RuntimeEvent): string | undefined {
  if (event.type === 'schedule.missed') {
    return `schedule ${event.scheduleId}: ${event.count} occurrence(s) missed from ${formatTime(event.from)} to ${formatTime(event.to)} (catch-up policy)`;
  }
  if (event.type === 'schedule.damaged') return `schedule ${event.scheduleId}: not fired: ${event.reason}`;
  if (event.type !== 'schedule.fired') return undefined;
  const what = event.outcome === 'started' ? `started job ${event.jobId}` : event.outcome === 'buffered' ? 'buffered until the previous run ends' : event.outcome;
  return `schedule ${event.scheduleId}: occurrence ${formatTime(event.dueAt)} ${what}${event.reason ? `: ${event.reason}` : ''}`;
}

function describeWhen(s: Schedule): string {
  return s.cron !== null ? `cron ${s.cron} (${s.timezone ?? 'UTC'})` : `every ${formatInterval(s.everyMs ?? 0)}`;
}

/** 90000 -> "1m30s". */
function formatInterval(ms: number): string {
  const units: [string, number][] = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000], ['ms', 1]];
  let rest = ms;
  let out = '';
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n > 0) out += `${n}${name}`;
    rest -= n * size;
  }
  return out || '0ms';
}

function describeCatchUp(c: Schedule['catchUp']): string {
  return typeof c === 'string' ? c : `run-each:${c.runEach}`;
}

function redact(host: ScheduleCommandsHost, runtime: Runtime, s: Schedule): Schedule {
  const keys = host.sensitiveKeys(runtime, s.machineId);
  return keys.size === 0 ? s : { ...s, input: redactKeys(s.input, keys) };
}
