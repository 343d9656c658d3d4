/**
 * Compile-time tests of the typed API (checked by `tsc --noEmit -p tsconfig.json`, the first step
 * of `npm test`; nothing here runs). `expectTypeOf` pins the types that flow from the machines;
 * each `@ts-expect-error` is a mistake that must not compile: if the types loosen, the directive
 * is unused and tsc fails.
 */
import { expectTypeOf } from 'vitest';
import { setup } from 'xstate';
import { z } from 'zod';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../../machines/index.ts';
import type { ApprovalFlowContext } from '../../machines/approvalFlow.ts';
import type { ExportJobContext } from '../../machines/exportJob.ts';
import type { JobLifecycleContext } from '../../machines/jobLifecycle.ts';
import { MemoryStore } from '../../persistence/memory/index.ts';
import { createRuntime, runWorker, type Job, type JobId, type Runtime, type RuntimeEvent, type SendResult } from '../../src/index.ts';
import type { Definition } from '../../src/cli/loadMachines.ts';

declare const store: MemoryStore;
const runtime = await createRuntime({ store, machines: [jobLifecycle, exportJob, approvalFlow, retryingJob] });

// ---------------------------------------------------------------- start: machine ids and inputs

const job = await runtime.start('job-lifecycle', { name: 'resize', items: 2 });
expectTypeOf(job.machineId).toEqualTypeOf<'job-lifecycle'>();
expectTypeOf(job.context).toEqualTypeOf<JobLifecycleContext>();
expectTypeOf(job.id).toEqualTypeOf<JobId<'job-lifecycle'>>();
// The stored input is what the schema outputs: defaults filled in.
expectTypeOf(job.input).toEqualTypeOf<{ name: string; items: number }>();

// @ts-expect-error a misspelt machine id
await runtime.start('job-lifecycel', { name: 'resize' });
// @ts-expect-error a wrong input field (the schema is strict)
await runtime.start('job-lifecycle', { name: 'resize', itmes: 2 });
// @ts-expect-error a wrong input type
await runtime.start('export-job', { dataset: 'sales', rows: 'many' });
// @ts-expect-error a missing required input
await runtime.start('approval-flow', {});
await runtime.start('approval-flow', { subject: 'budget' }, { jobId: 'a1', idempotencyKey: 'k' });
// @ts-expect-error a misspelt start option
await runtime.start('approval-flow', { subject: 'budget' }, { jobID: 'a1' });

// startMany: the same ids and inputs, each item an input beside start's options.
const many = await runtime.startMany('job-lifecycle', [{ input: { name: 'a', items: 1 } }, { input: { name: 'b' }, idempotencyKey: 'k' }]);
expectTypeOf(many[0]!.id).toEqualTypeOf<JobId<'job-lifecycle'>>();
expectTypeOf(many[0]!.context).toEqualTypeOf<JobLifecycleContext>();
// @ts-expect-error a wrong input field
await runtime.startMany('job-lifecycle', [{ input: { name: 'a', itmes: 2 } }]);
// @ts-expect-error a missing required input
await runtime.startMany('approval-flow', [{ jobId: 'a2' }]);
// @ts-expect-error a misspelt item option
await runtime.startMany('approval-flow', [{ input: { subject: 'budget' }, jobID: 'a2' }]);
// @ts-expect-error a misspelt machine id
await runtime.startMany('job-lifecycel', []);

// ---------------------------------------------------------------- send: events by the job's machine

const sent = await runtime.send(job.id, { type: 'PROGRESS', percent: 40 });
expectTypeOf(sent.job.context).toEqualTypeOf<JobLifecycleContext>();
// @ts-expect-error an unknown event type for this job's machine
await runtime.send(job.id, { type: 'APPROVE', by: 'ann' });
// @ts-expect-error a misspelt discriminant
await runtime.send(job.id, { tpye: 'START' });
// @ts-expect-error a field of the wrong type
await runtime.send(job.id, { type: 'PROGRESS', percent: 'forty' });
// A job id from elsewhere (a request, a CLI) takes the event of any registered machine.
declare const fromRequest: string;
await runtime.send(fromRequest, { type: 'APPROVE', by: 'ann' });
// @ts-expect-error no registered machine has this event
await runtime.send(fromRequest, { type: 'NO_SUCH_EVENT' });

// ---------------------------------------------------------------- get, list, waitFor: narrow by machine id

