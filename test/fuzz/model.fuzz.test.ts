/**
 * Fuzzing the runtime against the machines' own pure results (fast-check).
 *
 * Machines without activities (job-lifecycle, approval-flow, crash-tally, crash-ticker): random
 * steps (events, duplicates under the same event id, virtual time moving forward, closing and
 * reopening the runtime on the same file) go through the runtime (SqliteStore on a temp file,
 * VirtualClock) and through `PureJob` (XState's `initialTransition`/`transition` run directly, plus
 * the documented timer rules). Every outcome (applied, ignored, stale...), the history, the revision
 * and the final state value, context and status must agree.
 *
 * Machines with activities (retrying-job, export-job, crash-flaky): what an activity returns
 * depends on the runtime running it, so the model is the stored history itself: replayed through
 * the pure machine it must give every recorded outcome and the stored state, and the events the
 * test sent must appear in it in order, with the outcomes the sender was told.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyStateMachine } from 'xstate';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../../machines/index.ts';
import { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import { createRuntime, JobTerminalError, type JobDefinition, type Runtime, type SendResult } from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { flaky, tally, ticker } from '../crash/machines.ts';
import { T0 } from '../helpers/durable.ts';
import { replayHistory } from '../helpers/replay.ts';
import { Resources } from '../helpers/resources.ts';
import { PureJob } from './pureJob.ts';

const NUM_RUNS = 100;
const res = new Resources();
afterAll(() => res.dispose());

type Ev = { type: string; [k: string]: unknown };
type Step = { kind: 'send'; event: Ev; wait: boolean } | { kind: 'advance'; ms: number } | { kind: 'resend'; pick: number } | { kind: 'reopen' };

const text = fc.string({ minLength: 1, maxLength: 12 });
const reason = fc.option(fc.string({ maxLength: 20 }), { nil: undefined });
const withReason = (type: string) => reason.map((r): Ev => (r === undefined ? { type } : { type, reason: r }));

interface Subject {
  def: JobDefinition;
  input: fc.Arbitrary<unknown>;
  event: fc.Arbitrary<Ev>;
  maxAdvanceMs: number;
}

const modelled: Record<string, Subject> = {
  'job-lifecycle': {
    def: jobLifecycle,
    input: fc.record({ name: text, items: fc.integer({ min: 0, max: 4 }) }),
    event: fc.oneof(
      { weight: 3, arbitrary: fc.constant<Ev>({ type: 'START' }) },
      { weight: 2, arbitrary: fc.double({ min: 0, max: 100, noNaN: true }).map((percent): Ev => ({ type: 'PROGRESS', percent })) },
      { weight: 3, arbitrary: fc.constant<Ev>({ type: 'ITEM_DONE' }) },
      { weight: 2, arbitrary: withReason('ITEM_FAILED') },
      { weight: 1, arbitrary: fc.constant<Ev>({ type: 'FINISH' }) },
      { weight: 1, arbitrary: text.map((r): Ev => ({ type: 'FAIL', reason: r })) },
      { weight: 1, arbitrary: withReason('CANCEL') },
    ),
    maxAdvanceMs: 10,
  },
  'approval-flow': {
    def: approvalFlow,
    input: fc.record({ subject: text, remindAfterMs: fc.integer({ min: 0, max: 3000 }), deadlineMs: fc.integer({ min: 1, max: 6000 }) }),
    event: fc.oneof(
      fc.record({ by: text, comment: fc.option(text, { nil: undefined }) }).map(({ by, comment }): Ev => (comment === undefined ? { type: 'APPROVE', by } : { type: 'APPROVE', by, comment })),
      fc.record({ by: text, reason: text }).map((e): Ev => ({ type: 'REJECT', ...e })),
      withReason('CANCEL'),
    ),
    maxAdvanceMs: 1500,
  },
  'crash-tally': {
    def: tally,
    input: fc.constant({}),
    event: fc.oneof(
      { weight: 4, arbitrary: fc.constant<Ev>({ type: 'INC' }) },
      { weight: 4, arbitrary: fc.integer({ min: -1000, max: 1000 }).map((n): Ev => ({ type: 'ADD', n })) },
      { weight: 1, arbitrary: fc.constant<Ev>({ type: 'STOP' }) },
      { weight: 1, arbitrary: withReason('CANCEL') },
    ),
    maxAdvanceMs: 10,
  },
  'crash-ticker': {
    def: ticker,
    input: fc.record({ startMs: fc.integer({ min: 0, max: 300 }), pingMs: fc.integer({ min: 0, max: 300 }), pongMs: fc.integer({ min: 0, max: 300 }), endMs: fc.integer({ min: 1, max: 400 }) }),
    event: fc.oneof(
      { weight: 2, arbitrary: fc.constant<Ev>({ type: 'SKIP' }) },
      { weight: 4, arbitrary: fc.constant<Ev>({ type: 'SNOOZE' }) },
      { weight: 1, arbitrary: withReason('CANCEL') },
    ),
    maxAdvanceMs: 250,
  },
};

const withActivities: Record<string, Subject> = {
  'retrying-job': {
    def: retryingJob,
    input: fc.record({ name: text, items: fc.integer({ min: 1, max: 6 }), failItems: fc.integer({ min: 0, max: 6 }), flakyAttempts: fc.integer({ min: 0, max: 4 }), autoStart: fc.boolean() }),
    event: fc.oneof({ weight: 3, arbitrary: fc.constant<Ev>({ type: 'START' }) }, { weight: 1, arbitrary: withReason('CANCEL') }),
    maxAdvanceMs: 3000,
  },
  'export-job': {
    def: exportJob,
    input: fc.record({ dataset: text, format: fc.constantFrom('csv', 'json'), rows: fc.integer({ min: 1, max: 1000 }), flakyAttempts: fc.integer({ min: 0, max: 4 }) }),
    event: withReason('CANCEL'),
    maxAdvanceMs: 300,
  },
  'crash-flaky': {
    def: flaky,
    input: fc.record({ failFirst: fc.integer({ min: 0, max: 4 }), workMs: fc.constant(0), deadlineMs: fc.integer({ min: 1, max: 200 }) }),
    event: withReason('CANCEL'),
    maxAdvanceMs: 120,
  },
};

function steps(subject: Subject): fc.Arbitrary<Step[]> {
  return fc.array(
    fc.oneof(
      { weight: 6, arbitrary: fc.record({ event: subject.event, wait: fc.integer({ min: 0, max: 4 }).map((n) => n > 0) }).map(({ event, wait }): Step => ({ kind: 'send', event, wait })) },
      { weight: 4, arbitrary: fc.integer({ min: 0, max: subject.maxAdvanceMs }).map((ms): Step => ({ kind: 'advance', ms })) },
      { weight: 1, arbitrary: fc.nat().map((pick): Step => ({ kind: 'resend', pick })) },
      { weight: 1, arbitrary: fc.constant<Step>({ kind: 'reopen' }) },
    ),
    { minLength: 3, maxLength: 40, size: 'medium' },
  );
}

/** A runtime on one file with one virtual clock, reopened on demand (restore from the stored snapshots). */
class Bench {
  runtime!: Runtime;
  readonly clock = new VirtualClock(T0);
  readonly path = res.dbPath();
  jobs = 0;
  constructor(readonly def: JobDefinition) {}
  async open(): Promise<void> {
    const store = await SqliteStore.open(this.path, { clock: this.clock, synchronous: 'NORMAL' });
    this.runtime = await createRuntime({ store, machines: [this.def], clock: this.clock });
  }
  async reopen(): Promise<void> {
    await this.runtime.close();
    await this.open();
  }
  async close(): Promise<void> {
    await this.runtime.close();
  }
  /** Leave no live timers or activities behind for the next run (a final job keeps nothing due). */
  async end(jobId: string): Promise<void> {
    if (!(await this.runtime.get(jobId)).final) await this.runtime.cancel(jobId, 'run over');
    await this.runtime.idle();
  }
}

