/**
 * The activity executor: claims attempts of due activities (the pump, in the store's order, and
 * the first attempts a commit claims itself), runs them, records their outcomes (with the
 * commit that applies the outcome's event when nothing waits before it, else on their own),
 * takes over attempts of runners that are gone, and gives back the leases of jobs nothing here
 * works on any more.
 */
import type { Clock } from '../ports/clock.ts';
import type { AttemptFinish, ClaimedEffect, DueClaim, DueClaimResult, EffectClaim, EffectRecord, EffectStart, FinishStatus, JobRecord, JobStore, NewEffect, NewInboxEvent } from '../ports/store.ts';
import { CommitOutcomeUnknown } from '../ports/store.ts';
import { toErrorInfo } from '../base/errors.ts';
import { unref } from '../base/node.ts';
import type { MachineRegistry } from './registry.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { crashPoint } from './crashPoints.ts';
import { decideFinish, type AttemptEnd, type DecidedFinish } from './outcomes.ts';
import { firstAttemptClaimed, interruptedError, outcomeEvent } from '../step/attempts.ts';
import { AttemptAbort, attemptArgs, isDeferred, runnerIsGone, type AssetInput } from './activities.ts';
import { widerScan, type ActivitySlots } from './limits.ts';
import { checkPercent } from './intake.ts';
import type { LogEntry, RuntimeEvent } from './api.ts';
import { TERMINAL } from './jobView.ts';
import type { WriteLease } from './reports.ts';
import type { RunningActivity, RuntimeParts } from './parts.ts';
import type { Waiting } from './outcomeUnknown.ts';

/** An attempt's outcome recorded in the commit that applies its event; `recorded` runs once that commit is durable. */
export interface OutcomeInCommit {
  finish: AttemptFinish;
  recorded: () => void;
  /** The ended attempt's slot, held for the job's next activity (`claimsFor`). */
  slot?: SlotHandoff;
  /** The job's record as the batch claim that started the attempt left it (`DueClaimed.job`): the commit may start from it, unread. */
  job?: JobRecord | undefined;
}

/** An attempt claimed for this runner; `job`: its job's record, when a batch claim took it (`DueClaimed`). */
type Claimed = ClaimedEffect & { job?: JobRecord };

/** A slot an ended attempt still holds while its outcome commits: `held` until a claim of that commit takes it over, or the outcome is recorded. */
export interface SlotHandoff {
  held: boolean;
}

/** What the executor needs of the commit path (jobCommits.ts). */
export interface OutcomeCommits {
  /** Apply a job's pending events; how many were settled. */
  drain(jobId: string): Promise<number>;
  /** Check a job against the registry (migrate or quarantine it). */
  check(jobId: string): Promise<unknown>;
  /** Apply an outcome's event with the attempt's finish in one commit, if nothing waits before it. */
  applyOutcome(jobId: string, event: NewInboxEvent, outcome: OutcomeInCommit): Promise<void>;
}

/** What the executor is built with besides the shared parts. */
export interface ExecutorDeps extends RuntimeParts {
  hostDriven: boolean;
  maxActivities: number;
  leaseMs: number;
  slots: ActivitySlots;
  jobs: OutcomeCommits;
  /** Whether `close()` has begun: no new attempts are claimed. */
  closing: () => boolean;
  /** What an attempt reports (reports.ts, under its lease), and the runtime's open check. */
  progress: (jobId: string, percent: number, lease: WriteLease) => Promise<unknown>;
  attach: (jobId: string, asset: AssetInput, from: { effectId: string; attempt: number }, lease: WriteLease) => Promise<unknown>;
  assertOpen: () => void;
}

