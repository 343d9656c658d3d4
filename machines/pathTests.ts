/**
 * What `spool test` needs to walk the reference machines: event samples, activity outputs,
 * inputs, and a state abstraction for job-lifecycle. Plain data (no Spool import), keyed by
 * machine id; `spool test` and `spool/testing`'s collectPathTests read it as `pathTests`.
 */
export const pathTests = {
  /**
   * Two inputs: with items (the always-transitions count them) and without (FINISH decides).
   * Without items ITEM_DONE/ITEM_FAILED count forever, so the state key caps the counts at 2:
   * the guards only ask "none", "some" and "all counted", which the cap keeps apart.
   */
  'job-lifecycle': {
    inputs: [
      { name: 'resize', items: 2 },
      { name: 'report', items: 0 },
    ],
    events: { PROGRESS: [{ percent: 40 }], FAIL: { reason: 'disk full' }, CANCEL: { reason: 'not needed' }, ITEM_FAILED: { reason: 'corrupt' } },
    stateKey: ({ value, context }: { value: unknown; context: unknown }) => {
      const c = context as { succeeded: number; failed: number };
      return { value, context: { ...(context as object), succeeded: Math.min(c.succeeded, 2), failed: Math.min(c.failed, 2) } };
    },
  },
  /** Two inputs (autoStart reads an always-guard); the first attempt fails once to go through a real retry. */
  'retrying-job': {
    inputs: [{ name: 'nightly' }, { name: 'auto', autoStart: true }],
    events: { CANCEL: { reason: 'stop' } },
    outputs: { process: [{ succeeded: 3, failed: 0 }, { succeeded: 2, failed: 1 }, { succeeded: 0, failed: 3 }] },
    errors: { process: { name: 'Error', message: 'provider down' } },
    failAttempts: { process: 1 },
  },
  /** The indeterminate branch is reached by a real interruption of the unsafe `export` attempt. */
  'export-job': {
    input: { dataset: 'sales', rows: 10 },
    events: { CANCEL: { reason: 'changed my mind' } },
    outputs: {
      reserve: { providerRef: 'sales-ref1' },
      export: { uri: 'provider://exports/sales-ref1.csv', size: 480 },
      lookup: [
        { found: true, result: { uri: 'provider://exports/sales-ref1.csv', size: 480 } },
        { found: false, result: null },
      ],
    },
  },
  /** REMIND comes only from the reminder timer (never sent from outside): `events: { REMIND: [] }`. */
  'approval-flow': {
    input: { subject: 'deploy v2', remindAfterMs: 60_000, deadlineMs: 3_600_000 },
    events: { REMIND: [], APPROVE: [{ by: 'ann' }, { by: 'bob', comment: 'ship it' }], REJECT: { by: 'cy', reason: 'tests red' }, CANCEL: {} },
  },
};
