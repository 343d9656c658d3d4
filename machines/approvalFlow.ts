import { assign, cancel, raise, setup } from 'xstate';
import { z } from 'zod';
import { defineJob } from '../src/runtime/defineJob.ts';

/**
 * An approval that waits for a human decision: a reminder after `remindAfterMs` (a delayed
 * `raise`, cancelled when the decision arrives) and a deadline after `deadlineMs` (an `after`
 * transition). Both are durable: a restart keeps their original deadlines.
 */
export const approvalFlowInput = z.strictObject({
  subject: z.string().min(1).max(500),
  remindAfterMs: z.number().int().min(0).max(365 * 86_400_000).default(86_400_000),
  deadlineMs: z.number().int().min(1).max(365 * 86_400_000).default(3 * 86_400_000),
});

export const approvalFlowEvents = {
  APPROVE: z.strictObject({ type: z.literal('APPROVE'), by: z.string().min(1).max(200), comment: z.string().max(2000).optional() }),
  REJECT: z.strictObject({ type: z.literal('REJECT'), by: z.string().min(1).max(200), reason: z.string().min(1).max(2000) }),
  CANCEL: z.strictObject({ type: z.literal('CANCEL'), reason: z.string().max(2000).optional() }),
};

type Input = z.input<typeof approvalFlowInput>;
type Event =
  | { [K in keyof typeof approvalFlowEvents]: z.infer<(typeof approvalFlowEvents)[K]> }[keyof typeof approvalFlowEvents]
  | { type: 'REMIND' };

export interface ApprovalFlowContext {
  subject: string;
  remindAfterMs: number;
  deadlineMs: number;
  reminders: number;
  decidedBy: string | null;
  note: string | null;
}

export const approvalFlowMachine = setup({
  types: { context: {} as ApprovalFlowContext, events: {} as Event, input: {} as Input },
  delays: {
    reminder: ({ context }) => context.remindAfterMs,
    deadline: ({ context }) => context.deadlineMs,
  },
}).createMachine({
  id: 'approval-flow',
  context: ({ input }) => ({
    subject: input.subject,
    remindAfterMs: input.remindAfterMs ?? 86_400_000,
    deadlineMs: input.deadlineMs ?? 3 * 86_400_000,
    reminders: 0,
    decidedBy: null,
    note: null,
  }),
  initial: 'pending',
  states: {
    pending: {
      entry: raise({ type: 'REMIND' }, { delay: 'reminder', id: 'reminder' }),
      exit: cancel('reminder'),
      after: { deadline: { target: 'expired', actions: assign({ note: 'no decision before the deadline' }) } },
      on: {
        REMIND: { actions: assign({ reminders: ({ context }) => context.reminders + 1 }) },
        APPROVE: { target: 'approved', actions: assign({ decidedBy: ({ event }) => event.by, note: ({ event }) => event.comment ?? null }) },
        REJECT: { target: 'rejected', actions: assign({ decidedBy: ({ event }) => event.by, note: ({ event }) => event.reason }) },
        CANCEL: { target: 'cancelled', actions: assign({ note: ({ event }) => event.reason ?? 'cancelled' }) },
      },
    },
    approved: { type: 'final' },
    rejected: { type: 'final' },
    expired: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

/** Registered as `approval-flow` version 1. */
export const approvalFlow = defineJob({
  machine: approvalFlowMachine,
  version: 1,
  input: approvalFlowInput,
  events: approvalFlowEvents,
  description: 'pending (reminder, deadline) → approved | rejected | expired, or cancelled',
});