/** The activity executor (see the file's comment). */
export class ActivityExecutor {
  readonly store: JobStore;
  readonly clock: Clock;
  readonly registry: MachineRegistry;
  readonly runnerId: string;
  readonly #process: boolean;
  readonly #runEffects: boolean;
  readonly #hostDriven: boolean;
  readonly #maxActivities: number;
  readonly #leaseMs: number;
  readonly #slots: ActivitySlots;
  readonly #jobs: OutcomeCommits;
  readonly #leases: Map<string, number>;
  readonly #attempting: Map<string, string>;
  readonly #running: Map<string, RunningActivity>;
  readonly #pendingDrains: ReadonlySet<string>;
  readonly #deps: ExecutorDeps;
  readonly #readKnown: (jobId: string) => Promise<JobRecord | undefined>;
  readonly #emit: (event: RuntimeEvent) => void;
  readonly #logEntry: (level: LogEntry['level'], msg: string, fields: Record<string, unknown>) => void;
  readonly #track: (work: Promise<unknown>) => void;
  readonly #unit: <T>(work: () => Promise<T>) => Promise<T>;
  readonly #withLock: <T>(jobId: string, work: () => Promise<T>) => Promise<T>;
  /** Group-committed writes (commits.ts): an attempt's outcome recorded on its own, an attempt's claim. */
  readonly #submitFinish: (finish: AttemptFinish) => Promise<FinishStatus>;
  readonly #submitClaim: (claim: EffectClaim) => Promise<ClaimedEffect | undefined>;
  readonly #leaseLost: (jobId: string, fence: number) => void;
  readonly #progress: ExecutorDeps['progress'];
  readonly #attach: ExecutorDeps['attach'];
  readonly #assertOpen: () => void;
  /** Slots taken for first attempts that a commit in flight claims (`claimsFor`), not yet in `#running`. */
  #reserved = 0;
  /** Slots of ended attempts, reserved (in #reserved) for the batch claim the next group-commit batch carries (`refill`, `#topUp`). */
  #refills = 0;
  /** Renews the claims of running attempts (`#renewRunningClaims`). */
  #claimTimer: ReturnType<typeof setInterval> | undefined;
  /** Attempts a durable commit claimed, by effect id, for the commit's after-steps to start (`startClaimed`). */
  readonly #claimedInCommit = new Map<string, { effect: ClaimedEffect; def: RegisteredMachine }>();
  /** Due activities may wait in the store that this runtime has not claimed: a freed slot pumps, and commits claim nothing (older work first). */
  #unclaimed = false;
  /** The pump round under way, settled when it ends (`pumped()` waits on it). */
  #pumping: Promise<void> | undefined;
  #pumpAgain = false;

  constructor(deps: ExecutorDeps) {
    this.#deps = deps;
    this.store = deps.store;
    this.clock = deps.clock;
    this.registry = deps.registry;
    this.runnerId = deps.runnerId;
    this.#process = deps.process;
    this.#runEffects = deps.runEffects;
    this.#hostDriven = deps.hostDriven;
    this.#maxActivities = deps.maxActivities;
    this.#leaseMs = deps.leaseMs;
    this.#slots = deps.slots;
    this.#jobs = deps.jobs;
    this.#leases = deps.leases;
    this.#attempting = deps.attempting;
    this.#running = deps.running;
    this.#pendingDrains = deps.pendingDrains;
    this.#readKnown = deps.readKnown;
    this.#emit = (event) => deps.events.emit(event);
    this.#logEntry = (level, msg, fields) => deps.events.log(level, msg, fields);
    this.#track = (work) => deps.background.track(work);
    this.#unit = (work) => deps.commits.unit(work);
    this.#withLock = (jobId, work) => deps.locks.run(jobId, work);
    this.#submitFinish = (finish) => deps.commits.submitFinish(finish);
    this.#submitClaim = (claim) => deps.commits.submitClaim(claim);
    deps.commits.topUp = () => this.#topUp();
    deps.commits.siblings = () => this.#running.size;
    this.#leaseLost = (jobId, fence) => deps.leaseKeeper.lost(jobId, fence);
    this.#progress = deps.progress;
    this.#attach = deps.attach;
    this.#assertOpen = deps.assertOpen;
  }