type Sent = { eventId: string; event: Ev; result: SendResult };

describe.each(Object.entries(modelled))('%s: the runtime agrees with the pure machine', (machineId, subject) => {
  const bench = new Bench(subject.def);
  beforeAll(() => bench.open());
  afterAll(() => bench.close());

  it(`on random steps (${NUM_RUNS} runs): every outcome, the history, the revision and the final state`, async () => {
    await fc.assert(
      fc.asyncProperty(subject.input, steps(subject), async (input, plan) => {
        const jobId = `${machineId}-${++bench.jobs}`;
        const started = await bench.runtime.start(machineId, input, { jobId });
        const model = new PureJob(subject.def.machine as AnyStateMachine, jobId, started.input, bench.clock.now());
        const sent: Sent[] = [];
        for (const [i, step] of plan.entries()) {
          if (step.kind === 'advance') {
            bench.clock.advance(step.ms);
            await bench.runtime.tick();
            model.advance(step.ms);
          } else if (step.kind === 'reopen') {
            await bench.reopen();
          } else if (step.kind === 'resend') {
            if (sent.length === 0) continue;
            const first = sent[step.pick % sent.length]!;
            const again = await bench.runtime.send(jobId, first.event, { eventId: first.eventId });
            await bench.runtime.idle();
            const settled = (await bench.runtime.events(jobId)).find((e) => e.eventId === first.eventId)!;
            expect(again).toMatchObject({ duplicate: true, status: settled.status, revision: settled.revision });
          } else {
            const eventId = `s${i}`;
            if (model.final) {
              await expect(bench.runtime.send(jobId, step.event, { eventId, wait: step.wait })).rejects.toBeInstanceOf(JobTerminalError);
              continue;
            }
            const result = await bench.runtime.send(jobId, step.event, { eventId, wait: step.wait });
            await bench.runtime.idle();
            const outcome = model.send(step.event);
            expect(result.duplicate).toBe(false);
            if (step.wait) expect({ status: result.status, revision: result.revision }).toEqual({ status: outcome, revision: model.revision });
            else expect(result.status).toBe('pending');
            sent.push({ eventId, event: step.event, result });
          }
        }
        const job = await bench.runtime.get(jobId);
        const history = (await bench.runtime.history(jobId)).map((h) => [h.eventType, h.outcome]);
        expect(history).toEqual(model.history);
        expect({ value: job.value, context: job.context, status: job.status, revision: job.revision }).toEqual(model.view());
        // Every event we sent settled the way the model processed it.
        const events = new Map((await bench.runtime.events(jobId)).map((e) => [e.eventId, e]));
        for (const s of sent) expect(events.get(s.eventId)?.status).not.toBe('pending');
        await bench.end(jobId);
      }),
      { numRuns: NUM_RUNS },
    );
  });
});

