import { assign, setup } from 'xstate';
import { z } from 'zod';
import { activity, defineJob } from '../src/runtime/defineJob.ts';

/**
 * The job lifecycle with durable work, retries and cancellation:
 * `queued → processing → completed | partial | failed`, or `cancelled` from any non-final state.
 *
 * `processing` invokes the `process` activity, which works through `items` (reporting progress)
 * and may fail `flakyAttempts` times with a retryable error before it succeeds. Spool retries it
 * with backoff (3 attempts), passes a stable idempotency key, and aborts it on cancel.
 * Exhausted retries deliver the error: the job ends `failed` with the reason in context.
 */
export const retryingJobInput = z.strictObject({
  name: z.string().min(1).max(200),
  items: z.number().int().min(1).max(10_000).default(3),
  /** Items that fail (the job ends `partial`, or `failed` if all fail). */
  failItems: z.number().int().min(0).max(10_000).default(0),
  /** Attempts that fail with a retryable error before one succeeds. */
  flakyAttempts: z.number().int().min(0).max(10).default(0),
  /** Start processing without waiting for START. */
  autoStart: z.boolean().default(false),
});

export const retryingJobEvents = {
  START: z.strictObject({ type: z.literal('START') }),
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
};

type Input = z.input<typeof retryingJobInput>;
type Event = { [K in keyof typeof retryingJobEvents]: z.infer<(typeof retryingJobEvents)[K]> }[keyof typeof retryingJobEvents];
interface ProcessOutput {
  succeeded: number;
  failed: number;
}

export interface RetryingJobContext {
  name: string;
  items: number;
  failItems: number;
  flakyAttempts: number;
  autoStart: boolean;
  succeeded: number;
  failed: number;
  progress: number;
  error: string | null;
}

export const retryingJobMachine = setup({
  types: { context: {} as RetryingJobContext, events: {} as Event, input: {} as Input },
  actors: {
    /** Works through the items; the args carry Spool's attempt, idempotency key and progress. */
    process: activity<ProcessOutput, { items: number; failItems: number; flakyAttempts: number }>(async ({ input, signal, attempt, progress }) => {
      if (attempt <= input.flakyAttempts) {
        throw Object.assign(new Error(`provider unavailable (attempt ${attempt})`), { retryable: true });
      }
      for (let i = 1; i <= input.items; i += 1) {
        if (signal.aborted) throw new Error('aborted');
        if (i % Math.max(1, Math.floor(input.items / 4)) === 0) await progress(Math.floor((i / input.items) * 99));
      }
      const failed = Math.min(input.failItems, input.items);
      return { succeeded: input.items - failed, failed };
    }),
  },
  guards: {
    autoStart: ({ context }) => context.autoStart,
    noneFailed: ({ context }) => context.failed === 0,
    someSucceeded: ({ context }) => context.succeeded > 0,
  },
}).createMachine({
  id: 'retrying-job',
  context: ({ input }) => ({
    name: input.name,
    items: input.items ?? 3,
    failItems: input.failItems ?? 0,
    flakyAttempts: input.flakyAttempts ?? 0,
    autoStart: input.autoStart ?? false,
    succeeded: 0,
    failed: 0,
    progress: 0,
    error: null,
  }),
  initial: 'queued',
  states: {
    queued: {
      always: { guard: 'autoStart', target: 'processing' },
      on: { START: 'processing', CANCEL: { target: 'cancelled', actions: assign({ error: ({ event }) => event.reason ?? 'cancelled' }) } },
    },
    processing: {
      invoke: {
        id: 'process',
        src: 'process',
        input: ({ context }) => ({ items: context.items, failItems: context.failItems, flakyAttempts: context.flakyAttempts }),
        onDone: { target: 'counted', actions: assign(({ event }) => ({ succeeded: event.output.succeeded, failed: event.output.failed })) },
        onError: { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { message?: string })?.message ?? event.error) }) },
      },
      on: { CANCEL: { target: 'cancelled', actions: assign({ error: ({ event }) => event.reason ?? 'cancelled' }) } },
    },
    counted: {
      always: [{ guard: 'noneFailed', target: 'completed' }, { guard: 'someSucceeded', target: 'partial' }, { target: 'failed' }],
    },
    completed: { type: 'final', entry: assign({ progress: 100 }) },
    partial: { type: 'final', entry: assign({ progress: 100 }) },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

/** Registered as `retrying-job` version 1. */
export const retryingJob = defineJob({
  machine: retryingJobMachine,
  version: 1,
  input: retryingJobInput,
  events: retryingJobEvents,
  activities: { process: { maxAttempts: 3, backoff: { initialMs: 200, factor: 2, maxMs: 5_000, jitter: 0.1 } } },
  description: 'queued → processing (a retried activity) → completed | partial | failed, or cancelled',
});
