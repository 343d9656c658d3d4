import { assign, cancel, fromPromise, raise, sendTo, setup } from 'xstate';
import { z } from 'zod';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../../machines/index.ts';

/**
 * Machines for the crash harness (and the fuzz tests). Pure XState + zod like the reference
 * machines; every one of them ends by itself or by an event the harness's workload always sends,
 * so "every job final in the end" is a fair demand.
 *
 * - `crash-tally`: counts INC and ADD events; STOP or CANCEL end it. Its context is a function of
 *   the applied history, so a lost or doubled transition shows in the numbers. POISON is a poison
 *   event (its action throws a BigInt-holding object quoting the sensitive `secret`): recorded
 *   failed, the events after it applied, the secret nowhere in the records.
 * - `crash-flaky`: a safe activity that fails its first `failFirst` attempts (retried with a 10 ms
 *   backoff, 3 attempts), then an unsafe-to-repeat `commit` activity (an interruption gives
 *   SPOOL_INDETERMINATE and the job ends `unknown`), under a `deadlineMs` timeout.
 * - `crash-ticker`: timers only: an `after` step, then a state with a delayed raise, a delayed
 *   sendTo self and an `after` exit; SNOOZE and the first PONG re-enter it (every timer cancelled
 *   and rescheduled: a timer that already fired is then stale), SKIP jumps.
 */

// ------------------------------------------------------------------ crash-tally

export const tallyEvents = {
  INC: z.strictObject({ type: z.literal('INC') }),
  ADD: z.strictObject({ type: z.literal('ADD'), n: z.number().int().min(-1000).max(1000) }),
  STOP: z.strictObject({ type: z.literal('STOP') }),
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
  /** A poison event: its action throws what JSON cannot hold, quoting the sensitive `secret`. */
  POISON: z.strictObject({ type: z.literal('POISON'), secret: z.string().max(200) }),
};
type TallyEvent = { [K in keyof typeof tallyEvents]: z.infer<(typeof tallyEvents)[K]> }[keyof typeof tallyEvents];

export const tallyMachine = setup({
  types: { context: {} as { count: number; sum: number; ops: number }, events: {} as TallyEvent },
}).createMachine({
  id: 'crash-tally',
  initial: 'counting',
  context: { count: 0, sum: 0, ops: 0 },
  states: {
    counting: {
      on: {
        INC: { actions: assign({ count: ({ context }) => context.count + 1, ops: ({ context }) => context.ops + 1 }) },
        ADD: { actions: assign({ sum: ({ context, event }) => context.sum + event.n, ops: ({ context }) => context.ops + 1 }) },
        STOP: 'stopped',
        CANCEL: 'cancelled',
        POISON: {
          actions: assign(({ event }) => {
            throw { code: 'POISON', quoted: `card ${event.type === 'POISON' ? event.secret : ''}`, big: 1n };
          }),
        },
      },
    },
    stopped: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export const tally = { machine: tallyMachine, version: 1, input: z.strictObject({}), events: tallyEvents, sensitive: ['secret'] };

// ------------------------------------------------------------------ crash-flaky

export const flakyInput = z.strictObject({
  /** Attempts of `work` that fail with a retryable error before one succeeds (3 or more: exhausted). */
  failFirst: z.number().int().min(0).max(10).default(0),
  /** Real time each activity takes in the worker, in ms. */
  workMs: z.number().int().min(0).max(1000).default(0),
  deadlineMs: z.number().int().min(1).max(3_600_000).default(60_000),
});
export const flakyEvents = { CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }) };

interface FlakyContext {
  failFirst: number;
  workMs: number;
  deadlineMs: number;
  worked: number | null;
  committed: number | null;
  error: string | null;
}

/** Wait `ms` of real time, or reject when the attempt is aborted (the activity's own work). */
function busy(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error('aborted'));
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new Error('aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export const flakyMachine = setup({
  types: { context: {} as FlakyContext, events: {} as z.infer<typeof flakyEvents.CANCEL>, input: {} as z.input<typeof flakyInput> },
  actors: {
    work: fromPromise<{ attempt: number }, { failFirst: number; workMs: number }>(async ({ input, signal, ...spool }) => {
      const { attempt } = spool as unknown as { attempt: number };
      if (input.workMs > 0) await busy(input.workMs, signal);
      if (attempt <= input.failFirst) throw Object.assign(new Error(`flaky (attempt ${attempt})`), { retryable: true });
      return { attempt };
    }),
    commit: fromPromise<{ attempt: number }, { workMs: number }>(async ({ input, signal, ...spool }) => {
      const { attempt } = spool as unknown as { attempt: number };
      if (input.workMs > 0) await busy(input.workMs, signal);
      return { attempt };
    }),
  },
  delays: { deadline: ({ context }) => context.deadlineMs },
  guards: {
    indeterminate: ({ event }) => (event as { error?: { code?: string } }).error?.code === 'SPOOL_INDETERMINATE',
  },
}).createMachine({
  id: 'crash-flaky',
  context: ({ input }) => ({
    failFirst: input.failFirst ?? 0,
    workMs: input.workMs ?? 0,
    deadlineMs: input.deadlineMs ?? 60_000,
    worked: null,
    committed: null,
    error: null,
  }),
  initial: 'working',
  on: { CANCEL: '.cancelled' },
  states: {
    working: {
      invoke: {
        id: 'work',
        src: 'work',
        input: ({ context }) => ({ failFirst: context.failFirst, workMs: context.workMs }),
        onDone: { target: 'committing', actions: assign({ worked: ({ event }) => event.output.attempt }) },
        onError: { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { code?: string })?.code ?? 'error') }) },
      },
      after: { deadline: 'timedOut' },
    },
    committing: {
      invoke: {
        id: 'commit',
        src: 'commit',
        input: ({ context }) => ({ workMs: context.workMs }),
        onDone: { target: 'done', actions: assign({ committed: ({ event }) => event.output.attempt }) },
        onError: [
          { guard: 'indeterminate', target: 'unknown' },
          { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { code?: string })?.code ?? 'error') }) },
        ],
      },
    },
    done: { type: 'final' },
    unknown: { type: 'final' },
    failed: { type: 'final' },
    timedOut: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export const flaky = {
  machine: flakyMachine,
  version: 1,
  input: flakyInput,
  events: flakyEvents,
  activities: {
    work: { maxAttempts: 3, backoff: { initialMs: 10, factor: 2, maxMs: 100, jitter: 0 } },
    commit: { maxAttempts: 2, backoff: { initialMs: 10, jitter: 0 }, unsafeToRepeat: true },
  },
};

