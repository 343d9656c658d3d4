/**
 * The group-commit batcher. Writes submitted while other operations are mid-transition wait (one
 * event-loop turn at most) and go to the store as one batch: one transaction, one disk sync,
 * each write still checked on its own. A caller is resolved only after the batch that holds its
 * write is durable. A batch whose outcome is unknown (`CommitOutcomeUnknown`) is read back write by
 * write (outcomeUnknown.ts): what landed resolves as committed, what did not is written again.
 */
import {
  CommitOutcomeUnknown,
  type AttemptFinish,
  type ClaimedEffect,
  type CommitResult,
  type CreateJobResult,
  type DueClaim,
  type DueClaimResult,
  type EffectClaim,
  type FinishStatus,
  type JobStore,
  type LeaseRelease,
  type NewJob,
  type Outcome,
  type TransitionCommit,
  type WriteBatchResult,
} from '../ports/store.ts';
import { RevisionConflictError } from '../base/errors.ts';
import { afterIo } from '../base/node.ts';
import { DEFAULT_READ_BACK, readBack, type QueuedWrite, type ReadBackOptions, type Waiting } from './outcomeUnknown.ts';

/** Commits per group-commit transaction at most. */
const MAX_BATCH = 256;

/**
 * Batches in the store at once at most. While they are, new writes wait and join the next batch:
 * with an asynchronous store (Postgres) a batch takes round trips, and writes arriving meanwhile
 * share the next transaction and its sync instead of each taking a connection of their own. A
 * second batch goes while one is in flight only once at least as many writes wait as that one
 * carries: fewer wait for it to land and go with the writes that come meanwhile (activities that
 * end apart otherwise sent a batch of two or three every round trip, each a transaction of the
 * server's). A synchronous store (SQLite) has written a batch before the call returns, so this
 * never holds one back.
 */
const MAX_IN_FLIGHT = 2;

/** `commitDelayMs`' default: how long a write waits, at most, for the outcomes of attempts still running here. */
export const DEFAULT_COMMIT_DELAY_MS = 1;

/** Times one write is written again after a read-back found it absent; then its caller gets the unknown outcome. */
const MAX_WRITES_AGAIN = 3;

/** Batches the runtime's writes (new jobs, transitions, attempt outcomes, activity claims) into shared transactions. */
export class CommitBatcher {
  readonly #store: JobStore;
  /** The writes waiting for the next batch. */
  readonly #queue: QueuedWrite[] = [];
  #cancelFlush: (() => void) | undefined;
  /** Operations under way that may commit (sends, drains): a commit waits for them to join its batch. */
  #units = 0;
  /**
   * The queued writes of counted operations (enqueued eager): the round is complete when there
   * are as many as operations under way. Other writes in the queue (an attempt's outcome recorded
   * alone, a claim, a release) do not stand in for a counted operation's.
   */
  readonly #eagerWrites = new WeakSet<QueuedWrite>();
  #eagerQueued = 0;
  readonly #readBack: ReadBackOptions;
  /** Writes written again after an unknown outcome, and how many times. */
  readonly #again = new WeakMap<QueuedWrite, number>();
  /** The batches sent to the store and not yet settled: their sizes (writes each), in the order they went. */
  readonly #inFlight: number[] = [];
  /** The queue holds a startMany call's writes, to go in one batch (flush(true) while two were in flight). */
  #whole = false;
  /** How long the queue waits, at most, while attempts run here ({@link siblings}); 0: never. */
  readonly #delayMs: number;
  /** The queue waits for the delay's timer, not just the end of the turn (`#cancelFlush` clears it). */
  #delaying = false;

  constructor(store: JobStore, readBack: ReadBackOptions = DEFAULT_READ_BACK, delayMs = 0) {
    this.#store = store;
    this.#readBack = readBack;
    this.#delayMs = delayMs;
  }

  /**
   * Attempts running here (the executor's): their outcomes may come within the delay and share
   * the queued writes' transaction. None (or no executor): the queue goes without waiting.
   */
  siblings: (() => number) | undefined;

