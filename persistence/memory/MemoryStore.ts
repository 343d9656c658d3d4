import type {
  FeedPage,
  HistoryFeedFilter,
  AcceptResult,
  AssetRecord,
  AttemptRecord,
  AttemptResult,
  CommitResult,
  CreateJobResult,
  AttemptFinish,
  ClaimedEffect,
  EffectClaim,
  FinishStatus,
  WriteBatch,
  WriteBatchResult,
  EffectRecord,
  EffectStatus,
  ErrorInfo,
  EventStatus,
  InboxRecord,
  QueuedEvent,
  JobFilter,
  JobRecord,
  JobStore,
  JsonValue,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
  NoteRecord,
  PurgeFilter,
  StoreStats,
  NewSchedule,
  OccurrenceRecord,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  TimerRecord,
  TransitionCommit,
  TransitionDraft,
  LeaseClaim,
  TransitionRecord,
} from '../../src/ports/store.ts';
import { inlineDraft, isExternal, leaseLostError, MAX_RELEASES, outcomeOf, RELEASED_ATTEMPT } from '../../src/ports/store.ts';
import { ClosedError } from '../../src/runtime/errors.ts';
import { MemorySchedules } from './schedules.ts';

interface StoredJob extends JobRecord {
  /** `|a|a.b|`, as the SQLite store keeps it, so `listJobs({ state })` matches the same way. */
  statePaths: string;
  /** The lease fence, kept while the lease is free (`lease` null) so the next claim grows it. */
  leaseFence: number;
}

/** Thrown where the SQLite schema would refuse a row (a foreign key or a unique column). */
class ConstraintError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConstraintError';
  }
}

/** Ends one commit of a batch with its result; everything the commit wrote is rolled back. */
class Abort {
  constructor(readonly result: CommitResult) {}
}

type Undo = () => void;

/**
 * A store in process memory, for fast tests. It keeps the same contract as the SQLite store
 * (the shared contract suites run against both) but nothing survives the process.
 *
 * Every write runs like a SQLite transaction: each change is journaled and a write that fails
 * half-way (a conflict, a missing job, a duplicate id) is undone entirely. Values go in and come
 * out as JSON, exactly as through the SQLite columns, and every record returned is a copy.
 *
 * @example
 * const runtime = await createRuntime({ store: new MemoryStore(), machines });
 */
