import { assign, setup } from 'xstate';
import { z } from 'zod';
import { activity, defineJob } from '../src/runtime/defineJob.ts';

/**
 * An export through an external provider that charges per export, so it must not run twice:
 *
 * `reserving` asks the provider for a reference (safe to repeat), `exporting` runs the export under
 * that reference (declared unsafe to repeat: after a crash mid-export Spool does not re-run it but
 * delivers an indeterminate-outcome error), and `reconciling` asks the provider, by the stored
 * reference, whether the export happened, instead of paying twice. The export reports progress
 * and attaches its file as an asset (once, even across retries).
 *
 * The provider here is a deterministic stand-in: an export's result is a function of its
 * reference, so a lookup finds what an interrupted export produced.
 */
export const exportJobInput = z.strictObject({
  dataset: z.string().min(1).max(200),
  format: z.enum(['csv', 'json']).default('csv'),
  rows: z.number().int().min(1).max(10_000_000).default(1000),
  /** Export attempts that fail with a retryable error first (to see retries). */
  flakyAttempts: z.number().int().min(0).max(10).default(0),
});

export const exportJobEvents = {
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
};

type Input = z.input<typeof exportJobInput>;
type Event = z.infer<typeof exportJobEvents.CANCEL>;

interface ExportResult {
  uri: string;
  size: number;
}

/** What the stand-in provider produced (or would produce) for a reference. */
const providerResult = (ref: string, format: string, rows: number): ExportResult => ({
  uri: `provider://exports/${ref}.${format}`,
  size: rows * (format === 'csv' ? 48 : 96),
});

export interface ExportJobContext {
  dataset: string;
  format: 'csv' | 'json';
  rows: number;
  flakyAttempts: number;
  providerRef: string | null;
  result: ExportResult | null;
  reconciled: boolean;
  progress: number;
  error: string | null;
}

export const exportJobMachine = setup({
  types: { context: {} as ExportJobContext, events: {} as Event, input: {} as Input },
  actors: {
    reserve: activity<{ providerRef: string }, { dataset: string }>(async ({ input, idempotencyKey }) => {
      // A real provider would be called with the idempotency key; the reference derives from it.
      let hash = 0;
      for (const ch of idempotencyKey) hash = (Math.imul(hash, 31) + ch.charCodeAt(0)) >>> 0;
      const ref = `${input.dataset}-${hash.toString(36)}`;
      return { providerRef: ref };
    }),
    export: activity<ExportResult, { providerRef: string; format: string; rows: number; flakyAttempts: number }>(async ({ input, signal, attempt, progress, attachAsset }) => {
      if (attempt <= input.flakyAttempts) throw Object.assign(new Error(`provider busy (attempt ${attempt})`), { retryable: true, retryAfterMs: 100 });
      for (const pct of [25, 50, 75]) {
        if (signal.aborted) throw new Error('export aborted');
        await progress(pct);
      }
      const result = providerResult(input.providerRef, input.format, input.rows);
      await attachAsset({ type: `export/${input.format}`, uri: result.uri, size: result.size });
      return result;
    }),
    lookup: activity<{ found: boolean; result: ExportResult | null }, { providerRef: string; format: string; rows: number }>(async ({ input, attachAsset }) => {
      const result = providerResult(input.providerRef, input.format, input.rows);
      await attachAsset({ type: `export/${input.format}`, uri: result.uri, size: result.size });
      return { found: true, result };
    }),
  },
  guards: {
    indeterminate: ({ event }) => (event as { error?: { code?: string } }).error?.code === 'SPOOL_INDETERMINATE',
    found: ({ event }) => (event as { output?: { found?: boolean } }).output?.found === true,
  },
}).createMachine({
  id: 'export-job',
  context: ({ input }) => ({
    dataset: input.dataset,
    format: input.format ?? 'csv',
    rows: input.rows ?? 1000,
    flakyAttempts: input.flakyAttempts ?? 0,
    providerRef: null,
    result: null,
    reconciled: false,
    progress: 0,
    error: null,
  }),
  initial: 'reserving',
  on: { CANCEL: { target: '.cancelled', actions: assign({ error: ({ event }) => event.reason ?? 'cancelled' }) } },
  states: {
    reserving: {
      invoke: {
        id: 'reserve',
        src: 'reserve',
        input: ({ context }) => ({ dataset: context.dataset }),
        onDone: { target: 'exporting', actions: assign({ providerRef: ({ event }) => event.output.providerRef }) },
        onError: { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { message?: string })?.message) }) },
      },
    },
    exporting: {
      invoke: {
        id: 'export',
        src: 'export',
        input: ({ context }) => ({ providerRef: context.providerRef!, format: context.format, rows: context.rows, flakyAttempts: context.flakyAttempts }),
        onDone: { target: 'completed', actions: assign({ result: ({ event }) => event.output }) },
        onError: [
          { guard: 'indeterminate', target: 'reconciling' },
          { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { message?: string })?.message) }) },
        ],
      },
    },
    reconciling: {
      invoke: {
        id: 'lookup',
        src: 'lookup',
        input: ({ context }) => ({ providerRef: context.providerRef!, format: context.format, rows: context.rows }),
        onDone: [
          { guard: 'found', target: 'completed', actions: assign({ result: ({ event }) => event.output.result, reconciled: true }) },
          { target: 'exporting' },
        ],
        onError: { target: 'failed', actions: assign({ error: ({ event }) => String((event.error as { message?: string })?.message) }) },
      },
    },
    completed: { type: 'final', entry: assign({ progress: 100 }) },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

/** Registered as `export-job` version 1. */
export const exportJob = defineJob({
  machine: exportJobMachine,
  version: 1,
  input: exportJobInput,
  events: exportJobEvents,
  activities: {
    reserve: { maxAttempts: 5, backoff: { initialMs: 100 } },
    export: { maxAttempts: 3, backoff: { initialMs: 100 }, unsafeToRepeat: true },
    lookup: { maxAttempts: 5, backoff: { initialMs: 100 } },
  },
  description: 'reserving → exporting (unsafe to repeat; progress, asset) → completed, reconciling by provider reference after a crash',
});
