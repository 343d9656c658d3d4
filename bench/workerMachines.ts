/**
 * The bench's activity jobs: machines that cannot finish without running activities. `activityChain(id, steps)`
 * builds one whose `steps` states each invoke a trivial `fromPromise` activity (it does no work:
 * it resolves at once, on a microtask); each onDone moves to the next state, the last to the final
 * state `done`. The `jobs` section runs 1- and 3-step chains, the `workers` section the 1-step
 * `bench-work`; the jobs section's afternoon baseline runs the very same machines with `createActor`.
 */
import { assign, fromPromise, setup, type AnyStateMachine } from 'xstate';

/** The registration `createRuntime({ machines })` takes for a chain (version 1, a retry policy per activity). */
export interface ChainDefinition {
  machine: AnyStateMachine;
  version: number;
  activities: Record<string, { maxAttempts: number; backoff: { initialMs: number; maxMs: number } }>;
  description: string;
}

/**
 * A machine `step1 → … → step<steps> → done`, each step invoking the activity `work`: no work
 * (it resolves on a microtask), or `work()` awaited first (an activity that takes time, or fails).
 */
/** What an activity's work is told of its attempt: the effect's idempotency key and the attempt's number (from 1). */
export interface AttemptInfo {
  key: string;
  attempt: number;
}

export function activityChain(id: string, steps: number, work?: (attempt: AttemptInfo) => Promise<void>): ChainDefinition {
  const names = Array.from({ length: steps }, (_, k) => `step${k + 1}`);
  const states: Record<string, unknown> = { done: { type: 'final' } };
  names.forEach((name, k) => {
    states[name] = {
      invoke: {
        id: 'work',
        src: 'work',
        input: ({ context }: { context: { n: number } }) => ({ n: context.n }),
        onDone: { target: names[k + 1] ?? 'done', actions: assign({ result: ({ event }: { event: { output: number } }) => event.output }) },
      },
    };
  });
  const machine = setup({
    types: { context: {} as { n: number; result: number | null }, input: {} as { n: number } },
    actors: {
      work: fromPromise<number, { n: number }>(async (args) => {
        // Spool passes the attempt's key and number beside XState's arguments (ActivityArgs).
        const { idempotencyKey = '', attempt = 1 } = args as { idempotencyKey?: string; attempt?: number };
        if (work) await work({ key: idempotencyKey, attempt });
        return args.input.n + 1;
      }),
    },
  }).createMachine({
    id,
    context: ({ input }) => ({ n: input.n, result: null }),
    initial: names[0]!,
    states: states as never,
  });
  return {
    // The machine's state names are built at run time, so its precise type says nothing useful.
    machine: machine as unknown as AnyStateMachine,
    version: 1,
    activities: { work: { maxAttempts: 3, backoff: { initialMs: 50, maxMs: 500 } } },
    description: `${names.join(' → ')} → done, each step one ${work ? 'fromPromise activity that takes time' : 'no-work fromPromise activity'}`,
  };
}

/** The `workers` section's machine: `working` (one trivial activity) → `done`, registered as `bench-work` version 1. */
export const benchWork = activityChain('bench-work', 1);
