/**
 * Fixture for the `workers` bench section: a machine that cannot finish without a worker. Its
 * initial state invokes a trivial `fromPromise` activity (returns at once); onDone it ends in the
 * final state `done`. Started by a runtime with `runEffects: false`, every job waits in `working`
 * with its activity due until a worker process claims and runs it.
 */
import { assign, fromPromise, setup } from 'xstate';

export const benchWorkMachine = setup({
  types: { context: {} as { n: number; result: number | null }, input: {} as { n: number } },
  actors: {
    work: fromPromise<number, { n: number }>(async ({ input }) => input.n + 1),
  },
}).createMachine({
  id: 'bench-work',
  context: ({ input }) => ({ n: input.n, result: null }),
  initial: 'working',
  states: {
    working: {
      invoke: {
        id: 'work',
        src: 'work',
        input: ({ context }) => ({ n: context.n }),
        onDone: { target: 'done', actions: assign({ result: ({ event }) => event.output }) },
      },
    },
    done: { type: 'final' },
  },
});

/** Registered as `bench-work` version 1. */
export const benchWork = {
  machine: benchWorkMachine,
  version: 1,
  activities: { work: { maxAttempts: 3, backoff: { initialMs: 50, maxMs: 500 } } },
  description: 'working (one trivial activity) → done',
};
