/**
 * `startMany`: a producer's bulk enqueue. The new jobs of one call are one store write (one
 * transaction), returned in order; a repeated id or key returns its job as `start` does; a bad
 * item is refused, named by its index, before anything is written.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { z } from 'zod';
import { IdempotencyConflictError, PayloadTooLargeError, ValidationError, type Runtime } from '../src/index.ts';
import type { WriteBatch } from '../src/store.ts';
import { Resources } from './helpers/resources.ts';
import { openRuntime } from './helpers/durable.ts';
import { tally } from './fixtures/deliveryMachines.ts';

const res = new Resources();
afterEach(() => res.dispose());

/** `double`: one activity that doubles the input's `n`, then done. */
const double = {
  machine: setup({
    types: { context: {} as { n: number; result: number | null }, input: {} as { n: number } },
    actors: { twice: fromPromise<number, { n: number }>(async ({ input }) => input.n * 2) },
  }).createMachine({
    id: 'double',
    initial: 'working',
    context: ({ input }) => ({ n: input.n, result: null }),
    states: {
      working: { invoke: { src: 'twice', input: ({ context }) => ({ n: context.n }), onDone: { target: 'done', actions: assign({ result: ({ event }) => event.output }) } } },
      done: { type: 'final' },
    },
  }),
  input: z.object({ n: z.number().int() }),
};

/** How many new jobs each store write carried (writes that created none are left out). */
function countCreates(runtime: Runtime): number[] {
  const store = runtime.store;
  const writeBatch = store.writeBatch.bind(store);
  const creates: number[] = [];
  store.writeBatch = (batch: WriteBatch) => {
    if ((batch.creates?.length ?? 0) > 0) creates.push(batch.creates!.length);
    return writeBatch(batch);
  };
  return creates;
}

async function jobCount(runtime: Runtime): Promise<number> {
  return (await runtime.store.listJobs({ limit: 1000 })).length;
}

describe('startMany', () => {
  it('creates every new job in one write, returns them in order, and their activities run', async () => {
    const { runtime } = await openRuntime(res, [double, tally]);
    const creates = countCreates(runtime);
    const items = Array.from({ length: 40 }, (_, n) => ({ input: { n } }));
    const jobs = await runtime.startMany('double', items);
    expect(creates).toEqual([40]);
    expect(jobs.map((j) => j.context.n)).toEqual(items.map((i) => i.input.n));
    expect(new Set(jobs.map((j) => j.id)).size).toBe(40);
    // Each one is a started job like `start` makes: its activity runs and ends it.
    const ended = await Promise.all(jobs.map((j) => runtime.waitFor(j.id, (x) => x.status === 'done')));
    expect(ended.map((j) => j.context.result)).toEqual(items.map((i) => i.input.n * 2));
    expect(await runtime.startMany('double', [])).toEqual([]);
  });

  it('returns the job a repeated id or key names, in the store or earlier in the call', async () => {
    const { runtime } = await openRuntime(res, [tally]);
    const first = await runtime.start('tally', { label: 'a' }, { idempotencyKey: 'k1' });
    const creates = countCreates(runtime);
    const jobs = await runtime.startMany('tally', [
      { input: { label: 'a' }, idempotencyKey: 'k1' },
      { input: { label: 'b' }, jobId: 'b-1' },
      { input: { label: 'c' }, idempotencyKey: 'k2' },
      { input: { label: 'b' }, jobId: 'b-1' },
      { input: { label: 'c' }, idempotencyKey: 'k2' },
    ]);
    expect(jobs.map((j) => j.id)).toEqual([first.id, 'b-1', jobs[2]!.id, 'b-1', jobs[2]!.id]);
    expect(jobs.map((j) => j.context.label)).toEqual(['a', 'b', 'c', 'b', 'c']);
    expect(creates).toEqual([2]);
    expect(await jobCount(runtime)).toBe(3);
    // The whole call again: every job found, nothing written.
    const again = await runtime.startMany('tally', [{ input: { label: 'b' }, jobId: 'b-1' }, { input: { label: 'c' }, idempotencyKey: 'k2' }]);
    expect(again.map((j) => j.id)).toEqual(['b-1', jobs[2]!.id]);
    expect(creates).toEqual([2]);
  });

  it('refuses a bad item before writing anything, naming it', async () => {
    const { runtime } = await openRuntime(res, [tally], { maxPayloadBytes: 1024 });
    await runtime.start('tally', { label: 'x' }, { idempotencyKey: 'taken' });
    const creates = countCreates(runtime);
    const good = { input: { label: 'ok' } };
    const refusals: [unknown[], new (...a: never[]) => Error, RegExp, number | undefined][] = [
      [[good, good, { input: { label: 7 } }], ValidationError, /^startMany item 2: Invalid input for tally/, 2],
      [[good, { input: { label: 'x'.repeat(2000) } }], PayloadTooLargeError, /^startMany item 1: The input is \d+ bytes/, 1],
      [[good, { input: { label: 'y' }, jobID: 'j' }], ValidationError, /^startMany item 1: startMany item: unknown option jobID/, 1],
      [[good, { input: { label: 'y' }, jobId: 'a~b' }], ValidationError, /^startMany item 1: A job id must not contain "~"/, 1],
      [[null], ValidationError, /^startMany item 0: A startMany item must be an object/, 0],
      // Another input under a key the store holds, and a key given twice in the call with two inputs.
      [[good, { input: { label: 'other' }, idempotencyKey: 'taken' }], IdempotencyConflictError, /^startMany item 1: A job with idempotency key "taken" already exists/, 1],
      [[{ input: { label: 'p' }, idempotencyKey: 'k' }, good, { input: { label: 'q' }, idempotencyKey: 'k' }], IdempotencyConflictError, /^startMany item 2: .*different input/, 2],
      [[{ input: { label: 'p' }, jobId: 'j1' }, { input: { label: 'p' }, jobId: 'j1', idempotencyKey: 'k9' }], IdempotencyConflictError, /^startMany item 1: Job j1 already exists, started with no idempotency key/, 1],
      [Array.from({ length: 1001 }, () => good), ValidationError, /at most 1000 items \(got 1001\)/, undefined],
    ];
    for (const [items, type, message, item] of refusals) {
      const error = await runtime.startMany('tally', items as never).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(type);
      expect((error as Error).message).toMatch(message);
      expect((error as ValidationError).details['item']).toBe(item);
    }
    await expect(runtime.startMany('tally', { input: {} } as never)).rejects.toThrow(/takes an array of items/);
    await expect(runtime.startMany('tallly', [good])).rejects.toThrow(/tallly/);
    expect(creates).toEqual([]);
    expect(await jobCount(runtime)).toBe(1);
  });
});
