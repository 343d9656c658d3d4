/**
 * Parts of the runtime on their own, with the few dependencies each is constructed with: the
 * group-commit batcher against a recording store, the per-job lock, and an attempt's abort.
 */
import { describe, expect, it } from 'vitest';
import type { AttemptFinish, CommitResult, JobStore, TransitionCommit, WriteBatch, WriteBatchResult } from '../src/ports/store.ts';
import { CommitBatcher } from '../src/runtime/commits.ts';
import { JobLocks } from '../src/runtime/jobLocks.ts';
import { AttemptAbort } from '../src/runtime/activities.ts';

/** A store that records each batch it is handed and answers every write ok. */
function recordingStore() {
  const calls: { kind: 'commit' | 'writeBatch'; size: number }[] = [];
  const ok: CommitResult = { ok: true, revision: 2, fence: null };
  const store = {
    commit: async (commits: readonly TransitionCommit[]) => {
      calls.push({ kind: 'commit', size: commits.length });
      return commits.map(() => ok);
    },
    writeBatch: async (batch: WriteBatch): Promise<WriteBatchResult> => {
      calls.push({ kind: 'writeBatch', size: (batch.creates ?? []).length + (batch.commits ?? []).length + (batch.finishes ?? []).length + (batch.claims ?? []).length });
      return {
        creates: [],
        commits: (batch.commits ?? []).map(() => ok),
        finishes: (batch.finishes ?? []).map(() => ({ ok: true as const, result: 'current' as const })),
        claims: [],
      };
    },
  };
  return { store: store as unknown as JobStore, calls };
}

const commit = (jobId: string) => ({ jobId, expectedRevision: 1 }) as unknown as TransitionCommit;
const finish = (id: string) => ({ id, attempt: 1, result: { kind: 'succeeded', output: null }, at: 0 }) as unknown as AttemptFinish;