// ------------------------------------------------------------------ crash-ticker

export const tickerInput = z.strictObject({
  startMs: z.number().int().min(0).max(3_600_000).default(50),
  pingMs: z.number().int().min(0).max(3_600_000).default(50),
  pongMs: z.number().int().min(0).max(3_600_000).default(50),
  endMs: z.number().int().min(1).max(3_600_000).default(100),
});
export const tickerEvents = {
  SKIP: z.strictObject({ type: z.literal('SKIP') }),
  SNOOZE: z.strictObject({ type: z.literal('SNOOZE') }),
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
};
type TickerEvent =
  | { [K in keyof typeof tickerEvents]: z.infer<(typeof tickerEvents)[K]> }[keyof typeof tickerEvents]
  | { type: 'PING' }
  | { type: 'PONG' };

interface TickerContext {
  startMs: number;
  pingMs: number;
  pongMs: number;
  endMs: number;
  visits: number;
  pings: number;
  pongs: number;
}

export const tickerMachine = setup({
  types: { context: {} as TickerContext, events: {} as TickerEvent, input: {} as z.input<typeof tickerInput> },
  delays: {
    start: ({ context }) => context.startMs,
    ping: ({ context }) => context.pingMs,
    pong: ({ context }) => context.pongMs,
    end: ({ context }) => context.endMs,
  },
}).createMachine({
  id: 'crash-ticker',
  context: ({ input }) => ({
    startMs: input.startMs ?? 50,
    pingMs: input.pingMs ?? 50,
    pongMs: input.pongMs ?? 50,
    endMs: input.endMs ?? 100,
    visits: 0,
    pings: 0,
    pongs: 0,
  }),
  initial: 'waiting',
  on: { CANCEL: '.cancelled' },
  states: {
    waiting: { after: { start: 'ticking' }, on: { SKIP: 'ticking' } },
    ticking: {
      entry: [
        assign({ visits: ({ context }) => context.visits + 1 }),
        raise({ type: 'PING' }, { delay: 'ping', id: 'ping' }),
        sendTo(({ self }) => self, { type: 'PONG' }, { delay: 'pong', id: 'pong' }),
      ],
      exit: [cancel('ping'), cancel('pong')],
      after: { end: 'finished' },
      on: {
        PING: { actions: assign({ pings: ({ context }) => context.pings + 1 }) },
        // The first PONG re-enters `ticking` (every timer of the visit cancelled and scheduled again):
        // a PING or end timer that fired in the same round is then stale.
        PONG: [
          { guard: ({ context }) => context.pongs === 0, target: 'ticking', reenter: true, actions: assign({ pongs: ({ context }) => context.pongs + 1 }) },
          { actions: assign({ pongs: ({ context }) => context.pongs + 1 }) },
        ],
        SNOOZE: { target: 'ticking', reenter: true },
        SKIP: 'finished',
      },
    },
    finished: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export const ticker = { machine: tickerMachine, version: 1, input: tickerInput, events: tickerEvents };

/** What every harness process registers: these three and the reference machines. */
export const CRASH_MACHINES = [tally, flaky, ticker, jobLifecycle, retryingJob, exportJob, approvalFlow];
