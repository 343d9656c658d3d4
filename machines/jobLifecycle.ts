import { assign, setup } from 'xstate';
import { z } from 'zod';
import { defineJob } from '../src/runtime/defineJob.ts';

/**
 * The job lifecycle users know from job services:
 * `queued → processing → completed | partial | failed`, or `cancelled`.
 *
 * A job may have `items`: each `ITEM_DONE`/`ITEM_FAILED` counts one, progress follows the counts,
 * and when the last item is counted the job ends by itself (completed, partial or failed).
 * A job without items reports `PROGRESS` itself and ends with `FINISH` or `FAIL`.
 * Progress (0-100) never goes back and is always recomputable from the counts when items are used.
 */
export const jobLifecycleInput = z.strictObject({
  name: z.string().min(1).max(200),
  items: z.number().int().min(0).max(1_000_000).default(0),
});

export const jobLifecycleEvents = {
  START: z.strictObject({ type: z.literal('START') }),
  PROGRESS: z.strictObject({ type: z.literal('PROGRESS'), percent: z.number().min(0).max(100) }),
  ITEM_DONE: z.strictObject({ type: z.literal('ITEM_DONE') }),
  ITEM_FAILED: z.strictObject({ type: z.literal('ITEM_FAILED'), reason: z.string().max(2000).optional() }),
  FINISH: z.strictObject({ type: z.literal('FINISH') }),
  FAIL: z.strictObject({ type: z.literal('FAIL'), reason: z.string().min(1).max(2000) }),
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
};

type Input = z.input<typeof jobLifecycleInput>;
type Event = { [K in keyof typeof jobLifecycleEvents]: z.infer<(typeof jobLifecycleEvents)[K]> }[keyof typeof jobLifecycleEvents];

export interface JobLifecycleContext {
  name: string;
  items: number;
  succeeded: number;
  failed: number;
  progress: number;
  error: string | null;
  /** Set on entering a final state. */
  outcome: 'completed' | 'partial' | 'failed' | 'cancelled' | null;
}

const countedProgress = (c: JobLifecycleContext, succeeded: number, failed: number) =>
  c.items > 0 ? Math.floor(((succeeded + failed) / c.items) * 100) : c.progress;

export const jobLifecycleMachine = setup({
  types: {
    context: {} as JobLifecycleContext,
    events: {} as Event,
    input: {} as Input,
    output: {} as { outcome: string; succeeded: number; failed: number; error: string | null },
  },
  guards: {
    itemsLeft: ({ context }) => context.items === 0 || context.succeeded + context.failed < context.items,
    allCounted: ({ context }) => context.items > 0 && context.succeeded + context.failed >= context.items,
    allCountedNoneFailed: ({ context }) => context.items > 0 && context.succeeded + context.failed >= context.items && context.failed === 0,
    allCountedSomeSucceeded: ({ context }) => context.items > 0 && context.succeeded + context.failed >= context.items && context.succeeded > 0,
    noneFailed: ({ context }) => context.failed === 0,
    someSucceeded: ({ context }) => context.succeeded > 0,
  },
  actions: {
    countDone: assign(({ context }) => ({ succeeded: context.succeeded + 1, progress: countedProgress(context, context.succeeded + 1, context.failed) })),
    countFailed: assign(({ context }) => ({ failed: context.failed + 1, progress: countedProgress(context, context.succeeded, context.failed + 1) })),
    reportProgress: assign({
      progress: ({ context, event }) => (event.type === 'PROGRESS' ? Math.max(context.progress, Math.floor(event.percent)) : context.progress),
    }),
    recordError: assign({
      error: ({ event }) => (event.type === 'FAIL' ? event.reason : event.type === 'CANCEL' ? (event.reason ?? 'cancelled') : null),
    }),
    fullProgress: assign({ progress: 100 }),
  },
}).createMachine({
  id: 'job-lifecycle',
  context: ({ input }) => ({ name: input.name, items: input.items ?? 0, succeeded: 0, failed: 0, progress: 0, error: null, outcome: null }),
  initial: 'queued',
  states: {
    queued: {
      on: { START: 'processing', CANCEL: { target: 'cancelled', actions: 'recordError' } },
    },
    processing: {
      always: [
        { guard: 'allCountedNoneFailed', target: 'completed' },
        { guard: 'allCountedSomeSucceeded', target: 'partial' },
        { guard: 'allCounted', target: 'failed' },
      ],
      on: {
        PROGRESS: { actions: 'reportProgress' },
        ITEM_DONE: { guard: 'itemsLeft', actions: 'countDone' },
        ITEM_FAILED: { guard: 'itemsLeft', actions: 'countFailed' },
        FINISH: [{ guard: 'noneFailed', target: 'completed' }, { guard: 'someSucceeded', target: 'partial' }, { target: 'failed' }],
        FAIL: { target: 'failed', actions: 'recordError' },
        CANCEL: { target: 'cancelled', actions: 'recordError' },
      },
    },
    completed: { type: 'final', entry: ['fullProgress', assign({ outcome: 'completed' })] },
    partial: { type: 'final', entry: ['fullProgress', assign({ outcome: 'partial' })] },
    failed: { type: 'final', entry: assign({ outcome: 'failed' }) },
    cancelled: { type: 'final', entry: assign({ outcome: 'cancelled' }) },
  },
  output: ({ context }) => ({
    outcome: context.outcome ?? 'unknown',
    succeeded: context.succeeded,
    failed: context.failed,
    error: context.error,
  }),
});

/** Registered as `job-lifecycle` version 1. */
export const jobLifecycle = defineJob({
  machine: jobLifecycleMachine,
  version: 1,
  input: jobLifecycleInput,
  events: jobLifecycleEvents,
  description: 'queued → processing → completed | partial | failed (or cancelled), with progress and item counts',
});
