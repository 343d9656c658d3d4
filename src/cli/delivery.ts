/** The `spool` commands that deliver an event besides `send`: `redeliver` (a failed event again) and `start-or-send`. */
import type { Command } from 'commander';
import type { SendResult } from '../index.ts';
import { redactJob, sensitiveKeys } from '../views/redacted.ts';
import { parseJsonArgument } from './errors.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import { formatSendResult, parseEvent, throwIfFailed } from './jobs.ts';
import { requireMachineOf, withRuntime } from './withRuntime.ts';

/** `spool redeliver <jobId> <eventId> [--force]`: apply a failed event again on the job's current state. */
export function addRedeliverCommand(program: Command, io: CliIO): void {
  program
    .command('redeliver')
    .description('apply a failed (poison) event again on the job\'s current state, once the code is fixed: a new history record, the first outcome kept')
    .argument('<jobId>', 'the job')
    .argument('<eventId>', 'the failed event\'s id (`spool show` lists it)')
    .option('--force', 'apply it even though the job has moved on since the event failed')
    .addHelpText('after', examples('spool redeliver resize-1 evt-42', 'spool redeliver resize-1 evt-42 --force'))
    .action(async (jobId: string, eventId: string, options: { force?: boolean }, command: Command) => {
      const g = globals(command);
      await withRuntime(g, io, { create: false }, async (runtime, module) => {
        await requireMachineOf(runtime, jobId, module);
        const sent = await runtime.redeliver(jobId, eventId, options.force ? { force: true } : {});
        const result: SendResult = { ...sent, job: redactJob(runtime, sent.job) };
        const type = (await runtime.events(jobId)).find((e) => e.eventId === result.eventId)?.type;
        write(io, g, result, () => formatSendResult(result, eventId, { type }));
        throwIfFailed(result);
      });
    });
}

/** `spool start-or-send <machine> <jobId> <event>`: create the job if it does not exist, and deliver the event to it. */
export function addStartOrSendCommand(program: Command, io: CliIO): void {
  program
    .command('start-or-send')
    .description('create job <jobId> of <machine> if it does not exist and deliver <event> to it, in one durable step')
    .argument('<machine>', 'machine id, see `spool machines`')
    .argument('<jobId>', 'the job\'s id (the job is found or created by it)')
    .argument('<event>', 'the event as JSON or a bare type, as for `spool send`')
    .option('--input <json>', 'the input if the job is created (- reads standard input, @file a file)', '{}')
    .option('--event-id <id>', 'deduplication id: concurrent or repeated calls with it apply the event once')
    .addHelpText('after', examples('spool start-or-send approval-flow order-42 \'{"type":"APPROVE","by":"ana"}\' --input \'{"subject":"order 42"}\' --event-id approve-42'))
    .action(async (machineId: string, jobId: string, eventText: string, options: { input: string; eventId?: string }, command: Command) => {
      const g = globals(command);
      const input = parseJsonArgument(options.input, '--input', `--input '{"name":"resize"}'`);
      const event = parseEvent(eventText);
      await withRuntime(g, io, { create: true }, async (runtime) => {
        const sent = await runtime.startOrSend(machineId, jobId, input, event, options.eventId !== undefined ? { eventId: options.eventId } : {});
        const result = { ...sent, job: redactJob(runtime, sent.job) };
        write(io, g, result, () => `created: ${result.created ? 'yes' : 'no: the job existed; the event was sent to it'}\n${formatSendResult(result, eventText, event, sensitiveKeys(runtime, result.job.machineId))}`);
        throwIfFailed(result);
      });
    });
}
