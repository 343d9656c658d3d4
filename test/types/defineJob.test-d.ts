/**
 * Compile-time tests of `defineJob` and `activity` (checked by tsc in `npm test`; nothing here
 * runs): a definition's activities, policy keys, cancel event and state and event schemas are
 * checked against its machine, and an activity's Spool arguments are typed with no cast.
 */
import { expectTypeOf } from 'vitest';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { MemoryStore } from '../../persistence/memory/index.ts';
import { activity, createRuntime, defineJob, type AssetInput, type DeferredCompletion } from '../../src/index.ts';

const render = activity<{ uri: string }, { width: number }>(async ({ input, idempotencyKey, attempt, jobId, signal, progress, attachAsset, defer }) => {
  expectTypeOf(input).toEqualTypeOf<{ width: number }>();
  expectTypeOf(idempotencyKey).toEqualTypeOf<string>();
  expectTypeOf(attempt).toEqualTypeOf<number>();
  expectTypeOf(jobId).toEqualTypeOf<string>();
  expectTypeOf(signal).toEqualTypeOf<AbortSignal>();
  expectTypeOf(progress).toEqualTypeOf<(percent: number) => Promise<void>>();
  expectTypeOf(attachAsset).parameter(0).toEqualTypeOf<AssetInput>();
  // defer returns what the activity may return: no cast.
  expectTypeOf(defer()).toEqualTypeOf<DeferredCompletion<{ uri: string }>>();
  if (attempt > 1) return defer((token) => void token);
  await progress(50);
  await attachAsset({ type: 'image/png', uri: `s3://out/${input.width}.png` });
  return { uri: `s3://out/${input.width}.png` };
});

// @ts-expect-error the output the activity declares
activity<{ uri: string }>(async () => ({ url: 'x' }));
declare const otherDeferred: DeferredCompletion<{ size: number }>;
// @ts-expect-error a deferred completion of another output type
activity<{ uri: string }>(async () => otherDeferred);

const imageMachine = setup({
  types: { input: {} as { width: number }, context: {} as { width: number; uri: string | null }, events: {} as { type: 'CANCEL' } | { type: 'RETRY' } },
  actors: { render },
}).createMachine({
  id: 'image-render',
  context: ({ input }) => ({ width: input.width, uri: null }),
  initial: 'rendering',
  on: { CANCEL: '.stopped' },
  states: {
    rendering: {
      invoke: {
        id: 'render',
        src: 'render',
        input: ({ context }) => ({ width: context.width }),
        onDone: { target: 'done', actions: assign({ uri: ({ event }) => event.output.uri }) },
      },
    },
    done: { type: 'final' },
    stopped: { type: 'final' },
  },
});

const image = defineJob({
  machine: imageMachine,
  input: z.strictObject({ width: z.number().int().min(1) }),
  activities: { render: { maxAttempts: 5, backoff: { initialMs: 100 }, unsafeToRepeat: true } },
  cancel: { event: 'CANCEL', state: 'stopped' },
  events: { CANCEL: z.strictObject({ type: z.literal('CANCEL') }) },
});
expectTypeOf(image.activities.render.maxAttempts).toEqualTypeOf<number>();

// @ts-expect-error an activity the machine does not have
defineJob({ machine: imageMachine, activities: { rendr: { maxAttempts: 2 } } });
// @ts-expect-error a misspelt policy key
defineJob({ machine: imageMachine, activities: { render: { maxAttempt: 2 } } });
// @ts-expect-error a misspelt backoff key
defineJob({ machine: imageMachine, activities: { render: { backoff: { initialMS: 100 } } } });
// @ts-expect-error a cancel state the machine lacks
defineJob({ machine: imageMachine, cancel: { state: 'canceled' } });
// @ts-expect-error a cancel event the machine does not declare
defineJob({ machine: imageMachine, cancel: { event: 'STOP' } });
// @ts-expect-error an event schema for an event the machine does not declare
defineJob({ machine: imageMachine, events: { PAUSE: z.object({ type: z.literal('PAUSE') }) } });
// @ts-expect-error an input schema that is not a zod schema
defineJob({ machine: imageMachine, input: { width: 1 } });
// A wildcard schema key is the runtime's to match.
defineJob({ machine: imageMachine, events: { '*': z.object({ type: z.string() }) } });
// Nested states are named by their paths.
const nested = setup({}).createMachine({ id: 'nested', initial: 'work', states: { work: { initial: 'busy', states: { busy: {}, halted: {} } } } });
defineJob({ machine: nested, cancel: { state: 'work.halted' } });
// @ts-expect-error a child state by its bare name
defineJob({ machine: nested, cancel: { state: 'halted' } });

// A defined job types the runtime: its id (from the machine, or the definition's), input and events.
declare const store: MemoryStore;
const renamed = defineJob({ machine: imageMachine, id: 'thumbnails' });
const runtime = await createRuntime({ store, machines: [image, renamed] });
const job = await runtime.start('image-render', { width: 640 });
expectTypeOf(job.context.uri).toEqualTypeOf<string | null>();
await runtime.start('thumbnails', { width: 64 });
// @ts-expect-error the input schema's field
await runtime.start('image-render', { width: 'wide' });
// @ts-expect-error a misspelt machine id
await runtime.start('image-rendr', { width: 640 });
// @ts-expect-error an event the machine does not declare
await runtime.send(job.id, { type: 'PAUSE' });
await runtime.send(job.id, { type: 'RETRY' });