const again = await runtime.get(job.id);
expectTypeOf(again.context).toEqualTypeOf<JobLifecycleContext>();
const anyJob = await runtime.get(fromRequest);
if (anyJob.machineId === 'export-job') expectTypeOf(anyJob.context).toEqualTypeOf<ExportJobContext>();
if (anyJob.machineId === 'approval-flow') expectTypeOf(anyJob.context).toEqualTypeOf<ApprovalFlowContext>();
const exports = await runtime.list({ machineId: 'export-job', status: 'active' });
expectTypeOf(exports).toEqualTypeOf<Job<(typeof runtime extends Runtime<infer C> ? C : never)['export-job']>[]>();
expectTypeOf(exports[0]!.context.rows).toEqualTypeOf<number>();
// @ts-expect-error a misspelt machine id in a filter
await runtime.list({ machineId: 'export-jbo' });
const done = await runtime.waitFor(job.id, (j) => j.context.progress === 100);
expectTypeOf(done.context).toEqualTypeOf<JobLifecycleContext>();
expectTypeOf(done.value).toEqualTypeOf<'queued' | 'processing' | 'completed' | 'partial' | 'failed' | 'cancelled'>();
// Child machines run as jobs `<parent>.<src>`: none among these, so no such id.
// @ts-expect-error
await runtime.list({ machineId: 'export-job.export' });

// ---------------------------------------------------------------- events: one union, each with jobId

runtime.subscribe((event) => {
  expectTypeOf(event.jobId).toExtend<string | null>();
  // @ts-expect-error a job id, or null: never undefined (every kind carries it)
  expectTypeOf(event.jobId).toExtend<string>();
  if (event.type === 'job.committed') {
    expectTypeOf(event.job.machineId).toEqualTypeOf<'job-lifecycle' | 'export-job' | 'approval-flow' | 'retrying-job'>();
    if (event.job.machineId === 'retrying-job') expectTypeOf(event.job.context.flakyAttempts).toEqualTypeOf<number>();
  }
  if (event.type === 'activity.started') expectTypeOf(event.jobId).toEqualTypeOf<string>();
});

// ---------------------------------------------------------------- untyped use keeps compiling

// A typed runtime is a Runtime: code written against the untyped API takes it.
const loose: Runtime = runtime;
void runWorker(runtime, { signal: AbortSignal.timeout(1) });
const listener = (event: RuntimeEvent): void => void event.type;
runtime.subscribe(listener);
const describe = (j: Job): string => `${j.machineId}@${j.revision}`;
describe(job);
const result: SendResult = sent;
void result;
// Through the untyped API, any id, input and event compile (the runtime checks them).
declare const machineIdFromCli: string;
declare const parsed: unknown;
await loose.start(machineIdFromCli, parsed);
await loose.send(fromRequest, parsed);
expectTypeOf(await loose.get(fromRequest)).toEqualTypeOf<Job<any>>();
// Machines loaded dynamically (the CLI's machines module) give an untyped runtime.
declare const loaded: Definition[];
const dynamic = await createRuntime({ store, machines: loaded });
await dynamic.start(machineIdFromCli, parsed);
await dynamic.send(fromRequest, parsed);
expectTypeOf((await dynamic.get(fromRequest)).machineId).toEqualTypeOf<string>();
const none = await createRuntime({ store, machines: [] });
await none.start(machineIdFromCli);

// ---------------------------------------------------------------- machines typed by XState only (no schemas)

const bareTyped = setup({ types: { input: {} as { n: number }, events: {} as { type: 'GO' } | { type: 'STOP'; why: string }, context: {} as { n: number } } }).createMachine({
  id: 'counter',
  context: ({ input }) => ({ n: input.n }),
  initial: 'idle',
  states: { idle: { on: { GO: 'running' } }, running: { on: { STOP: 'idle' } } },
});
const counter = await createRuntime({ store, machines: [bareTyped] });
const c = await counter.start('counter', { n: 1 });
expectTypeOf(c.context).toEqualTypeOf<{ n: number }>();
await counter.send(c.id, { type: 'STOP', why: 'done' });
// @ts-expect-error STOP needs its field
await counter.send(c.id, { type: 'STOP' });
// @ts-expect-error the input the machine declares
await counter.start('counter', { n: 'one' });

// ---------------------------------------------------------------- a machine with no declared events takes its schemas'

const schemaOnly = setup({ types: { context: {} as { seen: number } } }).createMachine({ id: 'schema-only', context: { seen: 0 }, on: { PING: {} } });
const pings = await createRuntime({ store, machines: [{ machine: schemaOnly, events: { PING: z.strictObject({ type: z.literal('PING'), n: z.number() }) } }] });
const p = await pings.start('schema-only');
await pings.send(p.id, { type: 'PING', n: 1 });
// @ts-expect-error the schema's field
await pings.send(p.id, { type: 'PING', n: '1' });