  /** Whether `close()` has begun. */
  get #closing(): boolean {
    return this.#deps.closing();
  }

  /** Whether a pump round is under way (`idle()` waits for it). */
  get pumping(): boolean {
    return this.#pumping !== undefined;
  }

  /** Resolves once no pump round is under way (each round a commit starts meanwhile waited out too). */
  async pumped(): Promise<void> {
    while (this.#pumping) await this.#pumping;
  }

  /** Stop renewing running attempts' claims (`close()`). */
  stop(): void {
    if (this.#claimTimer) clearInterval(this.#claimTimer);
  }

  /**
   * Start due activities up to the concurrency limit. Returns how many attempts it started.
   * `orphans`: the poll's round (`tick()`): also take over attempts of runners that are gone, and
   * read what a batch claim leaves (`#startDue`).
   */
  async pump(orphans = false): Promise<number> {
    if (!this.#runEffects || this.#closing || this.#slots.closed()) return 0;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return 0;
    }
    let ended!: () => void;
    this.#pumping = new Promise<void>((resolve) => (ended = resolve));
    const pollRound = orphans;
    let started = 0;
    try {
      do {
        this.#pumpAgain = false;
        if (orphans) started += await this.#takeOverOrphans();
        const free = this.#maxActivities - this.#busySlots();
        if (free <= 0) {
          this.#unclaimed = true; // no slot to look with: the next freed slot pumps
          break;
        }
        this.#unclaimed = false;
        started += await this.#claimDue(free);
        if (orphans) started += await this.#startDue();
        orphans = false;
        // The poll's round ends with its own claims: pumps asked for meanwhile go on in the background.
      } while (this.#pumpAgain && !this.#closing && !pollRound);
    } finally {
      this.#pumping = undefined;
      ended();
    }
    if (this.#pumpAgain && !this.#closing) {
      this.#pumpAgain = false;
      this.#track(this.pump());
    }
    return started;
  }

  /**
   * Claim due attempts for the `free` slots in one batch claim (`claimDueEffects`, group-committed)
   * and run them; then the due effects of jobs whose lease this runtime holds, each claimed with its fence.
   */
  async #claimDue(free: number): Promise<number> {
    // The slots are held while the claim is in flight: a commit meanwhile claims none of them.
    this.#reserved += free;
    return this.#claimed(free, this.#deps.commits.submitDueClaim(this.#dueClaim(free)));
  }

  /** A batch claim of at most `limit` attempts for this runner, now. */
  #dueClaim(limit: number): DueClaim {
    const now = this.clock.now();
    return { runner: this.runnerId, now, claimUntil: this.#deps.leaseKeeper.until(now), limit, machines: this.registry.keys(), srcs: this.registry.srcs(), budgets: this.#slots.remaining() };
  }

  /** A batch claim for `free` reserved slots settles: the slots are given back, what it claimed runs, what it left is noted. How many attempts started. */
  async #claimed(free: number, claim: Promise<DueClaimResult>): Promise<number> {
    let due: DueClaimResult;
    try {
      due = await claim;
    } catch (error) {
      this.#unclaimed = true; // nothing claimed: the next freed slot, or the poll, looks again
      if (!(error instanceof CommitOutcomeUnknown)) throw error;
      // Taken as nothing claimed: an attempt that landed expires at its claimUntil and is taken over.
      this.#logEntry('warn', 'a batch claim of due activities may or may not have landed', { error: toErrorInfo(error) });
      return 0;
    } finally {
      this.#reserved -= free;
    }
    for (const effect of due.claimed) {
      this.#slots.take(effect.src);
      this.#attempting.set(effect.id, effect.jobId);
      this.#leases.set(effect.jobId, effect.leaseFence);
      this.#launch(effect, this.registry.get(effect.job.machineId, effect.job.machineVersion));
    }
    const started = due.claimed.length + (await this.#startRound(due.held)).started;
    if (due.limited) this.#unclaimed = true; // rows over their src's limit: the next freed slot pumps
    if (due.more) {
      if (started > 0 && this.#busySlots() < this.#maxActivities) this.#pumpAgain = true;
      else this.#unclaimed = true;
    }
    return started;
  }

  /**
   * An attempt's outcome is about to be submitted (in a commit that applies it, or on its own)
   * and does not hand the attempt's slot to the job's next activity. When due work waits here
   * unclaimed, the slot stays reserved for the batch claim that the outcome's group-commit batch
   * carries ({@link #topUp}): the next job's first activity is claimed in the transaction that
   * ended the last one, not by a claim of its own after it. Else the slot stays held until the
   * outcome is recorded, and the pump after it looks.
   */
  refill(slot: SlotHandoff): void {
    if (!slot.held || !this.#unclaimed || this.#closing) return;
    slot.held = false; // counted in #reserved still: the top-up claim's now
    this.#refills += 1;
  }

  /** The batcher's top-up (CommitBatcher.topUp): one batch claim, in the batch being written, for the slots `refill` kept. */
  #topUp(): ({ dueClaim: DueClaim } & Waiting<DueClaimResult>) | undefined {
    const free = this.#refills;
    if (free === 0) return undefined;
    this.#refills = 0;
    if (this.#closing) {
      this.#reserved -= free;
      return undefined;
    }
    let waiting!: Waiting<DueClaimResult>;
    const result = new Promise<DueClaimResult>((resolve, reject) => (waiting = { resolve, reject }));
    this.#track(
      this.#claimed(free, result).then(() => {
        // More was due than the slots it had, and slots are free: a pump goes on (a running one sees the flag).
        if (this.#pumpAgain && !this.#pumping) this.#track(this.pump());
      }),
    );
    return { dueClaim: this.#dueClaim(free), ...waiting };
  }

  /**
   * Start attempts of these due effects while slots are free, one per job (a second claim of a
   * job needs the fence the first returns: the next round); how many started, and how many rows
   * were held by their src's limit. The round's claims go out together and share one
   * group-commit transaction.
   */
  async #startRound(due: readonly EffectRecord[]): Promise<{ started: number; held: number }> {
    const starts: Promise<boolean>[] = [];
    const jobs = new Set<string>();
    let held = 0;
    for (const effect of due) {
      // Each start below counts its slot as it is called (#startAttempt).
      if (this.#busySlots() >= this.#maxActivities || this.#closing) {
        this.#unclaimed = true;
        break;
      }
      if (this.#running.has(effect.id)) continue;
      if (!this.#slots.has(effect.src)) {
        held += 1; // over its activityConcurrency: stays pending in the store
        this.#unclaimed = true;
      } else if (jobs.has(effect.jobId)) this.#pumpAgain = true; // next round, with the fence
      else {
        jobs.add(effect.jobId);
        starts.push(this.#startAttempt(effect));
      }
    }
    let started = 0;
    for (const ok of await Promise.all(starts)) if (ok) started += 1;
    return { started, held };
  }

  /**
   * The poll's read of due effects (`dueEffects`), for what a batch claim leaves: expired attempts
   * to recover (unsafe to repeat, or out of attempts), and jobs of machine versions this runtime
   * lacks (checked: migrated or quarantined, visibly). Only those (`unclaimableBy`): a row a batch
   * claim may take is the batch claim's, here or in another runner that is taking it right now.
   */
  async #startDue(): Promise<number> {
    let started = 0;
    for (let window: number | undefined = this.#maxActivities; window !== undefined; window = widerScan(window)) {
      if (this.#busySlots() >= this.#maxActivities || this.#closing) break;
      const due = await this.store.dueEffects(this.clock.now(), window, this.runnerId, this.registry.keys());
      // A full window: more may be due than this round takes.
      if (due.length >= window) this.#unclaimed = true;
      const round = await this.#startRound(due);
      started += round.started;
      // Held rows may hide startable ones behind them: read further, up to a bound (limits.ts).
      if (round.held === 0 || due.length < window) break;
    }
    return started;
  }

  /** Attempts running here, plus slots taken for first attempts that commits in flight claim. */
  #busySlots(): number {
    return this.#running.size + this.#reserved;
  }

  /**
   * The first attempts a commit claims for this runner in the same transaction (`EffectStart`):
   * its new activities, each while a slot is free (`maxConcurrentActivities`, `activityConcurrency`)
   * and no older due work waits here unclaimed (that goes first, by the pump). Slots are taken
   * now, before the commit; `claimsCommitted` gives them back if the commit does not hold.
   *
   * `handoff`: the commit applies an attempt's outcome, and that attempt's slot is still held for
   * it (no pump took it meanwhile). The job's first new activity takes that slot over, even while
   * older work waits unclaimed: a job under way goes on in the same commit (no batch claim, no
   * lease given back and taken again), and the backlog's order is kept for every other slot.
   */
  claimsFor(effects: readonly NewEffect[], now: number, handoff?: SlotHandoff): EffectStart[] {
    if (!this.#runEffects || this.#closing || (this.#unclaimed && !handoff?.held)) return [];
    const claims: EffectStart[] = [];
    for (const effect of effects) {
      // A child job, or an activity another process runs (limited to 0 here): nothing to claim here, ever.
      if (effect.kind === 'child' || !this.#slots.runsHere(effect.src)) continue;
      const mine = handoff?.held === true;
      if (!this.#slots.has(effect.src) || (!mine && (this.#unclaimed || this.#busySlots() >= this.#maxActivities))) {
        this.#unclaimed = true; // left pending in the store: the next freed slot pumps
        continue;
      }
      this.#slots.take(effect.src);
      if (mine) handoff.held = false; // the ended attempt's reserved slot is this claim's now
      else this.#reserved += 1;
      this.#attempting.set(effect.id, effect.jobId); // a commit of the job built meanwhile keeps the lease
      claims.push({ effectId: effect.id, claimUntil: this.#deps.leaseKeeper.until(now) });
    }
    return claims;
  }

  /**
   * Whether this runtime runs any of a commit's new effects (so the commit keeps the job's lease
   * for them): not when it runs no activities, nor for activities limited to 0 here (remote
   * workers run them: a lease kept here would hold their claims back until it expired).
   */
  runsAny(effects: readonly NewEffect[]): boolean {
    return this.#runEffects && effects.some((e) => e.kind === 'child' || this.#slots.runsHere(e.src));
  }

  /** The commit carrying `claims` held (`fence`: the job's lease fence after it) or not (null): keep them for `startClaimed`, or give their slots back. */
  claimsCommitted(effects: readonly NewEffect[], claims: readonly EffectStart[], fence: number | null, def: RegisteredMachine): void {
    for (const claim of claims) {
      const created = effects.find((e) => e.id === claim.effectId)!;
      if (fence === null) {
        this.#reserved -= 1;
        this.#slots.release(created.src);
        this.#attempting.delete(created.id);
        continue;
      }
      const effect = firstAttemptClaimed(created, this.runnerId, claim.claimUntil, fence);
      this.#claimedInCommit.set(claim.effectId, { effect, def });
    }
  }

  /** After a commit (the commit path's `#afterCommit`, jobCommits.ts): run the attempts it claimed; pump for new activities it could not claim. */
  startClaimed(effects: readonly NewEffect[]): void {
    let unclaimed = false;
    for (const created of effects) {
      const claimed = this.#claimedInCommit.get(created.id);
      if (!claimed) {
        unclaimed ||= created.kind !== 'child';
        continue;
      }
      this.#claimedInCommit.delete(created.id);
      this.#reserved -= 1;
      this.#launch(claimed.effect, claimed.def);
    }
    if (unclaimed) this.#track(this.pump());
  }

  /** Activities claimed by a runner that is gone (crashed process, closed runtime) are taken over now. */
  async #takeOverOrphans(): Promise<number> {
    let started = 0;
    for (const effect of await this.store.runningEffects(500)) {
      if (this.#running.size >= this.#maxActivities || this.#closing) break;
      if (effect.claimedBy === null || this.#running.has(effect.id) || !runnerIsGone(effect.claimedBy)) continue;
      if (await this.#recoverInterrupted(effect, effect.claimedBy)) started += 1;
    }
    return started;
  }

  /**
   * An attempt was interrupted (its runner died). Safe activities run again with the same
   * idempotency key; unsafe ones, and ones out of attempts, deliver an error event instead.
   */
  async #recoverInterrupted(effect: EffectRecord, deadRunner: string): Promise<boolean> {
    const now = this.clock.now();
    const error = interruptedError(effect);
    if (error) {
      const event = outcomeEvent(effect, effect.attempt, { error }, now);
      if (await this.store.failEffect(effect.id, effect.attempt, error, event, now)) {
        this.#logEntry('warn', 'interrupted activity not re-run', { jobId: effect.jobId, effectId: effect.id, error });
        if (this.#process) this.#track(this.#jobs.drain(effect.jobId));
      }
      return false;
    }
    return this.#startAttempt(effect, deadRunner);
  }

  /** Claim the next attempt of an activity and run it in the background. */
  async #startAttempt(effect: EffectRecord, takeOver?: string): Promise<boolean> {
    if (!this.#slots.has(effect.src)) return false; // over its activityConcurrency: left in the store for a free slot
    if (effect.status === 'running' && takeOver === undefined) {
      // Its claim expired: the runner may be alive but stuck. Treat as interrupted.
      if (effect.claimedBy !== null && (effect.unsafe || effect.attempt >= effect.maxAttempts)) {
        await this.#recoverInterrupted(effect, effect.claimedBy);
        return false;
      }
    }
    const now = this.clock.now();
    // Slot and attempt are counted before anything is awaited: other claims (of the round, a
    // commit's, a batch claim's free slots) see the slot taken while this claim is in flight, and
    // a commit of the job built meanwhile keeps the lease the claim is taking.
    this.#slots.take(effect.src);
    this.#reserved += 1;
    this.#attempting.set(effect.id, effect.jobId);
    let claimed: ClaimedEffect | undefined;
    let def: RegisteredMachine | undefined;
    try {
      // Only a runtime that has the job's machine version runs its activities. Another one (a
      // worker started without the module) leaves them unclaimed, where it would fail them for
      // good: the job is migrated or quarantined instead (visible), and its activities wait.
      const record = await this.#readKnown(effect.jobId);
      if (!record || TERMINAL.has(record.status)) return false;
      def = this.registry.get(record.machineId, record.machineVersion);
      if (!def) {
        this.#attempting.delete(effect.id); // no attempt: a migration committed by the check takes no lease for it
        await this.#withLock(effect.jobId, () => this.#jobs.check(effect.jobId)).catch((error: unknown) => {
          this.#logEntry('warn', 'could not check a job whose activity this runtime cannot run', { jobId: effect.jobId, error: toErrorInfo(error) });
        });
        return false;
      }
      // Under the job's lock, as its commits are: the claim goes to the store once a commit of the
      // job in flight has settled, with the fence that commit left (an asynchronous store may run
      // two writes in flight in either order, and deliver their results in either order).
      claimed = await this.#withLock(effect.jobId, async () => {
        const claim = await this.#submitClaim({ id: effect.id, runner: this.runnerId, now, claimUntil: this.#deps.leaseKeeper.until(now), takeOver, fence: this.#leases.get(effect.jobId) ?? null });
        if (claim) this.#leases.set(claim.jobId, claim.leaseFence);
        return claim;
      });
    } finally {
      this.#reserved -= 1; // claimed: counted as running by #launch, in this same turn
      if (!claimed) {
        this.#slots.release(effect.src);
        this.#attempting.delete(effect.id);
      }
    }
    if (!claimed) return false;
    this.#launch(claimed, def);
    return true;
  }

  /** Run an attempt claimed for this runner (its slot taken, counted in `#attempting`) in the background. */
  #launch(claimed: Claimed, def: RegisteredMachine | undefined): void {
    crashPoint('after-claim');
    const controller = new AttemptAbort();
    this.#running.set(claimed.id, { jobId: claimed.jobId, actorId: claimed.actorId, attempt: claimed.attempt, controller });
    this.#renewRunningClaims();
    this.#emit({ type: 'activity.started', jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#logEntry('info', 'activity started', { jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#track(this.#runAttempt(claimed, def, controller).finally(() => this.#attempting.delete(claimed.id)));
  }

  async #runAttempt(effect: Claimed, def: RegisteredMachine | undefined, controller: AttemptAbort): Promise<void> {
    const attempt = effect.attempt;
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      const logic = def?.machine.implementations.actors[effect.src] as { config?: (args: unknown) => unknown } | undefined;
      if (!def || typeof logic?.config !== 'function') {
        throw Object.assign(new Error(`No activity "${effect.src}" in the registered machine.`), { terminal: true });
      }
      // Writes of an attempt are fenced like its outcome: ignored once another runner holds the job.
      const { args, pending } = attemptArgs(effect, controller, {
        progress: async (percent) => {
          this.#assertOpen();
          checkPercent(percent);
          await this.#progress(effect.jobId, percent, this.#attemptLease(effect.jobId));
        },
        attachAsset: async (asset) => {
          await this.#attach(effect.jobId, asset, { effectId: effect.id, attempt }, this.#attemptLease(effect.jobId));
        },
      });
      // Shutdown aborts the attempt and stops waiting for it, whether or not the activity heeds
      // its signal: the attempt is taken over by the next runtime, and close() must not hang.
      const running = logic.config(args);
      const value = await new Promise<unknown>((resolve, reject) => {
        controller.onAbort((reason) => this.#closing && reject(reason as Error));
        Promise.resolve(running).then(resolve, reject);
      });
      const pendingToken = pending();
      if (isDeferred(value) && pendingToken && pendingToken.token === value.token) {
        const status = await this.#submitFinish({ id: effect.id, attempt, result: { kind: 'waiting', token: value.token }, at: this.clock.now(), lease: this.#attemptLease(effect.jobId) });
        this.#attempting.delete(effect.id);
        await this.releaseIdle(effect.jobId); // waiting on a token: nothing runs here for it
        // The token is handed out only once the waiting state is durable.
        if (status === 'current') await pendingToken.onToken?.(value.token);
        this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt, outcome: status === 'current' ? 'waiting' : 'stale' });
        return;
      }
      outcome = { ok: true, value };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      this.#running.delete(effect.id);
      this.#slots.release(effect.src);
    }
    if (this.#closing && controller.aborted) return; // shutdown: the next runtime takes the attempt over
    crashPoint('before-outcome');
    // The ended attempt's slot stays reserved (taken in this same turn, so no pump takes it) until
    // its outcome is recorded: the commit that applies it may hand it to the job's next activity.
    const slot: SlotHandoff = { held: true };
    this.#reserved += 1;
    try {
      await this.#recordOutcome(effect, def, outcome, slot);
    } finally {
      if (slot.held) this.#reserved -= 1;
    }
    // The freed slot: a next step of this job was claimed by its commit; other due work here is pumped.
    if (this.#unclaimed) this.#track(this.pump());
  }

  /**
   * One interval for every running attempt's claim (not one per attempt): renewed every third of
   * `leaseMs` while any runs here; stopped when none does. Host-driven mode renews in `tick()`.
   */
  #renewRunningClaims(): void {
    if (this.#hostDriven || this.#claimTimer) return;
    this.#claimTimer = setInterval(() => {
      if (this.#running.size === 0) {
        clearInterval(this.#claimTimer);
        this.#claimTimer = undefined;
        return;
      }
      const now = this.clock.now();
      const until = this.#deps.leaseKeeper.until(now);
      for (const [effectId, running] of this.#running) void this.store.renewClaim(effectId, running.attempt, this.runnerId, until, now).catch(() => undefined);
    }, Math.max(1000, Math.floor(this.#leaseMs / 3)));
    unref(this.#claimTimer);
  }

  /** The lease an attempt's outcome is recorded under: the fence this runtime holds on the job (-1: none, so it is refused). */
  #attemptLease(jobId: string): { runner: string; fence: number } {
    return { runner: this.runnerId, fence: this.#leases.get(jobId) ?? -1 };
  }

  async #recordOutcome(effect: Claimed, def: RegisteredMachine | undefined, outcome: AttemptEnd, slot: SlotHandoff): Promise<void> {
    const attempt = effect.attempt;
    const now = this.clock.now();
    let status: FinishStatus | 'applied';
    // Told once: by the commit that records the outcome with its transition (before that
    // transition's own event), or below once the outcome is recorded on its own.
    let told = false;
    const decided = decideFinish(effect, def, outcome, now);
    let reported: DecidedFinish['reported'] | 'stale' = decided.reported;
    const errorInfo = decided.error;
    const tell = (result: typeof reported) => {
      if (told) return;
      told = true;
      this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt, outcome: result, ...(errorInfo ? { error: errorInfo } : {}) });
      this.#logEntry(result === 'succeeded' ? 'info' : 'warn', `activity ${result}`, { jobId: effect.jobId, effectId: effect.id, attempt, ...(errorInfo ? { error: errorInfo } : {}) });
    };
    const finish = { id: effect.id, actorId: effect.actorId, attempt, result: decided.result, at: now, lease: this.#attemptLease(effect.jobId) };
    if (decided.result.event === null) {
      this.refill(slot);
      status = await this.#submitFinish(finish);
    } else status = await this.#finishApplying({ ...finish, result: { ...decided.result, event: decided.result.event } }, effect.jobId, () => tell(decided.reported), slot, effect.job);
    const retryAt = decided.retryAt;
    this.#attempting.delete(effect.id); // recorded: a commit of the job may release its lease now
    if (slot.held) {
      slot.held = false; // not handed to a next activity: free for the pump below, and others
      this.#reserved -= 1;
    }
    crashPoint('after-outcome');
    // Applied in its own commit, which found nothing queued before it: only a self-send of that commit waits.
    const applied = status === 'applied';
    if (status !== 'current' && status !== 'applied') reported = 'stale';
    if (status === 'lease-lost') this.#leaseLost(effect.jobId, this.#leases.get(effect.jobId) ?? -1);
    tell(reported);
    if (this.#process && reported !== 'retrying' && (!applied || this.#pendingDrains.has(effect.jobId))) await this.#unit(() => this.#jobs.drain(effect.jobId));
    if (reported === 'retrying') this.#emit({ type: 'timers.scheduled', jobId: effect.jobId, dueAt: [retryAt] }); // a worker wakes then
    await this.releaseIdle(effect.jobId);
  }

  /**
   * Record an attempt's outcome that goes to the machine as its event. When this runtime applies
   * events and nothing waits before it in the job's inbox, the outcome is recorded in the commit
   * that applies its event (the store writes the attempt's end first, and nothing at all if the
   * attempt is no longer current): one write, no queued inbox row. Otherwise, or when that commit
   * is refused, it is recorded on its own (group-committed) and applied in inbox order.
   * `applied`: recorded and applied in one commit.
   */
  async #finishApplying(finish: AttemptFinish & { result: { event: NewInboxEvent } }, jobId: string, recorded: () => void, slot: SlotHandoff, job?: JobRecord): Promise<FinishStatus | 'applied'> {
    const event = finish.result.event;
    if (this.#process && !this.#closing) {
      const effectId = finish.id;
      // The commit decides the job's lease as if the attempt were over (released if nothing else
      // runs here); until it is durable the heartbeat, and other commits of the job, still count the attempt.
      // Set once the commit holding the outcome is durable: whatever happens after, it is recorded.
      let committed = false;
      const outcome = {
        finish,
        slot,
        job,
        recorded: () => {
          committed = true;
          recorded();
        },
      };
      // Events queued before it come first: the store refuses this commit then (a conflict,
      // nothing written), and the outcome is recorded on its own below, queued behind them.
      await this.#jobs.applyOutcome(jobId, event, outcome)
        .catch((error: unknown) => {
          if (committed) this.#logEntry('error', 'failed after the commit that recorded an outcome', { jobId, effectId, error: toErrorInfo(error) });
          else this.#logEntry('warn', 'outcome not applied with its commit; recorded on its own', { jobId, effectId, error: toErrorInfo(error) });
        });
      if (committed) return 'applied';
    }
    return this.#submitFinish(finish);
  }

  /** Release the lease of a job nothing here works on any more (an outcome that led to no commit: a retry, a stale result). */
  async releaseIdle(jobId: string): Promise<void> {
    await this.#withLock(jobId, async () => {
      const fence = this.#leases.get(jobId);
      if (fence === undefined) return;
      // An attempt of the job still counted here, finishing or not: its own commit decides the lease.
      for (const id of this.#attempting.values()) if (id === jobId) return;
      // In the next group-committed batch's transaction, not one of its own.
      await this.#deps.commits.submitRelease({ runner: this.runnerId, jobIds: [jobId] });
      if (this.#leases.get(jobId) === fence) this.#leases.delete(jobId);
    });
  }
}
