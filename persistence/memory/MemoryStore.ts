import type {
  AcceptResult,
  CommitResult,
  CreateJobResult,
  ErrorInfo,
  InboxRecord,
  JobFilter,
  JobRecord,
  JobStore,
  NewInboxEvent,
  NewJob,
  TransitionCommit,
  TransitionRecord,
} from '../../src/ports/store.ts';
import { ClosedError } from '../../src/runtime/errors.ts';

interface StoredJob extends JobRecord {
  statePaths: string[];
}

/**
 * A store in process memory, for fast tests. It keeps the same contract as the SQLite store
 * (the shared contract suite runs against both) but nothing survives the process.
 *
 * @example
 * const runtime = await createRuntime({ store: new MemoryStore(), machines });
 */
export class MemoryStore implements JobStore {
  readonly description = 'memory';
  readonly #jobs = new Map<string, StoredJob>();
  readonly #inbox: InboxRecord[] = [];
  readonly #history = new Map<string, TransitionRecord[]>();
  #seq = 0;
  #closed = false;

  async createJob(job: NewJob): Promise<CreateJobResult> {
    this.#open();
    const existing = this.#jobs.get(job.id) ?? (job.idempotencyKey === null ? undefined : this.#byKey(job.owner, job.idempotencyKey));
    if (existing) return { job: copy(existing), created: false };
    const stored: StoredJob = {
      id: job.id,
      machineId: job.machineId,
      machineVersion: job.machineVersion,
      revision: 1,
      status: job.status,
      value: clone(job.value),
      statePaths: [...job.statePaths],
      context: clone(job.context),
      snapshot: job.snapshot,
      input: clone(job.input),
      inputHash: job.inputHash,
      idempotencyKey: job.idempotencyKey,
      owner: job.owner,
      quarantine: null,
      createdAt: job.at,
      updatedAt: job.at,
    };
    this.#jobs.set(job.id, stored);
    this.#history.set(job.id, [{ ...clone(job.transition), jobId: job.id, revision: 1 }]);
    return { job: copy(stored), created: true };
  }

  async getJob(id: string): Promise<JobRecord | undefined> {
    this.#open();
    const job = this.#jobs.get(id);
    return job ? copy(job) : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    this.#open();
    const job = this.#byKey(owner, key);
    return job ? copy(job) : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    this.#open();
    const out = [...this.#jobs.values()]
      .filter(
        (j) =>
          (filter.machineId === undefined || j.machineId === filter.machineId) &&
          (filter.state === undefined || j.statePaths.includes(filter.state)) &&
          (filter.status === undefined || j.status === filter.status) &&
          (filter.quarantined === undefined || (j.quarantine !== null) === filter.quarantined) &&
          (filter.owner === undefined || j.owner === filter.owner) &&
          (filter.afterId === undefined || j.id > filter.afterId),
      )
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return (filter.limit === undefined ? out : out.slice(0, filter.limit)).map(copy);
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    this.#open();
    const existing = this.#findEvent(event.jobId, event.eventId);
    if (existing) return { event: clone(existing), duplicate: true };
    const record = this.#newEvent(event, 'pending', null, null, null);
    this.#inbox.push(record);
    return { event: clone(record), duplicate: false };
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    this.#open();
    const e = this.#findEvent(jobId, eventId);
    return e ? clone(e) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    this.#open();
    return this.#inbox.filter((e) => e.jobId === jobId).map(clone);
  }

  async pendingEvents(jobId: string, limit: number): Promise<InboxRecord[]> {
    this.#open();
    return this.#inbox
      .filter((e) => e.jobId === jobId && e.status === 'pending')
      .slice(0, limit)
      .map(clone);
  }

  async jobsWithPendingEvents(limit: number): Promise<string[]> {
    this.#open();
    const ids: string[] = [];
    for (const e of this.#inbox) {
      if (e.status !== 'pending' || ids.includes(e.jobId) || this.#jobs.get(e.jobId)?.quarantine !== null) continue;
      ids.push(e.jobId);
      if (ids.length >= limit) break;
    }
    return ids;
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    this.#open();
    return commits.map((c) => this.#commitOne(c));
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number): Promise<boolean> {
    this.#open();
    const e = this.#inbox.find((x) => x.seq === seq);
    if (!e || e.status !== 'pending') return false;
    Object.assign(e, { status: 'rejected', error: clone(error), processedAt: at });
    return true;
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    this.#open();
    const job = this.#jobs.get(jobId);
    if (job) Object.assign(job, { quarantine: reason, updatedAt: at });
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    this.#open();
    return (this.#history.get(jobId) ?? []).map(clone);
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /** All checks first, then all writes: a commit applies entirely or not at all. */
  #commitOne(c: TransitionCommit): CommitResult {
    const job = this.#jobs.get(c.jobId);
    if (!job || job.revision !== c.expectedRevision) return { ok: false, reason: 'conflict', currentRevision: job?.revision ?? null };
    const e = c.event;
    let pending: InboxRecord | undefined;
    if (e?.accept) {
      if (this.#findEvent(e.accept.jobId, e.accept.eventId)) return { ok: false, reason: 'duplicate-event' };
    } else if (e) {
      pending = this.#inbox.find((x) => x.seq === e.seq && x.jobId === c.jobId);
      if (!pending || pending.status !== 'pending') return { ok: false, reason: 'event-settled' };
    }
    const revision = c.expectedRevision + 1;
    Object.assign(job, {
      revision,
      status: c.job.status,
      value: clone(c.job.value),
      statePaths: [...c.job.statePaths],
      context: clone(c.job.context),
      snapshot: c.job.snapshot,
      machineVersion: c.job.machineVersion,
      updatedAt: c.job.at,
    });
    this.#history.get(c.jobId)!.push({ ...clone(c.transition), jobId: c.jobId, revision });
    if (e?.accept) {
      const record = this.#newEvent(e.accept, e.status, e.error, revision, c.job.at);
      record.payload = clone(e.payload);
      this.#inbox.push(record);
    } else if (e && pending) {
      Object.assign(pending, { status: e.status, error: clone(e.error), revision, processedAt: c.job.at, payload: clone(e.payload) });
    }
    return { ok: true, revision };
  }

  #newEvent(event: NewInboxEvent, status: InboxRecord['status'], error: ErrorInfo | null, revision: number | null, processedAt: number | null): InboxRecord {
    this.#seq += 1;
    return {
      seq: this.#seq,
      jobId: event.jobId,
      eventId: event.eventId,
      type: event.type,
      payload: clone(event.payload),
      payloadHash: event.payloadHash,
      status,
      error: clone(error),
      revision,
      acceptedAt: event.at,
      processedAt,
    };
  }

  #findEvent(jobId: string, eventId: string): InboxRecord | undefined {
    return this.#inbox.find((e) => e.jobId === jobId && e.eventId === eventId);
  }

  #byKey(owner: string | null, key: string): StoredJob | undefined {
    for (const job of this.#jobs.values()) if (job.owner === owner && job.idempotencyKey === key) return job;
    return undefined;
  }

  #open(): void {
    if (this.#closed) throw new ClosedError('This memory store is closed.');
  }
}

function clone<T>(value: T): T {
  return value === null || value === undefined ? value : structuredClone(value);
}

function copy(job: StoredJob): JobRecord {
  const { statePaths: _paths, ...record } = job;
  return clone(record);
}
