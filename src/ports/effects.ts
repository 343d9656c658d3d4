/**
 * Activities and timers as stored: effects, attempts and their claims and finishes, timers, notes and assets. Part of the store port (store.ts).
 */
import type { ErrorInfo, JobRecord, JsonValue, MayBeDamaged, NewInboxEvent } from './jobs.ts';

export type EffectStatus = 'pending' | 'running' | 'waiting' | 'backoff' | 'succeeded' | 'failed' | 'cancelled';

/** One invocation of an activity: its idempotency key is `id`, stable across retries and restarts. */
export interface EffectRecord extends MayBeDamaged {
  id: string;
  jobId: string;
  /** The invoke id: outcomes come back as `xstate.done.actor.<actorId>` / `xstate.error.actor.<actorId>`. */
  actorId: string;
  src: string;
  /** `activity`: a fromPromise run by a worker; `child`: a child job (its id is this effect's id). */
  kind: 'activity' | 'child';
  input: JsonValue;
  status: EffectStatus;
  /** True while the state that invoked it is current. */
  active: boolean;
  /** Attempts started so far. */
  attempt: number;
  maxAttempts: number;
  /** Never re-run after a crash: the machine gets an indeterminate-outcome error instead. */
  unsafe: boolean;
  nextRunAt: number | null;
  claimedBy: string | null;
  claimExpiresAt: number | null;
  token: string | null;
  output: JsonValue | null;
  error: ErrorInfo | null;
  createdRevision: number;
  createdAt: number;
  updatedAt: number;
}

export interface NewEffect {
  id: string;
  jobId: string;
  actorId: string;
  src: string;
  /** Default `activity`. A `child` effect starts as `waiting` at attempt 1: its child job runs it. */
  kind?: 'activity' | 'child';
  input: JsonValue;
  /** `JSON.stringify(input)`, when the step made it already (the store writes it as it is; absent: the store makes it). */
  inputJson?: string;
  maxAttempts: number;
  unsafe: boolean;
  createdRevision: number;
  at: number;
}

export type AttemptOutcome = 'running' | 'succeeded' | 'failed' | 'waiting' | 'interrupted' | 'stale';

export interface AttemptRecord extends MayBeDamaged {
  effectId: string;
  attempt: number;
  runner: string | null;
  startedAt: number;
  endedAt: number | null;
  outcome: AttemptOutcome;
  error: ErrorInfo | null;
}

/** An effect claimed for its next attempt, with the fence of its job's lease the runner now holds. */
export type ClaimedEffect = EffectRecord & { leaseFence: number };

/** One claim of a write batch: the arguments of `claimEffect`. */
export interface EffectClaim {
  id: string;
  runner: string;
  now: number;
  claimUntil: number;
  takeOver?: string | undefined;
  fence?: number | null | undefined;
}

/**
 * What `claimDueEffects` asks for: attempts of due activities for `runner`, taken at `now` and
 * claimed until `claimUntil` (with their jobs' leases), at most `limit` of them.
 */
export interface DueClaim {
  runner: string;
  now: number;
  claimUntil: number;
  limit: number;
  /** The machine versions the runner can run, each as `machineId@machineVersion`: activities of other jobs are left unclaimed. */
  machines: readonly string[];
  /**
   * The activity srcs (names) the runner runs: rows of other srcs are left unclaimed, and never
   * read (the store reads the oldest due rows of each of these srcs, so a backlog of a src it may
   * not take costs nothing). A runtime names every src its registered machines invoke.
   */
  srcs: readonly string[];
  /** Activity srcs with a concurrency limit here, and how many more attempts of each may start (0: none, and its rows are not read). Other srcs: up to `limit`. */
  budgets?: Readonly<Record<string, number>> | undefined;
}

/**
 * An attempt a batch claim took, with its job's record as the claim left it (its lease taken):
 * the job's machine version (to run it), and the record the attempt's outcome commits from
 * without reading the job again (that commit checks the revision, so a record gone stale meanwhile
 * costs a conflict and a fresh read). Like any record read, it may carry `corruption`.
 */
export type DueClaimed = ClaimedEffect & { job: JobRecord };

/** What `claimDueEffects` took, and what it saw and left. */
export interface DueClaimResult {
  /** The attempts claimed, oldest first, at most one per job. */
  claimed: DueClaimed[];
  /**
   * Due effects of jobs whose lease `runner` holds, live: not claimed here, since a claim of such a
   * job goes with the lease fence the runner knows (`claimEffect`, under the job's lock).
   */
  held: EffectRecord[];
  /** More is due than this call took: past its limit, or a second due effect of a job it claimed (which needs the fence the first returns). */
  more: boolean;
  /** Rows were left because their src had no slot left (`budgets`). */
  limited: boolean;
}

/** One attempt outcome of a write batch: the arguments of `finishAttempt`. */
export interface AttemptFinish {
  id: string;
  /** The invocation (its effect's `actorId`) the attempt belongs to, when the caller knows it. */
  actorId?: string;
  attempt: number;
  result: AttemptResult;
  at: number;
  lease?: { runner: string; fence: number } | undefined;
}

/** What `finishAttempt` recorded: the outcome (`current`), a stale attempt, or nothing but a stale attempt because the job's lease was taken. */
export type FinishStatus = 'current' | 'stale' | 'lease-lost';

/** How an attempt ended, as recorded by `finishAttempt`. */
export type AttemptResult =
  | { kind: 'succeeded'; output: JsonValue; event: NewInboxEvent }
  /** `retryAt` set: another attempt is due then; null: the error goes to the machine as `event`. */
  | { kind: 'failed'; error: ErrorInfo; retryAt: number | null; event: NewInboxEvent | null }
  | { kind: 'waiting'; token: string };

export type TimerKind = 'after' | 'raise' | 'sendTo';
export type TimerStatus = 'scheduled' | 'fired' | 'delivered' | 'cancelled';

/** A durable timer: an event due at an absolute time. */
export interface TimerRecord extends MayBeDamaged {
  id: string;
  jobId: string;
  key: string;
  kind: TimerKind;
  event: JsonValue;
  dueAt: number;
  status: TimerStatus;
  createdRevision: number;
  createdAt: number;
}

export type NewTimer = Omit<TimerRecord, 'status' | 'damaged'>;

export interface NoteRecord {
  jobId: string;
  kind: string;
  message: string;
  at: number;
}

/** An output linked to its job (a file, an upload, a report). */
export interface AssetRecord extends MayBeDamaged {
  jobId: string;
  /** Unique per job: attaching the same key again (a retried attempt) is a no-op. */
  key: string;
  type: string;
  uri: string;
  size: number | null;
  meta: JsonValue | null;
  effectId: string | null;
  attempt: number | null;
  createdAt: number;
}