  /**
   * Count an operation that may commit, for group commit: while it runs, a commit of another
   * operation waits (one event-loop turn at most) so both share a transaction.
   */
  async unit<T>(work: () => Promise<T>): Promise<T> {
    this.#units += 1;
    try {
      return await work();
    } finally {
      this.#units -= 1;
      if (this.#queue.length > 0 && this.#eagerQueued >= this.#units) this.flush();
    }
  }

  /** A transition, group-committed. */
  submit(commit: TransitionCommit): Promise<CommitResult> {
    return new Promise<CommitResult>((resolve, reject) => this.enqueue({ commit, resolve, reject }));
  }

  /**
   * New jobs, group-committed like transitions: concurrent starts share a transaction and a sync.
   * Several at once (`startMany`) go in one transaction, whatever their number, with the writes
   * queued before them; one alone waits for the others of its round, as a transition does.
   */
  submitCreates(creates: readonly NewJob[]): Promise<CreateJobResult>[] {
    if (creates.length === 1) return [new Promise<CreateJobResult>((resolve, reject) => this.enqueue({ create: creates[0]!, resolve, reject }))];
    const results = creates.map((create) => new Promise<CreateJobResult>((resolve, reject) => this.#queue.push({ create, resolve, reject })));
    this.flush(true);
    return results;
  }

  /**
   * An attempt's outcome, group-committed: attempts that end in the same event-loop turn share a
   * transaction and a sync, and the outcome is durable before the caller goes on.
   */
  submitFinish(finish: AttemptFinish): Promise<FinishStatus> {
    return new Promise<FinishStatus>((resolve, reject) => this.enqueue({ finish, resolve, reject }, false));
  }

  /** Leases of this runner freed, group-committed: they join the next batch's transaction (before its claims). */
  submitRelease(release: LeaseRelease): Promise<number> {
    return new Promise<number>((resolve, reject) => this.enqueue({ release, resolve, reject }, false));
  }

  /** An activity claim, group-committed: the claims of one pump round share a transaction and a sync. */
  submitClaim(claim: EffectClaim): Promise<ClaimedEffect | undefined> {
    return new Promise<ClaimedEffect | undefined>((resolve, reject) => this.enqueue({ claim, resolve, reject }, false));
  }

  /** A batch claim of due activities (`claimDueEffects`), group-committed after the batch's other writes. */
  submitDueClaim(claim: DueClaim): Promise<DueClaimResult> {
    return new Promise<DueClaimResult>((resolve, reject) => this.enqueue({ dueClaim: claim, resolve, reject }, false));
  }

  /**
   * What every batch asks for as it is written: a batch claim to add to it (the executor's, for
   * the slots that outcomes of the batch free: `ActivityExecutor.refill`), so that they are
   * refilled from the backlog in the same transaction.
   */
  topUp: (() => ({ dueClaim: DueClaim } & Waiting<DueClaimResult>) | undefined) | undefined;

  /**
   * `eager`: flush as soon as every counted operation has submitted. Outcomes and claims are not
   * counted operations (they arrive together without knowing of each other), so they wait for the
   * end of the event-loop turn, when the others of their round have joined. While attempts run
   * here (and a delay is set), any write waits for their outcomes, up to the delay ({@link #flushLater}).
   */
  enqueue(entry: QueuedWrite, eager = true): void {
    this.#queue.push(entry);
    if (eager) {
      this.#eagerWrites.add(entry);
      this.#eagerQueued += 1;
    }
    if (this.#queue.length >= MAX_BATCH) this.flush();
    else if (this.#delayMs > 0 && (this.siblings?.() ?? 0) > 0) {
      if (!this.#delaying) this.#flushLater(this.#delayMs);
    } else if (eager && this.#eagerQueued >= this.#units) this.flush();
    else if (!this.#cancelFlush || this.#delaying) this.#flushLater();
  }

  /**
   * Send the queue after this event-loop turn, or (`delayMs` > 0) after the delay: attempts still
   * run here, and the queue waits for their outcomes, up to the delay. Activities that end at
   * different moments would otherwise each take a transaction and a sync of their own (a
   * transaction's fixed cost is several times a step's). An outcome that finds none running
   * any more sends the queue at once (an outcome's commit is eager) or after this turn.
   */
  #flushLater(delayMs = 0): void {
    this.#cancelFlush?.();
    this.#delaying = delayMs > 0;
    if (delayMs > 0) {
      const timer = setTimeout(() => this.flush(), delayMs);
      this.#cancelFlush = () => clearTimeout(timer);
    } else this.#cancelFlush = afterIo(() => this.flush());
  }

  /**
   * Send the queued writes to the store, in batches of at most {@link MAX_BATCH} (`whole`: all of
   * them in one, startMany's), as far as {@link MAX_IN_FLIGHT} allows; the rest go when a batch in
   * flight settles.
   */
  flush(whole = false): void {
    if (this.#cancelFlush) {
      this.#cancelFlush();
      this.#cancelFlush = undefined;
    }
    this.#delaying = false;
    if (whole) this.#whole = true;
    while (this.#queue.length > 0 && this.#inFlight.length < MAX_IN_FLIGHT) {
      // A second batch only when it carries as much as the one in flight (MAX_IN_FLIGHT).
      if (this.#inFlight.length > 0 && !this.#whole && this.#queue.length < this.#inFlight[0]!) break;
      const size = this.#whole ? this.#queue.length : MAX_BATCH;
      this.#whole = false;
      this.#write(this.#queue.splice(0, size));
    }
  }

  /** A batch settled: the writes that waited for it go now. */
  #landed(size: number): void {
    this.#inFlight.splice(this.#inFlight.indexOf(size), 1);
    if (this.#queue.length > 0) this.flush();
  }

  #write(batch: QueuedWrite[]): void {
    for (const b of batch) if (this.#eagerWrites.delete(b)) this.#eagerQueued -= 1;
    const top = this.topUp?.();
    if (top) batch.push(top);
    const creates = batch.filter((b) => 'create' in b);
    const commits = batch.filter((b) => 'commit' in b);
    const finishes = batch.filter((b) => 'finish' in b);
    const releases = batch.filter((b) => 'release' in b);
    const claims = batch.filter((b) => 'claim' in b);
    const dueClaims = batch.filter((b) => 'dueClaim' in b);
    const written: Promise<WriteBatchResult> =
      commits.length === batch.length
        ? this.#store.commit(commits.map((b) => b.commit)).then((results) => ({ creates: [], commits: results, finishes: [], claims: [] }))
        : this.#store.writeBatch({
            creates: creates.map((b) => b.create),
            commits: commits.map((b) => b.commit),
            finishes: finishes.map((b) => b.finish),
            ...(releases.length > 0 ? { releases: releases.map((b) => b.release) } : {}),
            claims: claims.map((b) => b.claim),
            ...(dueClaims.length > 0 ? { dueClaims: dueClaims.map((b) => b.dueClaim) } : {}),
          });
    const size = batch.length;
    this.#inFlight.push(size);
    written.finally(() => this.#landed(size)).catch(() => {});
    written.then(
      (results) => {
        // Callers go on in the order their writes took effect: a claim that took a job's lease
        // after a commit released it must set its fence after that commit forgot the old one.
        settle(creates, results.creates);
        commits.forEach((b, i) => {
          const result = results.commits[i];
          if (result) b.resolve(result);
          else b.reject(new RevisionConflictError(`The store returned no result for job ${b.commit.jobId}.`));
        });
        settle(finishes, results.finishes);
        settle(releases, results.releases ?? []);
        settle(claims, results.claims);
        dueClaims.forEach((b, i) => {
          const result = results.dueClaims?.[i];
          if (result) b.resolve(result);
          else b.reject(new RevisionConflictError('The store returned no result for a batch claim.'));
        });
      },
      (error: unknown) => {
        if (error instanceof CommitOutcomeUnknown) void this.#resolveUnknown([...creates, ...commits, ...finishes, ...releases, ...claims, ...dueClaims], error);
        else batch.forEach((b) => b.reject(error));
      },
    );
  }

  /**
   * The batch's transaction may or may not have landed: read each write back (never write it
   * blind), settle the ones that landed, write the others again (at most {@link MAX_WRITES_AGAIN}
   * times each). A read-back that keeps failing gives its fault to the caller.
   */
  async #resolveUnknown(writes: readonly QueuedWrite[], cause: CommitOutcomeUnknown): Promise<void> {
    const verdicts = await Promise.all(writes.map((w) => readBack(this.#store, w, this.#readBack).catch((error: unknown) => ({ error }))));
    writes.forEach((w, i) => {
      const verdict = verdicts[i]!;
      if (verdict === 'again') this.#writeAgain(w, cause);
      else if ('settle' in verdict) verdict.settle();
      else w.reject(verdict.error);
    });
  }

  #writeAgain(write: QueuedWrite, cause: CommitOutcomeUnknown): void {
    const times = (this.#again.get(write) ?? 0) + 1;
    if (times > MAX_WRITES_AGAIN) return write.reject(cause);
    this.#again.set(write, times);
    this.enqueue(write, false);
  }
}

/** Hand each caller of a batch its own outcome; a store that returned too few fails the rest. */
function settle<T>(waiting: readonly Waiting<T>[], outcomes: readonly Outcome<T>[]): void {
  waiting.forEach((w, i) => {
    const outcome = outcomes[i];
    if (!outcome) w.reject(new RevisionConflictError('The store returned no result for a write of the batch.'));
    else if (outcome.ok) w.resolve(outcome.result);
    else w.reject(outcome.error);
  });
}