describe.each(Object.entries(withActivities))('%s: the stored history is the pure machine’s own', (machineId, subject) => {
  const bench = new Bench(subject.def);
  beforeAll(() => bench.open());
  afterAll(() => bench.close());

  it(`on random steps (${NUM_RUNS} runs): replaying the history reproduces every outcome and the stored state`, async () => {
    await fc.assert(
      fc.asyncProperty(subject.input, steps(subject), async (input, plan) => {
        const jobId = `${machineId}-${++bench.jobs}`;
        const started = await bench.runtime.start(machineId, input, { jobId });
        await bench.runtime.idle();
        const sent: Sent[] = [];
        let final = false;
        for (const [i, step] of plan.entries()) {
          if (step.kind === 'advance') {
            bench.clock.advance(step.ms);
            await bench.runtime.tick();
            await bench.runtime.idle();
          } else if (step.kind === 'reopen') {
            await bench.reopen();
            await bench.runtime.tick();
            await bench.runtime.idle();
          } else if (step.kind === 'resend') {
            if (sent.length === 0) continue;
            const first = sent[step.pick % sent.length]!;
            const again = await bench.runtime.send(jobId, first.event, { eventId: first.eventId });
            await bench.runtime.idle();
            const settled = (await bench.runtime.events(jobId)).find((e) => e.eventId === first.eventId)!;
            expect(again).toMatchObject({ duplicate: true, status: settled.status, revision: settled.revision });
          } else {
            const eventId = `s${i}`;
            final = (await bench.runtime.get(jobId)).final;
            if (final) {
              await expect(bench.runtime.send(jobId, step.event, { eventId, wait: step.wait })).rejects.toBeInstanceOf(JobTerminalError);
              continue;
            }
            const result = await bench.runtime.send(jobId, step.event, { eventId, wait: step.wait });
            await bench.runtime.idle();
            sent.push({ eventId, event: step.event, result });
          }
        }
        const job = await bench.runtime.get(jobId);
        const history = await bench.runtime.history(jobId);
        const { final: pure, problems } = replayHistory(subject.def.machine as AnyStateMachine, started.input, history);
        expect(problems).toEqual([]);
        expect({ value: job.value, context: job.context, status: job.status }).toEqual(pure);
        expect(job.revision).toBe(history.length);
        // What we sent is in the history in the order sent (none lost, none doubled), with the outcome we were told.
        // (An event accepted while the job was active but reached after its end is `rejected`: no history row.)
        const settled = new Map((await bench.runtime.events(jobId)).map((e) => [e.eventId, e.status]));
        const ours = new Set(sent.map((s) => s.eventId));
        expect(history.filter((h) => h.eventId !== null && ours.has(h.eventId)).map((h) => h.eventId)).toEqual(
          sent.filter((s) => settled.get(s.eventId) !== 'rejected').map((s) => s.eventId),
        );
        for (const s of sent) {
          expect(settled.get(s.eventId)).not.toBe('pending');
          if (s.result.status === 'pending' || s.result.status === 'rejected') continue;
          const row = history.find((h) => h.eventId === s.eventId);
          expect({ outcome: row?.outcome, revision: row?.revision }).toEqual({ outcome: s.result.status, revision: s.result.revision });
        }
        await bench.end(jobId);
      }),
      { numRuns: NUM_RUNS },
    );
  });
});