export class MemoryStore implements JobStore {
  readonly description = 'memory';
  readonly #jobs = new Map<string, StoredJob>();
  /** Every inbox event in seq order. */
  readonly #inbox = new Map<number, QueuedEvent>();
  /** `jobId \0 eventId` → event: the UNIQUE (job_id, event_id) index. */
  readonly #eventIndex = new Map<string, InboxRecord>();
  /** Each job's events in seq order. */
  readonly #jobEvents = new Map<string, InboxRecord[]>();
  readonly #history = new Map<string, TransitionRecord[]>();
  /** Every history row in seq order (SQLite: `transitions.seq`); rows of purged jobs are skipped on read. */
  readonly #feed: { seq: number; record: TransitionRecord }[] = [];
  /** The last history seq handed out: never reused, rolled back with its write. */
  #historySeq = 0;
  /** In insertion (rowid) order. */
  readonly #effects = new Map<string, EffectRecord>();
  /** Effect id → its attempts in attempt order. */
  readonly #attempts = new Map<string, AttemptRecord[]>();
  readonly #timers = new Map<string, TimerRecord>();
  readonly #notes = new Map<string, NoteRecord[]>();
  /** `jobId \0 key` → asset: the (job_id, key) primary key. */
  readonly #assets = new Map<string, AssetRecord>();
  /** The last inbox seq handed out (AUTOINCREMENT: never reused, rolled back with its write). */
  #seq = 0;
  #journal: Undo[] | null = null;
  #closed = false;
  /** Schedules and their occurrences (schedules.ts), journaled like every other write. */
  readonly #schedules = new MemorySchedules({
    tx: (fn) => this.#tx(fn),
    record: (undo) => this.#record(undo),
    insertJob: (job) => void this.#insertJob(job),
    getJob: (id) => {
      const job = this.#jobs.get(id);
      return job ? toJobRecord(job) : undefined;
    },
    requestCancel: (jobId, reason, event, at) => {
      const job = this.#jobs.get(jobId);
      if (!job || job.status !== 'active' || job.cancelRequestedAt !== null) return;
      this.#assign(job, { cancelRequestedAt: at, cancelReason: reason });
      this.#acceptPending(event);
    },
  });

  async createJob(job: NewJob): Promise<CreateJobResult> {
    this.#open();
    return this.#tx(() => this.#create(job));
  }

  async writeBatch(batch: WriteBatch): Promise<WriteBatchResult> {
    this.#open();
    const { creates = [], commits = [], finishes = [], claims = [] } = batch;
    // Each write in its own nested transaction: a refused one rolls back alone.
    const each = <T>(write: () => T) => outcomeOf(() => this.#tx(write));
    return this.#tx(() => ({
      creates: creates.map((job) => each(() => this.#create(job))),
      commits: commits.map((c) => this.#commitOne(c)),
      finishes: finishes.map((f) => each(() => this.#finish(f))),
      claims: claims.map((c) => each(() => this.#claim(c))),
    }));
  }

  #create(job: NewJob): CreateJobResult {
    const existing = this.#jobs.get(job.id) ?? (job.idempotencyKey === null ? undefined : this.#byKey(job.owner, job.idempotencyKey));
    if (existing) return { job: toJobRecord(existing), created: false };
    const stored = this.#insertJob(job);
    for (const child of job.children ?? []) this.#insertJob(child);
    for (const d of job.relatedDeliveries ?? []) this.#acceptPending(d);
    return { job: toJobRecord(stored), created: true };
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    this.#open();
    const job = this.#jobs.get(id);
    return job ? toJobRecord(job) : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    this.#open();
    const job = this.#byKey(owner, key);
    return job ? toJobRecord(job) : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    this.#open();
    const state = filter.state === undefined ? undefined : `|${filter.state}|`;
    const out = [...this.#jobs.values()]
      .filter(
        (j) =>
          (filter.machineId === undefined || j.machineId === filter.machineId) &&
          (filter.machineVersion === undefined || j.machineVersion === filter.machineVersion) &&
          (state === undefined || j.statePaths.includes(state)) &&
          (filter.status === undefined || j.status === filter.status) &&
          (filter.quarantined === undefined || (j.quarantine !== null) === filter.quarantined) &&
          (filter.exhausted === undefined || this.#isExhausted(j.id) === filter.exhausted) &&
          (filter.cancelRequested === undefined || (j.cancelRequestedAt !== null) === filter.cancelRequested) &&
          (filter.suspended === undefined || (j.suspendedAt !== null) === filter.suspended) &&
          (filter.stuck === undefined || this.#isIdle(j) === filter.stuck) &&
          (filter.owner === undefined || (j.owner ?? '') === (filter.owner ?? '')) &&
          (filter.afterId === undefined || compareText(j.id, filter.afterId) > 0),
      )
      .sort((a, b) => compareText(a.id, b.id));
    return limited(out, filter.limit ?? -1).map(toJobRecord);
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    this.#open();
    const out: string[] = [];
    for (const job of [...this.#jobs.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
      if (out.length >= limit) break;
      if (job.status !== 'active' || job.parent === null) continue;
      const effect = this.#effects.get(job.id);
      if (effect && !effect.active) out.push(job.id);
    }
    return out;
  }

  async activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    this.#open();
    const counts = new Map<string, { machineId: string; machineVersion: string; jobs: number }>();
    for (const j of this.#jobs.values()) {
      if (j.status !== 'active' || (j.owner ?? '') !== (owner ?? '')) continue;
      const key = `${j.machineId}\u0000${j.machineVersion}`;
      const entry = counts.get(key) ?? { machineId: j.machineId, machineVersion: j.machineVersion, jobs: 0 };
      entry.jobs = Math.min(countUpTo, entry.jobs + 1);
      counts.set(key, entry);
    }
    return [...counts.values()].sort((a, b) => compareText(a.machineId, b.machineId) || compareText(a.machineVersion, b.machineVersion));
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    this.#open();
    return this.#tx(() => {
      const inserted = this.#insertEvent(event, { status: 'pending', error: null, revision: null, processedAt: null });
      const stored = this.#eventIndex.get(eventKey(event.jobId, event.eventId))!;
      return { event: copy(stored), duplicate: !inserted };
    });
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    this.#open();
    const e = this.#eventIndex.get(eventKey(jobId, eventId));
    return e ? copy(e) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    this.#open();
    // As the SQLite store orders them: applied events by revision, then the rest in seq order.
    return [...(this.#jobEvents.get(jobId) ?? [])]
      .sort((a, b) => Number(a.revision === null) - Number(b.revision === null) || (a.revision ?? 0) - (b.revision ?? 0) || (a.seq ?? 0) - (b.seq ?? 0))
      .map(copy);
  }

  async pendingEvents(jobId: string, limit: number): Promise<QueuedEvent[]> {
    this.#open();
    return limited(
      (this.#jobEvents.get(jobId) ?? []).filter((e): e is QueuedEvent => e.status === 'pending' && e.seq !== null),
      limit,
    ).map(copy);
  }

  async jobsWithPendingEvents(limit: number, lease?: { runner: string; now: number }): Promise<string[]> {
    this.#open();
    const ids = new Set<string>();
    for (const e of this.#inbox.values()) {
      if (e.status !== 'pending' || ids.has(e.jobId) || this.#jobs.get(e.jobId)?.quarantine !== null || this.#suspended(e.jobId)) continue;
      if (lease && this.#heldByOther(e.jobId, lease.runner, lease.now)) continue;
      ids.add(e.jobId);
    }
    return limited([...ids], limit);
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    this.#open();
    return this.#tx(() => commits.map((c) => this.#commitOne(c)));
  }

  /** One commit of a batch, on its own: a failure undoes only its own writes. */
  #commitOne(c: TransitionCommit): CommitResult {
    try {
      return this.#tx(() => this.#applyCommit(c));
    } catch (error) {
      if (error instanceof Abort) return error.result;
      return { ok: false, reason: 'error', error: { name: (error as Error).name, message: (error as Error).message } };
    }
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number, payload?: JsonValue): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#inbox.get(seq);
      if (!e || e.status !== 'pending') return false;
      this.#assign(e, { status: 'rejected', error: json(error), processedAt: at, ...(payload !== undefined ? { payload: json(payload) } : {}) });
      return true;
    });
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    this.#open();
    this.#tx(() => {
      const job = this.#jobs.get(jobId);
      if (job) this.#assign(job, { quarantine: reason, updatedAt: at });
    });
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    this.#open();
    return (this.#history.get(jobId) ?? []).map(copy);
  }

  async historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    this.#open();
    const upto = Math.min(this.#historySeq, after + scan);
    const records: FeedPage['records'] = [];
    for (let i = this.#feedIndexAfter(after); i < this.#feed.length && records.length < limit; i++) {
      const { seq, record } = this.#feed[i]!;
      if (seq > upto) break;
      const job = this.#jobs.get(record.jobId);
      // A purged job's rows are gone (and a job made again under its id has new ones).
      if (!job || this.#history.get(record.jobId)?.[record.revision - 1] !== record) continue;
      if (filter.owner !== undefined && job.owner !== filter.owner) continue;
      if (filter.machineId !== undefined && job.machineId !== filter.machineId) continue;
      if (filter.jobId !== undefined && record.jobId !== filter.jobId) continue;
      if (filter.outcomes !== undefined && !filter.outcomes.includes(record.outcome)) continue;
      records.push({ ...copy(record), seq, machineId: job.machineId });
    }
    return { records, next: records.length === limit ? records.at(-1)!.seq : Math.max(after, upto) };
  }

  /** The index of the first feed row with a seq above `after` (binary search: seqs grow). */
  #feedIndexAfter(after: number): number {
    let lo = 0;
    let hi = this.#feed.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#feed[mid]!.seq <= after) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // Effects

  async getEffect(id: string): Promise<EffectRecord | undefined> {
    this.#open();
    const e = this.#effects.get(id);
    return e ? copy(e) : undefined;
  }

  async listEffects(jobId: string): Promise<EffectRecord[]> {
    this.#open();
    return this.#effectsOf(jobId).map(copy);
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    this.#open();
    // ORDER BY e.created_revision, a.effect_id, a.attempt
    return this.#effectsOf(jobId).flatMap((e) => [...(this.#attempts.get(e.id) ?? [])].sort((a, b) => a.attempt - b.attempt).map(copy));
  }

  async dueEffects(now: number, limit: number, runner?: string): Promise<EffectRecord[]> {
    this.#open();
    const due = [...this.#effects.values()].filter(
      (e) =>
        e.active &&
        (e.status === 'pending' ||
          (e.status === 'backoff' && e.nextRunAt !== null && e.nextRunAt <= now) ||
          (e.status === 'running' && e.claimExpiresAt !== null && e.claimExpiresAt <= now)) &&
        !this.#held(e.jobId) &&
        !(runner !== undefined && this.#heldByOther(e.jobId, runner, now)),
    );
    // ORDER BY coalesce(next_run_at, created_at), rowid: ties stay in insertion order.
    due.sort((a, b) => (a.nextRunAt ?? a.createdAt) - (b.nextRunAt ?? b.createdAt));
    return limited(due, limit).map(copy);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    this.#open();
    return limited(
      [...this.#effects.values()].filter((e) => e.active && e.status === 'running'),
      limit,
    ).map(copy);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined> {
    this.#open();
    return this.#tx(() => this.#claim({ id, runner, now, claimUntil, takeOver, fence }));
  }

  #claim(c: EffectClaim): ClaimedEffect | undefined {
    const { id, runner, now, claimUntil, takeOver, fence } = c;
    const e = this.#effects.get(id);
    if (!e || !e.active) return undefined;
    const claimable =
      e.status === 'pending' ||
      (e.status === 'backoff' && e.nextRunAt !== null && e.nextRunAt <= now) ||
      (e.status === 'running' && ((e.claimExpiresAt !== null && e.claimExpiresAt <= now) || (takeOver !== undefined && e.claimedBy === takeOver)));
    // Never an attempt past the policy: a runner that read an older attempt (another took the
    // next one over meanwhile, and died too) leaves the last one to be recorded exhausted.
    if (!claimable || e.attempt >= e.maxAttempts || this.#held(e.jobId)) return undefined;
    const leaseFence = this.#claimLease(e.jobId, { runner, fence, now, until: claimUntil, takeOver: takeOver ?? null });
    if (leaseFence === undefined) return undefined;
    const previous = { status: e.status, attempt: e.attempt };
    this.#assign(e, { status: 'running', attempt: e.attempt + 1, claimedBy: runner, claimExpiresAt: claimUntil, nextRunAt: null, updatedAt: now });
    if (previous.status === 'running') this.#interruptAttempt(id, previous.attempt, now);
    this.#insertAttempt({ effectId: id, attempt: e.attempt, runner, startedAt: now, endedAt: null, outcome: 'running', error: null });
    return { ...copy(e), leaseFence };
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#effects.get(id);
      if (!e || e.attempt !== attempt || e.claimedBy !== runner || e.status !== 'running') return false;
      if (this.#jobs.get(e.jobId)?.lease?.owner !== runner) return false;
      this.#assign(e, { claimExpiresAt: claimUntil });
      return true;
    });
  }
  async releaseAttempt(id: string, attempt: number, runner: string, at: number): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#effects.get(id);
      if (!e || e.attempt !== attempt || e.claimedBy !== runner || e.status !== 'running' || !e.active || e.unsafe) return false;
      const released = (this.#attempts.get(id) ?? []).filter((a) => a.outcome === 'interrupted' && (a.error as { code?: unknown } | null)?.code === RELEASED_ATTEMPT.code);
      if (released.length >= MAX_RELEASES) return false;
      this.#assign(e, { status: 'pending', maxAttempts: e.maxAttempts + 1, claimedBy: null, claimExpiresAt: null, nextRunAt: null, updatedAt: at });
      this.#endAttempt(id, attempt, 'interrupted', at, RELEASED_ATTEMPT);
      return true;
    });
  }


  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus> {
    this.#open();
    return this.#tx(() => this.#finish({ id, attempt, result, at, lease }));
  }

  /** `finishAttempt` inside a transaction; `acceptEvent` false: the caller accepts the outcome event itself (a commit's `finish`). */
  #finish(f: AttemptFinish, acceptEvent = true): FinishStatus {
    const { id, attempt, result, at, lease } = f;
    const effect = this.#effects.get(id);
    const job = effect ? this.#jobs.get(effect.jobId) : undefined;
    if (lease && effect && job && !(job.lease?.owner === lease.runner && job.leaseFence === lease.fence)) {
      // Another runner took the job: the outcome is not recorded; the claim ends now.
      const error = leaseLostError(lease.fence);
      this.#endAttempt(id, attempt, 'stale', at, error);
      if (effect.attempt === attempt && effect.status === 'running') this.#assign(effect, { claimExpiresAt: at });
      return 'lease-lost';
    }
    const settled: Pick<EffectRecord, 'status' | 'output' | 'error' | 'nextRunAt' | 'token'> =
      result.kind === 'succeeded'
        ? { status: 'succeeded', output: json(result.output), error: null, nextRunAt: null, token: null }
        : result.kind === 'waiting'
          ? { status: 'waiting', output: null, error: null, nextRunAt: null, token: result.token }
          : { status: result.retryAt === null ? 'failed' : 'backoff', output: null, error: json(result.error), nextRunAt: result.retryAt, token: null };
    const e = this.#effects.get(id);
    const current = e !== undefined && e.attempt === attempt && e.status === 'running' && e.active;
    if (current) {
      if (settled.token !== null) this.#checkToken(settled.token, e);
      this.#assign(e, { ...settled, claimedBy: null, claimExpiresAt: null, updatedAt: at });
    }
    this.#endAttempt(id, attempt, current ? result.kind : 'stale', at, result.kind === 'failed' ? result.error : null);
    const event = result.kind === 'waiting' ? null : result.event;
    if (event && acceptEvent) this.#acceptPending(event);
    return current ? 'current' : 'stale';
  }

  async failEffect(id: string, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#effects.get(id);
      if (!e || !e.active || e.status === 'succeeded' || e.status === 'failed' || e.status === 'cancelled') return false;
      const wasRunning = e.status === 'running';
      this.#assign(e, { status: 'failed', error: json(error), token: null, claimedBy: null, claimExpiresAt: null, updatedAt: at });
      if (wasRunning) this.#interruptAttempt(id, e.attempt, at);
      this.#acceptPending(event);
      return true;
    });
  }

  async effectByToken(token: string): Promise<EffectRecord | undefined> {
    this.#open();
    const e = this.#byToken(token);
    return e ? copy(e) : undefined;
  }

  async completeByToken(
    token: string,
    result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo },
    event: NewInboxEvent,
    at: number,
  ): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#byToken(token);
      if (!e || e.status !== 'waiting' || !e.active) return false;
      this.#assign(e, {
        status: result.kind,
        output: result.kind === 'succeeded' ? json(result.output) : null,
        error: result.kind === 'failed' ? json(result.error) : null,
        token: null,
        updatedAt: at,
      });
      this.#endAttempt(e.id, e.attempt, result.kind, at, result.kind === 'failed' ? result.error : null);
      this.#acceptPending(event);
      return true;
    });
  }

  // Timers

  async listTimers(jobId: string): Promise<TimerRecord[]> {
    this.#open();
    return [...this.#timers.values()]
      .filter((t) => t.jobId === jobId)
      .sort(byDueThenId)
      .map(copy);
  }

  async dueTimers(now: number, limit: number): Promise<TimerRecord[]> {
    this.#open();
    return limited(
      [...this.#timers.values()].filter((t) => t.status === 'scheduled' && t.dueAt <= now && !this.#suspended(t.jobId)).sort(byDueThenId),
      limit,
    ).map(copy);
  }

  async fireTimer(id: string, event: NewInboxEvent): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const t = this.#timers.get(id);
      if (!t || t.status !== 'scheduled' || this.#suspended(t.jobId)) return false;
      this.#assign(t, { status: 'fired' });
      this.#acceptPending(event);
      return true;
    });
  }

  async nextWakeAt(): Promise<number | null> {
    this.#open();
    let next: number | null = null;
    const consider = (t: number | null) => {
      if (t !== null && (next === null || t < next)) next = t;
    };
    // Suspended jobs wake nobody: their timers and retries wait for resume.
    for (const t of this.#timers.values()) if (t.status === 'scheduled' && !this.#suspended(t.jobId)) consider(t.dueAt);
    for (const e of this.#effects.values()) {
      if (!e.active || this.#held(e.jobId)) continue;
      if (e.status === 'backoff') consider(e.nextRunAt);
      else if (e.status === 'running') consider(e.claimExpiresAt);
    }
    for (const j of this.#jobs.values()) {
      if (j.lease && j.suspendedAt === null) consider(j.lease.until);
    }
    return next;
  }

  // Cancellation, progress, notes, assets

  async requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }> {
    this.#open();
    return this.#tx(() => {
      const job = this.#jobs.get(jobId);
      const first = job !== undefined && job.cancelRequestedAt === null;
      if (first) {
        this.#assign(job, { cancelRequestedAt: at, cancelReason: reason });
        this.#acceptPending(event);
      }
      return { first };
    });
  }

  async setProgress(jobId: string, progress: number, _at: number, lease?: { runner: string; fence: number }): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const job = this.#jobs.get(jobId);
      if (!job || job.status !== 'active') return false;
      if (lease && !(job.lease?.owner === lease.runner && job.leaseFence === lease.fence)) return false;
      this.#assign(job, { progress });
      return true;
    });
  }

  async addNote(note: NoteRecord): Promise<void> {
    this.#open();
    this.#tx(() => this.#insertNote(note));
  }

  async listNotes(jobId: string): Promise<NoteRecord[]> {
    this.#open();
    return (this.#notes.get(jobId) ?? []).map(copy);
  }

  async attachAsset(a: AssetRecord, lease?: { runner: string; fence: number }): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const key = eventKey(a.jobId, a.key);
      if (this.#assets.has(key)) return false;
      const job = this.#jobs.get(a.jobId);
      if (lease && job && !(job.lease?.owner === lease.runner && job.leaseFence === lease.fence)) return false;
      this.#requireJob(a.jobId);
      this.#mapSet(this.#assets, key, {
        jobId: a.jobId,
        key: a.key,
        type: a.type,
        uri: a.uri,
        size: a.size,
        meta: a.meta === null ? null : json(a.meta),
        effectId: a.effectId,
        attempt: a.attempt,
        createdAt: a.createdAt,
      });
      return true;
    });
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    this.#open();
    return [...this.#assets.values()]
      .filter((a) => a.jobId === jobId)
      .sort((a, b) => a.createdAt - b.createdAt || compareText(a.key, b.key))
      .map(copy);
  }

  async purgeJob(jobId: string): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      if (!this.#jobs.has(jobId)) return false;
      this.#deleteJob(jobId);
      return true;
    });
  }

  /** `DELETE FROM jobs WHERE id = ?` and what ON DELETE CASCADE removes with the row. */
  #deleteJob(jobId: string): void {
    for (const e of this.#jobEvents.get(jobId) ?? []) {
      if (e.seq !== null) this.#mapDelete(this.#inbox, e.seq);
      this.#mapDelete(this.#eventIndex, eventKey(e.jobId, e.eventId));
    }
    this.#mapDelete(this.#jobEvents, jobId);
    this.#mapDelete(this.#history, jobId);
    for (const e of [...this.#effects.values()]) {
      if (e.jobId !== jobId) continue;
      this.#mapDelete(this.#effects, e.id);
      this.#mapDelete(this.#attempts, e.id);
    }
    for (const t of [...this.#timers.values()]) if (t.jobId === jobId) this.#mapDelete(this.#timers, t.id);
    this.#mapDelete(this.#notes, jobId);
    for (const [key, a] of [...this.#assets]) if (a.jobId === jobId) this.#mapDelete(this.#assets, key);
    this.#mapDelete(this.#jobs, jobId);
  }

  // Operations: suspension, redrive, retention, stats

  async suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const job = this.#jobs.get(jobId);
      if (!job || job.status !== 'active' || job.suspendedAt !== null) return false;
      this.#assign(job, { suspendedAt: at, suspendReason: reason });
      this.#insertNote(note);
      return true;
    });
  }

  async resumeJob(jobId: string, note: NoteRecord): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const job = this.#jobs.get(jobId);
      if (!job || job.suspendedAt === null) return false;
      this.#assign(job, { suspendedAt: null, suspendReason: null });
      this.#insertNote(note);
      return true;
    });
  }

  async redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean> {
    this.#open();
    return this.#tx(() => {
      const e = this.#effects.get(id);
      if (!e || !e.active || e.status !== 'failed' || this.#jobs.get(e.jobId)?.status !== 'active') return false;
      this.#assign(e, { status: 'pending', maxAttempts, error: null, nextRunAt: null, token: null, claimedBy: null, claimExpiresAt: null, updatedAt: at });
      this.#insertNote(note);
      return true;
    });
  }

  async purgeFinished(filter: PurgeFilter): Promise<string[]> {
    this.#open();
    // ORDER BY updated_at, id LIMIT @limit
    const victims = limited(
      [...this.#jobs.values()]
        .filter(
          (j) =>
            j.status !== 'active' &&
            j.updatedAt < filter.before &&
            filter.statuses.includes(j.status) &&
            (filter.owner === undefined || (j.owner ?? '') === (filter.owner ?? '')),
        )
        .sort((a, b) => a.updatedAt - b.updatedAt || compareText(a.id, b.id)),
      filter.limit,
    ).map((j) => j.id);
    return this.#tx(() => {
      for (const id of victims) this.#deleteJob(id);
      return victims.sort(compareText);
    });
  }

  async stats(filter: { owner?: string | null; now: number }): Promise<StoreStats> {
    this.#open();
    const now = filter.now;
    const jobs = [...this.#jobs.values()].filter((j) => filter.owner === undefined || (j.owner ?? '') === (filter.owner ?? ''));
    const ids = new Set(jobs.map((j) => j.id));
    const mine = <T extends { jobId: string }>(records: Iterable<T>) => [...records].filter((r) => ids.has(r.jobId));

    // GROUP BY machine_id, machine_version, status, state_value ORDER BY the same (BINARY collation)
    const groups = new Map<string, { key: string[]; row: StoreStats['jobs'][number] }>();
    for (const j of jobs) {
      const key = [j.machineId, j.machineVersion, j.status, JSON.stringify(j.value)];
      const k = key.join('\u0000');
      const g = groups.get(k);
      if (g) g.row.count += 1;
      else groups.set(k, { key, row: { machineId: j.machineId, machineVersion: j.machineVersion, status: j.status, value: json(j.value), count: 1 } });
    }
    const byKey = (a: { key: string[] }, b: { key: string[] }) => {
      for (let i = 0; i < a.key.length; i += 1) {
        const c = compareText(a.key[i]!, b.key[i]!);
        if (c !== 0) return c;
      }
      return 0;
    };

    const held = (jobId: string) => {
      const j = this.#jobs.get(jobId);
      return j !== undefined && (j.suspendedAt !== null || j.quarantine !== null);
    };
    const pending = mine(this.#inbox.values()).filter((e) => e.status === 'pending');
    const free = pending.filter((e) => !held(e.jobId));
    const scheduled = mine(this.#timers.values()).filter((t) => t.status === 'scheduled');
    const due = scheduled.filter((t) => t.dueAt <= now && !this.#suspended(t.jobId));
    const effects = mine(this.#effects.values());

    const activities = new Map<string, StoreStats['activities'][number]>();
    const activity = (src: string) => {
      let a = activities.get(src);
      if (!a) {
        a = { src, effects: 0, effectsFailed: 0, attempts: 0, succeeded: 0, failed: 0, interrupted: 0, stale: 0, running: 0, waiting: 0 };
        activities.set(src, a);
      }
      return a;
    };
    for (const e of effects) {
      const a = activity(e.src);
      a.effects += 1;
      if (e.status === 'failed') a.effectsFailed += 1;
      for (const attempt of this.#attempts.get(e.id) ?? []) {
        a.attempts += 1;
        a[attempt.outcome] += 1;
      }
    }

    return {
      jobs: [...groups.values()].sort(byKey).map((g) => g.row),
      // The conditions of the `listJobs` filters, whatever the job's status (as in SQLite).
      quarantined: jobs.filter((j) => j.quarantine !== null).length,
      suspended: jobs.filter((j) => j.suspendedAt !== null).length,
      cancelRequested: jobs.filter((j) => j.cancelRequestedAt !== null).length,
      exhausted: jobs.filter((j) => this.#isExhausted(j.id)).length,
      idle: jobs.filter((j) => this.#isIdle(j)).length,
      backlog: {
        events: pending.length,
        jobs: new Set(pending.map((e) => e.jobId)).size,
        held: pending.length - free.length,
        oldestAcceptedAt: minOf(pending.map((e) => e.acceptedAt)), // held ones too
      },
      timers: {
        scheduled: scheduled.length,
        due: due.length,
        held: scheduled.filter((t) => t.dueAt <= now && this.#suspended(t.jobId)).length,
        oldestDueAt: minOf(due.map((t) => t.dueAt)),
      },
      activities: [...activities.values()].sort((a, b) => compareText(a.src, b.src)),
      running: effects
        .filter((e) => e.active && e.status === 'running')
        .sort((a, b) => compareText(a.id, b.id))
        .map((e) => ({ effectId: e.id, jobId: e.jobId, src: e.src, attempt: e.attempt, runner: e.claimedBy, claimExpiresAt: e.claimExpiresAt })),
      leases: leaseStats(jobs, now),
    };
  }

  // Schedules (schedules.ts)

  async putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
    this.#open();
    return this.#schedules.put(schedule, expectedRevision);
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    this.#open();
    return this.#schedules.get(id);
  }

  async listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]> {
    this.#open();
    return this.#schedules.list(filter);
  }

  async deleteSchedule(id: string, owner: string | null): Promise<boolean> {
    this.#open();
    return this.#schedules.delete(id, owner);
  }

  async dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]> {
    this.#open();
    return this.#schedules.due(owner, now, limit);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    this.#open();
    return this.#schedules.fire(fire);
  }

  async listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]> {
    this.#open();
    return this.#schedules.occurrences(scheduleId, limit);
  }

  /** A scan of the inbox (fast tests only; the runtime asks at most every 100 ms of its clock). */
  async pendingBacklog(): Promise<number> {
    this.#open();
    let n = 0;
    for (const e of this.#inbox.values()) if (e.status === 'pending') n += 1;
    return n;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /** The SQLite store's `applyCommit`, step for step and in the same order. Runs inside its own savepoint. */
  #applyCommit(c: TransitionCommit): CommitResult {
    // The attempt whose outcome this is, recorded first; its event is accepted below, applied.
    if (c.finish && this.#finish(c.finish, false) !== 'current') throw new Abort({ ok: false, reason: 'outcome-not-current' });
    const job = this.#jobs.get(c.jobId);
    // A commit that settles an event is refused (a conflict) while the job is suspended.
    if (!job || job.revision !== c.expectedRevision || (c.event !== undefined && job.suspendedAt !== null)) {
      throw new Abort({ ok: false, reason: 'conflict', currentRevision: job?.revision ?? null });
    }
    let fence: number | null = null;
    if (c.lease) {
      const claimed = this.#claimLease(c.jobId, c.lease);
      if (claimed === undefined) throw new Abort({ ok: false, reason: 'leased', owner: job.lease!.owner, until: job.lease!.until });
      fence = claimed;
    }
    const revision = c.expectedRevision + 1;
    const at = c.job.at;
    this.#assign(job, {
      revision,
      status: c.job.status,
      value: json(c.job.value),
      statePaths: pathsText(c.job.statePaths),
      context: json(c.job.context),
      snapshot: c.job.snapshot,
      machineVersion: c.job.machineVersion,
      updatedAt: at,
      ...(c.job.progress === undefined ? {} : { progress: c.job.progress ?? null }),
    });
    // An event applied as it is accepted is recorded under its own id in the history row.
    const inline = c.event?.accept !== undefined && isExternal(c.event.accept);
    this.#insertTransition(c.jobId, revision, inline ? inlineDraft(c.transition, c.event as Parameters<typeof inlineDraft>[1]) : c.transition, c.lease?.runner ?? null, fence);
    const e = c.event;
    if (e) {
      if (e.accept) {
        // An external event applied as it is accepted is recorded by its history row (seq null, no inbox row).
        const inserted = this.#insertEvent(e.accept, { status: e.status, error: e.error ? json(e.error) : null, revision, processedAt: at, payload: e.payload }, inline);
        if (!inserted) throw new Abort({ ok: false, reason: 'duplicate-event' });
        // Accept-and-apply only when nothing is queued for the job: events apply in accept order.
        for (const queued of this.#inbox.values()) {
          if (queued.jobId === c.jobId && queued.status === 'pending') throw new Abort({ ok: false, reason: 'conflict', currentRevision: c.expectedRevision });
        }
      } else {
        const pending = this.#inbox.get(e.seq);
        if (!pending || pending.jobId !== c.jobId || pending.status !== 'pending') throw new Abort({ ok: false, reason: 'event-settled' });
        this.#assign(pending, { status: e.status, error: e.error ? json(e.error) : null, revision, processedAt: at, payload: json(e.payload) });
      }
    }
    if (c.stopAll) {
      for (const effect of this.#effects.values()) {
        if (effect.jobId === c.jobId && effect.active) this.#assign(effect, { active: false, token: null, updatedAt: at, status: deactivatedStatus(effect.status) });
      }
      for (const t of this.#timers.values()) {
        if (t.jobId === c.jobId && (t.status === 'scheduled' || t.status === 'fired')) this.#assign(t, { status: 'cancelled' });
      }
    }
    for (const actorId of c.effects?.deactivate ?? []) {
      for (const effect of this.#effects.values()) {
        if (effect.jobId !== c.jobId || effect.actorId !== actorId || !effect.active) continue;
        this.#assign(effect, { active: false, token: null, updatedAt: at, status: deactivatedStatus(effect.status) });
      }
    }
    // The consumed timer is delivered before this transition's cancellations, so a timer whose own
    // key the transition cancels (every `after` transition leaving its state) is still `delivered`.
    if (c.consumedTimer !== undefined) {
      const t = this.#timers.get(c.consumedTimer);
      if (t && t.status === 'fired') this.#assign(t, { status: 'delivered' });
    }
    for (const key of c.timers?.cancel ?? []) {
      for (const t of this.#timers.values()) {
        if (t.jobId === c.jobId && t.key === key && (t.status === 'scheduled' || t.status === 'fired')) this.#assign(t, { status: 'cancelled' });
      }
    }
    this.#writeRequests(c.effects?.create, c.timers?.schedule);
    // A job that ends cancels its delayed events still to come (see SqliteStore).
    if (c.job.status !== 'active') {
      for (const t of this.#timers.values()) if (t.jobId === c.jobId && t.status === 'scheduled') this.#assign(t, { status: 'cancelled' });
    }
    for (const child of c.children ?? []) this.#insertJob(child);
    for (const d of c.deliveries ?? []) this.#acceptPending(d);
    if (c.settleParent) {
      const parentEffect = this.#effects.get(c.settleParent.effectId);
      if (parentEffect && parentEffect.kind === 'child' && parentEffect.status === 'waiting' && parentEffect.active) {
        this.#assign(parentEffect, { status: 'succeeded', output: json(c.settleParent.output), updatedAt: at });
        this.#acceptPending(c.settleParent.event);
      }
    }
    return { ok: true, revision, fence };
  }

  /** A new job at revision 1 with its first history record and what its initial state asked for. */
  #insertJob(job: NewJob): StoredJob {
    if (this.#jobs.has(job.id)) throw new ConstraintError('UNIQUE constraint failed: jobs.id');
    const stored: StoredJob = {
      id: job.id,
      machineId: job.machineId,
      machineVersion: job.machineVersion,
      revision: 1,
      status: job.status,
      value: json(job.value),
      statePaths: pathsText(job.statePaths),
      context: json(job.context),
      snapshot: job.snapshot,
      input: json(job.input),
      inputHash: job.inputHash,
      idempotencyKey: job.idempotencyKey,
      owner: job.owner === '' ? null : job.owner,
      quarantine: null,
      progress: job.progress ?? null,
      parent: job.parent ? { ...job.parent } : null,
      cancelRequestedAt: null,
      cancelReason: null,
      suspendedAt: null,
      suspendReason: null,
      lease: null,
      leaseFence: 0,
      createdAt: job.at,
      updatedAt: job.at,
    };
    this.#mapSet(this.#jobs, job.id, stored);
    this.#mapSet(this.#history, job.id, []);
    this.#insertTransition(job.id, 1, job.transition, job.runner ?? null, 0);
    this.#writeRequests(job.effects, job.timers, job.deliveries);
    return stored;
  }

  /** Effects, timers and self-sends a transition asked for, in the SQLite store's order. */
  #writeRequests(effects: NewEffect[] = [], timers: NewTimer[] = [], deliveries: NewInboxEvent[] = []): void {
    for (const e of effects) this.#insertEffect(e);
    for (const t of timers) this.#insertTimer(t);
    for (const d of deliveries) this.#acceptPending(d);
  }

  // Row writes (journaled), with the constraints of the SQLite schema.

  /** INSERT … ON CONFLICT (job_id, event_id) DO NOTHING: false when the event was already there. */
  #insertEvent(
    event: NewInboxEvent,
    fields: { status: EventStatus; error: ErrorInfo | null; revision: number | null; processedAt: number | null; payload?: JsonValue },
    inline = false,
  ): boolean {
    const key = eventKey(event.jobId, event.eventId);
    const exists = this.#eventIndex.has(key);
    if (!exists) this.#requireJob(event.jobId);
    if (inline) {
      if (exists) return false;
      this.#indexEvent(key, { ...this.#eventRecord(event, fields), seq: null, acceptedAt: fields.processedAt ?? event.at });
      return true;
    }
    // SQLite's AUTOINCREMENT hands out the seq before the conflict check, so an ignored duplicate
    // uses one up too (only a rollback gives it back).
    const previousSeq = this.#seq;
    this.#seq += 1;
    this.#record(() => {
      this.#seq = previousSeq;
    });
    if (exists) return false;
    const record: QueuedEvent = { ...this.#eventRecord(event, fields), seq: this.#seq };
    this.#mapSet(this.#inbox, record.seq, record);
    this.#indexEvent(key, record);
    return true;
  }

  #eventRecord(
    event: NewInboxEvent,
    fields: { status: EventStatus; error: ErrorInfo | null; revision: number | null; processedAt: number | null; payload?: JsonValue },
  ): Omit<InboxRecord, 'seq'> {
    return {
      jobId: event.jobId,
      eventId: event.eventId,
      type: event.type,
      payload: json(fields.payload === undefined ? event.payload : fields.payload),
      payloadHash: event.payloadHash,
      status: fields.status,
      error: fields.error,
      revision: fields.revision,
      acceptedAt: event.at,
      processedAt: fields.processedAt,
      source: event.source ?? 'external',
      sourceId: event.sourceId ?? null,
      attempt: event.attempt ?? null,
    };
  }

  #indexEvent(key: string, record: InboxRecord): void {
    this.#mapSet(this.#eventIndex, key, record);
    const list = this.#jobEvents.get(record.jobId);
    if (list) this.#push(list, record);
    else this.#mapSet(this.#jobEvents, record.jobId, [record]);
  }

  #acceptPending(event: NewInboxEvent): boolean {
    return this.#insertEvent(event, { status: 'pending', error: null, revision: null, processedAt: null });
  }

  #insertTransition(jobId: string, revision: number, t: TransitionDraft, runner: string | null, fence: number | null): void {
    const history = this.#history.get(jobId);
    if (!history) throw new ConstraintError('FOREIGN KEY constraint failed');
    const record: TransitionRecord = {
      jobId,
      revision,
      eventId: t.eventId,
      eventType: t.eventType,
      payload: json(t.payload),
      from: t.from === null ? null : json(t.from),
      to: json(t.to),
      outcome: t.outcome,
      error: t.error ? json(t.error) : null,
      at: t.at,
      runner,
      fence,
    };
    this.#push(history, record);
    this.#historySeq += 1;
    this.#record(() => void (this.#historySeq -= 1));
    this.#push(this.#feed, { seq: this.#historySeq, record });
  }

  /** True when another runner holds the job's lease and it has not expired by `now`. */
  #heldByOther(jobId: string, runner: string, now: number): boolean {
    const lease = this.#jobs.get(jobId)?.lease;
    return lease !== null && lease !== undefined && lease.owner !== runner && lease.until > now;
  }

  /** The SQLite store's LEASE_OK / LEASE_SET: the fence after the write, or undefined when another runner holds the lease. */
  #claimLease(jobId: string, claim: Omit<LeaseClaim, 'fence'> & { fence: number | null | undefined }): number | undefined {
    const job = this.#jobs.get(jobId);
    if (!job) return undefined;
    const held = job.lease;
    // A claim that names no fence (tools and tests) renews the runner's own lease whatever its fence.
    const mine = held !== null && held.owner === claim.runner && (claim.fence === undefined || job.leaseFence === claim.fence);
    const allowed = claim.force || held === null || held.until <= claim.now || (claim.takeOver != null && held.owner === claim.takeOver) || mine;
    if (!allowed) return undefined;
    const renew = !claim.force && mine && held.until > claim.now;
    const fence = renew ? job.leaseFence : job.leaseFence + 1;
    this.#assign(job, { leaseFence: fence, lease: claim.until === null ? null : { owner: claim.runner, fence, until: claim.until } });
    return fence;
  }

  async renewLeases(runner: string, jobIds: readonly string[], until: number): Promise<Map<string, number>> {
    this.#open();
    return this.#tx(() => {
      const renewed = new Map<string, number>();
      for (const id of jobIds) {
        const job = this.#jobs.get(id);
        if (!job?.lease || job.lease.owner !== runner) continue;
        this.#assign(job, { lease: { ...job.lease, until } });
        renewed.set(id, job.leaseFence);
      }
      return renewed;
    });
  }

  async releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number> {
    this.#open();
    return this.#tx(() => {
      let n = 0;
      for (const job of jobIds === 'all' ? [...this.#jobs.values()] : jobIds.map((id) => this.#jobs.get(id))) {
        if (!job?.lease || job.lease.owner !== runner) continue;
        this.#assign(job, { lease: null });
        n += 1;
      }
      return n;
    });
  }

  async leaseHolders(now: number): Promise<string[]> {
    this.#open();
    const owners = new Set<string>();
    for (const job of this.#jobs.values()) if (job.lease && job.lease.until > now) owners.add(job.lease.owner);
    return [...owners].sort(compareText);
  }

  async expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]> {
    this.#open();
    return this.#tx(() => {
      const freed: { jobId: string; owner: string; fence: number }[] = [];
      for (const job of this.#jobs.values()) {
        const lease = job.lease;
        if (!lease || ('owner' in filter ? lease.owner !== filter.owner : lease.until > filter.expiredBy)) continue;
        this.#assign(job, { lease: null });
        freed.push({ jobId: job.id, owner: lease.owner, fence: job.leaseFence });
      }
      return freed;
    });
  }

  #insertEffect(n: NewEffect): void {
    if (this.#effects.has(n.id)) throw new ConstraintError('UNIQUE constraint failed: effects.id');
    this.#requireJob(n.jobId);
    this.#mapSet(this.#effects, n.id, {
      id: n.id,
      jobId: n.jobId,
      actorId: n.actorId,
      src: n.src,
      kind: n.kind === 'child' ? 'child' : 'activity',
      input: json(n.input),
      status: n.kind === 'child' ? 'waiting' : 'pending',
      active: true,
      attempt: n.kind === 'child' ? 1 : 0,
      maxAttempts: n.maxAttempts,
      unsafe: n.unsafe,
      nextRunAt: null,
      claimedBy: null,
      claimExpiresAt: null,
      token: null,
      output: null,
      error: null,
      createdRevision: n.createdRevision,
      createdAt: n.at,
      updatedAt: n.at,
    });
  }

  #insertTimer(t: NewTimer): void {
    if (this.#timers.has(t.id)) throw new ConstraintError('UNIQUE constraint failed: timers.id');
    this.#requireJob(t.jobId);
    this.#mapSet(this.#timers, t.id, {
      id: t.id,
      jobId: t.jobId,
      key: t.key,
      kind: t.kind,
      event: json(t.event),
      dueAt: t.dueAt,
      status: 'scheduled',
      createdRevision: t.createdRevision,
      createdAt: t.createdAt,
    });
  }

  #insertAttempt(a: AttemptRecord): void {
    const list = this.#attempts.get(a.effectId);
    if (list?.some((x) => x.attempt === a.attempt)) throw new ConstraintError('UNIQUE constraint failed: effect_attempts.effect_id, effect_attempts.attempt');
    if (list) this.#push(list, a);
    else this.#mapSet(this.#attempts, a.effectId, [a]);
  }

  /** `UPDATE effect_attempts SET outcome = 'interrupted' … AND outcome = 'running'`. */
  #interruptAttempt(effectId: string, attempt: number, at: number): void {
    const a = this.#attempts.get(effectId)?.find((x) => x.attempt === attempt);
    if (a && a.outcome === 'running') this.#assign(a, { outcome: 'interrupted', endedAt: at });
  }

  /** `UPDATE effect_attempts SET outcome, ended_at, error WHERE effect_id AND attempt AND outcome IN ('running', 'waiting', 'interrupted')`. */
  #endAttempt(effectId: string, attempt: number, outcome: AttemptRecord['outcome'], at: number, error: ErrorInfo | null): void {
    const a = this.#attempts.get(effectId)?.find((x) => x.attempt === attempt);
    if (a && (a.outcome === 'running' || a.outcome === 'waiting' || a.outcome === 'interrupted')) this.#assign(a, { outcome, endedAt: at, error: error === null ? null : json(error) });
  }

  /** The UNIQUE token column. */
  #checkToken(token: string, owner: EffectRecord): void {
    const holder = this.#byToken(token);
    if (holder && holder !== owner) throw new ConstraintError('UNIQUE constraint failed: effects.token');
  }

  #byToken(token: string): EffectRecord | undefined {
    for (const e of this.#effects.values()) if (e.token === token) return e;
    return undefined;
  }

  #requireJob(jobId: string): void {
    if (!this.#jobs.has(jobId)) throw new ConstraintError('FOREIGN KEY constraint failed');
  }

  /** INSERT INTO notes (requires the job: a foreign key). */
  #insertNote(note: NoteRecord): void {
    this.#requireJob(note.jobId);
    const notes = this.#notes.get(note.jobId);
    const record: NoteRecord = { jobId: note.jobId, kind: note.kind, message: note.message, at: note.at };
    if (notes) this.#push(notes, record);
    else this.#mapSet(this.#notes, note.jobId, [record]);
  }

  #suspended(jobId: string): boolean {
    const job = this.#jobs.get(jobId);
    return job !== undefined && job.suspendedAt !== null;
  }

  /** Suspended or quarantined: its activities wait, unclaimed (`NOT_HELD` in SQLite). */
  #held(jobId: string): boolean {
    const job = this.#jobs.get(jobId);
    return job !== undefined && (job.suspendedAt !== null || job.quarantine !== null);
  }

  /** Nothing recorded will move this job (`listJobs({ stuck })`): see the store port. */
  #isIdle(j: StoredJob): boolean {
    if (j.status !== 'active' || j.quarantine !== null || j.suspendedAt !== null || j.lease !== null) return false;
    if ((this.#jobEvents.get(j.id) ?? []).some((e) => e.status === 'pending')) return false;
    for (const t of this.#timers.values()) if (t.jobId === j.id && (t.status === 'scheduled' || t.status === 'fired')) return false;
    for (const e of this.#effects.values()) {
      if (e.jobId === j.id && e.active && (e.status === 'pending' || e.status === 'running' || e.status === 'waiting' || e.status === 'backoff')) return false;
    }
    return true;
  }

  /** A failed effect that used all its attempts, or failed as exhausted or indeterminate (`listJobs({ exhausted })`). */
  #isExhausted(jobId: string): boolean {
    for (const e of this.#effects.values()) {
      if (e.jobId !== jobId || e.status !== 'failed') continue;
      if (e.attempt >= e.maxAttempts || (e.error?.code !== undefined && EXHAUSTED_CODES.has(e.error.code))) return true;
    }
    return false;
  }

  /** ORDER BY created_revision, id */
  #effectsOf(jobId: string): EffectRecord[] {
    return [...this.#effects.values()]
      .filter((e) => e.jobId === jobId)
      .sort((a, b) => a.createdRevision - b.createdRevision || compareText(a.id, b.id));
  }

  #byKey(owner: string | null, key: string): StoredJob | undefined {
    for (const job of this.#jobs.values()) if ((job.owner ?? '') === (owner ?? '') && job.idempotencyKey === key) return job;
    return undefined;
  }

  // The journal: every change records how to undo it, so a failed write leaves nothing behind.

  /** Run `fn` as a transaction (or, inside one, as a savepoint): if it throws, undo what it changed. */
  #tx<T>(fn: () => T): T {
    const outer = this.#journal;
    const journal = outer ?? [];
    const mark = journal.length;
    this.#journal = journal;
    try {
      return fn();
    } catch (error) {
      while (journal.length > mark) journal.pop()!();
      throw error;
    } finally {
      this.#journal = outer;
    }
  }

  #record(undo: Undo): void {
    this.#journal?.push(undo);
  }

  #assign<T extends object>(target: T, patch: Partial<T>): void {
    const previous: Partial<T> = {};
    for (const key of Object.keys(patch) as (keyof T)[]) previous[key] = target[key];
    Object.assign(target, patch);
    this.#record(() => Object.assign(target, previous));
  }

  #mapSet<K, V>(map: Map<K, V>, key: K, value: V): void {
    const had = map.has(key);
    const previous = map.get(key);
    map.set(key, value);
    this.#record(() => (had ? map.set(key, previous as V) : map.delete(key)));
  }

  #mapDelete<K, V>(map: Map<K, V>, key: K): void {
    if (!map.has(key)) return;
    const previous = map.get(key) as V;
    map.delete(key);
    this.#record(() => map.set(key, previous));
  }

  #push<T>(list: T[], value: T): void {
    list.push(value);
    this.#record(() => list.pop());
  }

  #open(): void {
    if (this.#closed) throw new ClosedError('This memory store is closed.');
  }
}

