/**
 * The machines the example runs unless the build is given another module (`--machines`): the
 * approval flow of machines/, which waits for a decision with a reminder and a deadline (durable
 * timers), so a reload in the middle shows the job kept. A machines module exports its machines as
 * `spool worker --machines` takes them, and may add what the page's forms are filled with.
 */
import type { EventObject } from './protocol.ts';

export { approvalFlow } from '../../../machines/approvalFlow.ts';

/** The start form's input per machine id (a short reminder, so one fires while you watch). */
export const exampleInputs: Record<string, unknown> = {
  'approval-flow': { subject: 'Expense report #42', remindAfterMs: 15_000, deadlineMs: 600_000 },
};

/** The events the send form offers per machine id. */
export const exampleEvents: Record<string, EventObject[]> = {
  'approval-flow': [
    { type: 'APPROVE', by: 'ada', comment: 'looks right' },
    { type: 'REJECT', by: 'ada', reason: 'missing receipts' },
    { type: 'CANCEL', reason: 'withdrawn' },
  ],
};
