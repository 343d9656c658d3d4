/**
 * Resolving a write whose outcome is unknown ({@link CommitOutcomeUnknown}: the COMMIT of its
 * group-commit batch failed with an I/O error, or the connection was lost, so the transaction may
 * or may not have landed). Each write of the batch is read back, never written blind:
 * - a transition: `commitLanded(jobId, revision, eventId)`; landed → ok at that revision, with the
 *   fence of the job's lease when its runner holds it; absent → written again (its revision check
 *   stops a second apply);
 * - a new job: landed if `getJob` finds it created at the same time; absent → written again;
 * - an attempt's outcome: landed if `getEffect` is at that attempt and no longer running;
 * - an activity claim, or a batch claim: taken as not claimed (a claim that landed expires at its `claimUntil`).
 * A read-back that itself meets a retryable fault backs off (bounded) and reads again.
 */
import { operationsOf, type AttemptFinish, type ClaimedEffect, type CommitResult, type CreateJobResult, type DueClaim, type DueClaimResult, type EffectClaim, type FinishStatus, type JobStore, type LeaseRelease, type NewJob, type TransitionCommit } from '../ports/store.ts';
import { backoffMs, isRetryableFault, pause } from './backoff.ts';


/** A caller waiting for its write's result. */
export interface Waiting<T> {
  resolve: (r: T) => void;
  reject: (e: unknown) => void;
}

/** A write waiting for the next group-commit batch, with its caller's promise. */
export type QueuedWrite =
  | ({ commit: TransitionCommit } & Waiting<CommitResult>)
  | ({ create: NewJob } & Waiting<CreateJobResult>)
  | ({ finish: AttemptFinish } & Waiting<FinishStatus>)
  | ({ claim: EffectClaim } & Waiting<ClaimedEffect | undefined>)
  | ({ dueClaim: DueClaim } & Waiting<DueClaimResult>)
  | ({ release: LeaseRelease } & Waiting<number>);

/** How patiently a read-back retries a retryable fault. */
export interface ReadBackOptions {
  /** Reads in all before the fault goes to the write's caller. */
  tries: number;
  firstMs: number;
  maxMs: number;
  /** The wait between reads (real time by default; a test passes its own). */
  pause: (ms: number) => Promise<void>;
}

/** 8 reads over about 2.3 s: 20 ms doubling to 1 s. */
export const DEFAULT_READ_BACK: ReadBackOptions = { tries: 8, firstMs: 20, maxMs: 1000, pause };

/** What a read-back found: the write landed (settle its caller with this), or it did not (`again`: write it again). */
export type ReadBackVerdict = { settle: () => void } | 'again';

/** Read one write back, retrying a retryable fault of the read itself (bounded); the last fault is thrown. */
export async function readBack(store: JobStore, write: QueuedWrite, options: ReadBackOptions = DEFAULT_READ_BACK): Promise<ReadBackVerdict> {
  for (let n = 1; ; n += 1) {
    try {
      return await readOnce(store, write);
    } catch (error) {
      if (!isRetryableFault(error) || n >= options.tries) throw error;
      await options.pause(backoffMs(n, options.firstMs, options.maxMs));
    }
  }
}

async function readOnce(store: JobStore, write: QueuedWrite): Promise<ReadBackVerdict> {
  if ('commit' in write) {
    const { commit } = write;
    const [op] = operationsOf({ commits: [commit] });
    if (op?.kind !== 'commit' || !(await store.commitLanded(op.jobId, op.revision, op.eventId))) return 'again';
    const runner = commit.lease?.runner;
    const lease = runner === undefined ? null : ((await store.getJob(commit.jobId))?.lease ?? null);
    const fence = lease !== null && lease.owner === runner ? lease.fence : null;
    return { settle: () => write.resolve({ ok: true, revision: op.revision, fence }) };
  }
  if ('create' in write) {
    const job = await store.getJob(write.create.id);
    if (!job || job.createdAt !== write.create.at) return 'again';
    return { settle: () => write.resolve({ job, created: true }) };
  }
  if ('finish' in write) {
    const effect = await store.getEffect(write.finish.id);
    if (!effect || effect.attempt !== write.finish.attempt || effect.status === 'running') return 'again';
    return { settle: () => write.resolve('current') };
  }
  // A release frees what the runner still holds of those jobs: the same again is harmless.
  if ('release' in write) return 'again';
  // Nothing claimed, and more may be due: the runner looks again.
  if ('dueClaim' in write) return { settle: () => write.resolve({ claimed: [], held: [], more: true, limited: false }) };
  return { settle: () => write.resolve(undefined) };
}