/** Error codes of an effect that failed for good (see `listJobs({ exhausted })`). */
const EXHAUSTED_CODES: ReadonlySet<string> = new Set(['SPOOL_RETRIES_EXHAUSTED', 'SPOOL_INDETERMINATE']);

/** `deactivateEffects`: an unfinished effect is cancelled; a finished one keeps its status. */
function deactivatedStatus(status: EffectStatus): EffectStatus {
  return status === 'pending' || status === 'running' || status === 'waiting' || status === 'backoff' ? 'cancelled' : status;
}

function eventKey(jobId: string, id: string): string {
  return `${jobId}\u0000${id}`;
}

function pathsText(paths: string[]): string {
  return `|${paths.join('|')}|`;
}

/** A value as it comes back from a JSON column. */
function json<T>(value: T): T {
  return value === null || value === undefined ? (null as T) : (JSON.parse(JSON.stringify(value)) as T);
}

function copy<T>(value: T): T {
  return structuredClone(value);
}

function toJobRecord(job: StoredJob): JobRecord {
  const { statePaths: _paths, leaseFence: _fence, ...record } = job;
  return structuredClone(record);
}

/** `stats().leases`: held leases (not expired by `now`) by runner. */
function leaseStats(jobs: readonly StoredJob[], now: number): StoreStats['leases'] {
  const byRunner = new Map<string, { runner: string; jobs: number; earliestUntil: number }>();
  for (const job of jobs) {
    if (!job.lease || job.lease.until <= now) continue;
    const row = byRunner.get(job.lease.owner);
    if (row) {
      row.jobs += 1;
      row.earliestUntil = Math.min(row.earliestUntil, job.lease.until);
    } else byRunner.set(job.lease.owner, { runner: job.lease.owner, jobs: 1, earliestUntil: job.lease.until });
  }
  return [...byRunner.values()].sort((a, b) => compareText(a.runner, b.runner));
}

/** SQL `min()`: null over no rows. */
function minOf(values: number[]): number | null {
  return values.length === 0 ? null : Math.min(...values);
}

/** SQL `LIMIT n`: a negative limit means no limit. */
function limited<T>(rows: T[], limit: number): T[] {
  return limit < 0 ? rows : rows.slice(0, limit);
}

function byDueThenId(a: TimerRecord, b: TimerRecord): number {
  return a.dueAt - b.dueAt || compareText(a.id, b.id);
}

/** SQLite's BINARY collation: UTF-8 byte order, i.e. code point order (not UTF-16 code unit order). */
function compareText(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i += 1) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** Surrogates (D800-DFFF) stand for code points above FFFF: rank them after E000-FFFF. */
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}