describe('CommitBatcher', () => {
  it('commits of operations under way together go to the store as one batch', async () => {
    const { store, calls } = recordingStore();
    const batcher = new CommitBatcher(store);
    // Two counted operations, both computing (a read) before they commit: the first to submit waits for the second.
    const results = await Promise.all(
      ['a', 'b'].map((id) =>
        batcher.unit(async () => {
          await Promise.resolve();
          return batcher.submit(commit(id));
        }),
      ),
    );
    expect(results).toEqual([{ ok: true, revision: 2, fence: null }, { ok: true, revision: 2, fence: null }]);
    expect(calls).toEqual([{ kind: 'commit', size: 2 }]);
  });

  it('an uncounted write in the queue does not stand in for a counted operation: their commits all share one batch', async () => {
    const { store, calls } = recordingStore();
    const batcher = new CommitBatcher(store);
    // Three counted operations (an activity's outcome applied as a step, each); an attempt's
    // outcome recorded alone (a retry: no step, no counted operation) is queued before the last
    // two submit. With it counted as one of theirs, the round went when two commits were in, and
    // the third took a batch of its own.
    const proceed: (() => void)[] = [];
    const steps = ['a', 'b', 'c'].map((id) =>
      batcher.unit(async () => {
        await new Promise<void>((resolve) => proceed.push(resolve));
        return batcher.submit(commit(id));
      }),
    );
    proceed[0]!();
    await Promise.resolve();
    const retried = batcher.submitFinish(finish('e1'));
    proceed[1]!();
    proceed[2]!();
    await Promise.all([...steps, retried]);
    expect(calls).toEqual([{ kind: 'writeBatch', size: 4 }]);
  });

  it('a lone caller is flushed at once; outcomes wait for the end of the turn and share one writeBatch', async () => {
    const { store, calls } = recordingStore();
    const batcher = new CommitBatcher(store);
    await batcher.submit(commit('a'));
    expect(calls).toEqual([{ kind: 'commit', size: 1 }]);
    const statuses = await Promise.all([batcher.submitFinish(finish('e1')), batcher.submitFinish(finish('e2'))]);
    expect(statuses).toEqual(['current', 'current']);
    expect(calls).toEqual([{ kind: 'commit', size: 1 }, { kind: 'writeBatch', size: 2 }]);
  });

  it('while attempts run, a write waits for their outcomes (up to the delay) and goes with the last one; with none running, or no delay, it goes at once', async () => {
    const { store, calls } = recordingStore();
    // A delay no test would wait out: only the last outcome, or nothing running, sends the queue.
    const batcher = new CommitBatcher(store, undefined, 60_000);
    let running = 2;
    batcher.siblings = () => running;
    const first = batcher.submit(commit('a'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([]); // another attempt still runs: its outcome may share the transaction
    running = 1;
    const second = batcher.submit(commit('b'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toEqual([]);
    running = 0; // the last outcome: nothing runs any more, so the queue goes at once
    const third = batcher.submit(commit('c'));
    await Promise.all([first, second, third]);
    expect(calls).toEqual([{ kind: 'commit', size: 3 }]);
    // Nothing running: a lone write goes at once, delay or not.
    await batcher.submit(commit('d'));
    expect(calls).toEqual([{ kind: 'commit', size: 3 }, { kind: 'commit', size: 1 }]);
    // No delay: a lone write goes at once even while attempts run.
    const undelayed = new CommitBatcher(store);
    undelayed.siblings = () => 5;
    await undelayed.submit(commit('e'));
    expect(calls.at(-1)).toEqual({ kind: 'commit', size: 1 });
  });

  it('a write waiting for running attempts goes after the delay when their outcomes do not come', async () => {
    const { store, calls } = recordingStore();
    const batcher = new CommitBatcher(store, undefined, 1);
    batcher.siblings = () => 3; // attempts that run on (a long activity): the write does not wait for them past the delay
    await batcher.submit(commit('a')); // resolves: the delay's timer sent it
    expect(calls).toEqual([{ kind: 'commit', size: 1 }]);
  });

  it('a store that answers too few writes fails the callers left without an answer', async () => {
    const store = { writeBatch: async () => ({ creates: [], commits: [], finishes: [], claims: [] }) } as unknown as JobStore;
    const batcher = new CommitBatcher(store);
    await expect(batcher.submitFinish(finish('e1'))).rejects.toThrow(/no result/);
  });
});

describe('JobLocks', () => {
  it('runs one job\'s work in order, other jobs\' alongside, and is idle after', async () => {
    const locks = new JobLocks();
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = locks.run('a', async () => {
      await gate;
      order.push('a1');
    });
    const second = locks.run('a', async () => void order.push('a2'));
    await locks.run('b', async () => void order.push('b1'));
    expect(order).toEqual(['b1']); // b did not wait for a
    expect(locks.busy).toBe(true);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['b1', 'a1', 'a2']);
    await Promise.allSettled(locks.pending());
    expect(locks.busy).toBe(false);
  });

  it('a failed piece of work rejects its caller only; the next one still runs', async () => {
    const locks = new JobLocks();
    const failed = locks.run('a', async () => {
      throw new Error('boom');
    });
    const next = locks.run('a', async () => 'ran');
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('ran');
  });
});

describe('AttemptAbort: the abort of one attempt, its signal made on first read', () => {
  it('a signal read before the abort is aborted with its reason, after the runtime listener is told', () => {
    const abort = new AttemptAbort();
    const told: unknown[] = [];
    abort.onAbort((reason) => told.push(['runtime', reason, abort.signal.aborted]));
    const signal = abort.signal;
    signal.addEventListener('abort', () => told.push(['activity', signal.reason]));
    expect(signal.aborted).toBe(false);
    const reason = new Error('state left');
    abort.abort(reason);
    abort.abort(new Error('again')); // once: a second abort changes nothing
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(reason);
    expect(told).toEqual([['activity', reason], ['runtime', reason, true]]);
    expect(abort.signal).toBe(signal);
  });

  it('a signal first read after the abort is already aborted, with the first reason', () => {
    const abort = new AttemptAbort();
    const reason = new Error('runtime shutting down');
    abort.abort(reason);
    abort.abort(new Error('later'));
    expect(abort.aborted).toBe(true);
    expect(abort.reason).toBe(reason);
    expect(abort.signal.aborted).toBe(true);
    expect(abort.signal.reason).toBe(reason);
  });
});
