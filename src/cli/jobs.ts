/**
 * The `spool` commands that change jobs: start, send, cancel, complete/fail, retry, suspend,
 * resume, purge.
 */
import { Option, type Command } from 'commander';
import { eventFailure, redeliveryOf, type Job, type JobStatus, type SendResult } from '../index.ts';
import { redeliveryWayOut } from '../runtime/quarantine.ts';
import { sensitivePaths } from '../base/redaction.ts';
import { BadJsonArgumentError, UsageError, argumentText, parseJsonArgument, parseJsonText } from './errors.ts';
import { describeStatus, formatBlock, formatState, formatTime, keyValues, oneLine } from './format.ts';
import { redactJob, redactKeys, sensitiveKeys } from '../views/redacted.ts';
import { parseDuration } from './duration.ts';
import { paintError } from './style.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import { requireMachineOf, withRuntime } from './withRuntime.ts';

/** A bare event type accepted in place of JSON: `START` means `{"type":"START"}`. */
const EVENT_TYPE_SHORTHAND = /^[A-Za-z_][A-Za-z0-9_.:-]*$/;

/** `spool start <machine>`: start a job. */
export function addStartCommand(program: Command, io: CliIO): void {
  program
    .command('start')
    .description('start a job of the newest version of <machine>')
    .addHelpText('after', examples('spool start job-lifecycle --input \'{"name":"resize","items":2}\' --id resize-1', 'spool start approval-flow --input @input.json --idempotency-key order-42'))
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
}

/** `spool send <jobId> <event>`: send an event and print its outcome. */
export function addSendCommand(program: Command, io: CliIO): void {
  program
    .command('send')
    .description('send an event to a job and print its outcome')
    .addHelpText('after', examples('spool send resize-1 START', 'spool send resize-1 \'{"type":"PROGRESS","percent":40}\' --event-id webhook-7'))
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
          [formatSendResult(result, eventText, event, sensitiveKeys(runtime, sent.job.machineId)), ...actionsFailed.map((f) => `${paintError('warning:')} action ${f.action} failed after the commit (the transition stands): ${oneLine(f.message)}`)].join('\n'),
        );
        throwIfFailed(result);
      });
    });
}

/** `spool cancel <jobId>`: request cancellation. */
export function addCancelCommand(program: Command, io: CliIO): void {
  program
    .command('cancel')
    .description('request cancellation: the machine receives its cancel event and decides; shows the request')
    .addHelpText('after', examples('spool cancel resize-1 --reason \'superseded by resize-2\''))
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
}

/** `spool complete` and `spool fail`: settle an activity waiting on a completion token. */
export function addCompleteFailCommands(program: Command, io: CliIO): void {
  for (const [name, verb] of [
    ['complete', 'complete'],
    ['fail', 'fail'],
  ] as const) {
    program
      .command(name)
      .description(`${verb} an activity that waits out of band, with its single-use completion token`)
      .addHelpText('after', name === 'complete' ? examples(`spool complete "$TOKEN" '{"url":"s3://bucket/out.csv"}'`, 'spool complete "$TOKEN" @output.json') : examples(`spool fail "$TOKEN" '{"message":"card declined"}'`))
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
}

/** `spool retry <jobId>`: redrive a failed activity, or start a finished job again with `--as-new`. */
export function addRetryCommand(program: Command, io: CliIO): void {
  program
    .command('retry')
    .description('redrive a failed activity whose invoking state is still current; --as-new starts a new job with a finished job\'s input')
    .addHelpText('after', examples('spool retry resize-1', 'spool retry resize-1 --as-new --id resize-1b'))
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
}

/** `spool suspend <jobId>`. */
export function addSuspendCommand(program: Command, io: CliIO): void {
  program
    .command('suspend')
    .description('suspend a job: it keeps accepting events but processes none, fires no timers and starts no activity until resumed')
    .addHelpText('after', examples('spool suspend resize-1 --reason \'provider outage\''))
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
}

/** `spool resume <jobId>`. */
export function addResumeCommand(program: Command, io: CliIO): void {
  program
    .command('resume')
    .description('resume a suspended job: pending events are applied, due timers fire, activities run again')
    .addHelpText('after', examples('spool resume resize-1'))
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
}

/** `spool purge`: delete finished jobs. */
export function addPurgeCommand(program: Command, io: CliIO): void {
  program
    .command('purge')
    .description('delete finished jobs with their history and assets: one by id (or a job held back because its rows are damaged), or every one older than --older-than')
    .addHelpText('after', examples('spool purge resize-1', 'spool purge --older-than 30d --status done'))
    .argument('[jobId]', 'one finished job, or one quarantined for damage')
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
}

/** An event argument: JSON (or `-`/`@file`), or a bare type (`START`). */
export function parseEvent(raw: string): unknown {
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

/** After a send-like command printed its outcome: a `failed` one exits 1 with SPOOL_EVENT_FAILED on stderr. */
export function throwIfFailed(result: SendResult): void {
  const failed = eventFailure(result);
  if (failed) throw failed;
}

/** A send's outcome as text: `spool send`, `redeliver` and `start-or-send` print it (`sensitive`: the machine's sensitive names, for the way out). */
export function formatSendResult(result: SendResult, eventText: string, event: unknown, sensitive: ReadonlySet<string> = new Set()): string {
  const type = (event as { type?: unknown }).type;
  const pairs: [string, string][] = [
    ['job', result.jobId],
    ['event', `${typeof type === 'string' ? type : eventText} (event id ${result.eventId})`],
    ['outcome', result.status],
  ];
  if (result.duplicate) pairs.push(['duplicate', 'yes: this event id was sent before; this is its first outcome']);
  const redelivers = redeliveryOf(result.eventId);
  if (redelivers !== undefined) pairs.push(['redelivery of', `${redelivers} (its first outcome stays in the history)`]);
  if (result.status === 'failed' && !result.job.final) pairs.push(['way out', redeliveryWayOut(result.jobId, result.eventId, sensitivePaths(event, sensitive).length > 0, String(type))]);
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
