/**
 * Compile-time tests of `pathTestOptions` (checked by tsc; nothing here runs): event samples,
 * states in `reached`, named path steps and the checks' context are typed from the machine.
 */
import { expectTypeOf } from 'vitest';
import { pathTest, pathTestOptions } from '../../src/testing/index.ts';
import { approval, editor } from '../fixtures/checkMachines.ts';

pathTestOptions(approval, {
  events: { APPROVE: [{ role: 'manager' }, { role: 'peer' }], REJECT: {}, 'APP*': { type: 'APPROVE', role: 'peer' } },
  invariants: {
    bounded: (s) => {
      expectTypeOf(s.context).toEqualTypeOf<{ approvals: number }>();
      return s.context.approvals <= 2;
    },
  },
  reached: { approved: (s) => s.context.approvals >= 2, pending: () => true },
  paths: { twice: { steps: ['APPROVE', 'APPROVE#2', 'time', { type: 'APPROVE', role: 'manager' }], expect: (s) => s.matches('approved') } },
});

// @ts-expect-error a misspelt event type
pathTestOptions(approval, { events: { APROVE: { role: 'manager' } } });
// @ts-expect-error a payload the event does not take
pathTestOptions(approval, { events: { APPROVE: { role: 'boss' } } });
// @ts-expect-error a misspelt state
pathTestOptions(approval, { reached: { aproved: () => true } });
// @ts-expect-error a context field the machine does not have
pathTestOptions(approval, { invariants: { x: (s) => s.context.approvers > 1 } });
// @ts-expect-error a misspelt event in a named path
pathTestOptions(approval, { paths: { p: { steps: ['APROVE'] } } });

// Nested states by their dot paths.
pathTestOptions(editor, { reached: { 'editing.review.second': () => true, editing: () => true } });
// @ts-expect-error a nested state that does not exist
pathTestOptions(editor, { reached: { 'editing.review.third': () => true } });

// `pathTest` types its options the same way, and takes what `pathTestOptions` gave for the same machine.
pathTest(approval, { events: { APPROVE: [{ role: 'manager' }] }, reached: { approved: (s) => s.context.approvals >= 2 } });
pathTest(approval, pathTestOptions(approval, { events: { REJECT: {} } }));
// @ts-expect-error a misspelt event type
pathTest(approval, { events: { APROVE: { role: 'manager' } } });
// @ts-expect-error a misspelt state
pathTest(approval, { reached: { aproved: () => true } });
