/**
 * The store port: everything the engine needs from a database, in terms of job operations.
 * It is async so a networked database can implement it, and its write path takes a batch
 * of commits so that transitions of many jobs can share one database transaction (and one
 * disk sync) while each commit is still checked, and succeeds or fails, on its own.
 *
 * No driver type crosses this file. Every `now`/`at` is a parameter: stores never read a clock.
 */

/** Any JSON value as stored. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** XState's actor status as persisted in the snapshot. `done` and `error` are terminal. */
export type JobStatus = 'active' | 'done' | 'error' | 'stopped';

/** A stored job: one XState actor, its persisted snapshot and its bookkeeping. */
export interface JobRecord {
  id: string;
  machineId: string;
  machineVersion: string;
  /** Incremented by every commit: 1 after start. Every write checks it. */
  revision: number;
  status: JobStatus;
  /** XState state value, e.g. `"processing"` or `{ "a": "b" }`. */
  value: JsonValue;
  context: JsonValue;
  /** The persisted snapshot as stored text: parse it afresh for every restore. */
  snapshot: string;
  input: JsonValue;
  inputHash: string;
  idempotencyKey: string | null;
  /** Tenant scope; `null` means unscoped. */
  owner: string | null;
  /** Why this job is held back (unknown machine version, snapshot that no longer fits…), or null. */
  quarantine: string | null;
  /** Set by a store when a stored column could not be read back: the job cannot run. */
  corruption?: string;
  createdAt: number;
  updatedAt: number;
}

/** What `createJob` writes: the job at revision 1 and its first history record. */
export interface NewJob {
  id: string;
  machineId: string;
  machineVersion: string;
  status: JobStatus;
  value: JsonValue;
  /** Every state path the value is in (`["a", "a.b"]`), for `list --state`. */
  statePaths: string[];
  context: JsonValue;
  snapshot: string;
  input: JsonValue;
  inputHash: string;
  idempotencyKey: string | null;
  owner: string | null;
  at: number;
  /** The `xstate.init` history record (revision 1). */
  transition: TransitionDraft;
}

/** The result of `createJob`: the new job, or the existing one with the same id or idempotency key. */
export interface CreateJobResult {
  job: JobRecord;
  created: boolean;
}

export type EventStatus = 'pending' | 'applied' | 'ignored' | 'failed' | 'rejected';

/** Error details as stored: never a live Error, never a sensitive field. */
export interface ErrorInfo {
  name: string;
  message: string;
  code?: string;
}

/** One accepted event in a job's durable inbox. */
export interface InboxRecord {
  /** Global accept order. */
  seq: number;
  jobId: string;
  eventId: string;
  type: string;
  payload: JsonValue;
  payloadHash: string;
  status: EventStatus;
  error: ErrorInfo | null;
  /** The job revision this event's commit produced (null while pending or when rejected). */
  revision: number | null;
  acceptedAt: number;
  processedAt: number | null;
}

export interface NewInboxEvent {
  jobId: string;
  eventId: string;
  type: string;
  payload: JsonValue;
  payloadHash: string;
  at: number;
}

export interface AcceptResult {
  event: InboxRecord;
  /** True when an event with this id was already accepted for this job. */
  duplicate: boolean;
}

export type TransitionOutcome = 'started' | 'applied' | 'ignored' | 'failed' | 'migrated';

/** One history record: the commit that produced `revision`. */
export interface TransitionRecord {
  jobId: string;
  revision: number;
  eventId: string | null;
  eventType: string;
  /** The event as recorded, with sensitive fields redacted. */
  payload: JsonValue;
  from: JsonValue | null;
  to: JsonValue;
  outcome: TransitionOutcome;
  error: ErrorInfo | null;
  at: number;
}

export type TransitionDraft = Omit<TransitionRecord, 'jobId' | 'revision'>;

/**
 * One job's commit: write the new job state `WHERE id = ? AND revision = expectedRevision`,
 * append the history record for `expectedRevision + 1`, and settle the inbox event that
 * caused it, all or nothing.
 */
export interface TransitionCommit {
  jobId: string;
  expectedRevision: number;
  job: {
    status: JobStatus;
    value: JsonValue;
    statePaths: string[];
    context: JsonValue;
    snapshot: string;
    machineVersion: string;
    at: number;
  };
  transition: TransitionDraft;
  /**
   * The inbox event this commit settles: a pending one (`seq`, which must still be pending), or
   * a new one (`accept`) recorded and settled in the same transaction (the inline fast path).
   */
  event?: ({ seq: number; accept?: never } | { accept: NewInboxEvent; seq?: never }) & {
    status: Exclude<EventStatus, 'pending' | 'rejected'>;
    error: ErrorInfo | null;
    /** Replaces the stored payload once processed (sensitive fields redacted). */
    payload: JsonValue;
  };
}

export type CommitResult =
  | { ok: true; revision: number }
  | { ok: false; reason: 'conflict'; currentRevision: number | null }
  | { ok: false; reason: 'event-settled' }
  | { ok: false; reason: 'duplicate-event' }
  | { ok: false; reason: 'error'; error: ErrorInfo };

export interface JobFilter {
  machineId?: string;
  /** Matches a state path: `processing` matches `processing` and `{ processing: 'upload' }`. */
  state?: string;
  status?: JobStatus;
  quarantined?: boolean;
  owner?: string | null;
  /** Only jobs with an id greater than this (keyset paging). */
  afterId?: string;
  limit?: number;
}

/** The store interface every backend implements and the contract suite checks. */
export interface JobStore {
  /** A short name for messages, e.g. `sqlite:/path/spool.db` or `memory`. */
  readonly description: string;
  /** Create a job, or return the existing job with the same id or the same (owner, idempotency key). */
  createJob(job: NewJob): Promise<CreateJobResult>;
  getJob(id: string): Promise<JobRecord | undefined>;
  /** The job started under this (owner, idempotency key), if any. */
  findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined>;
  /** Jobs ordered by id. */
  listJobs(filter: JobFilter): Promise<JobRecord[]>;
  /** Durably record an event, or return the one already recorded under (jobId, eventId). */
  acceptEvent(event: NewInboxEvent): Promise<AcceptResult>;
  getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined>;
  /** A job's inbox in accept order (all statuses). */
  listEvents(jobId: string): Promise<InboxRecord[]>;
  /** The oldest pending events of a job, in accept order. */
  pendingEvents(jobId: string, limit: number): Promise<InboxRecord[]>;
  /** Ids of jobs that have pending events, oldest event first. */
  jobsWithPendingEvents(limit: number): Promise<string[]>;
  /** Apply commits, each on its own revision check; all share one durable transaction. */
  commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]>;
  /** Settle a pending event without touching the job (e.g. it arrived for a job that has since ended). */
  rejectEvent(seq: number, error: ErrorInfo, at: number): Promise<boolean>;
  /** Set or clear (reason `null`) a job's quarantine; no revision change. */
  setQuarantine(jobId: string, reason: string | null, at: number): Promise<void>;
  /** A job's history in revision order. */
  history(jobId: string): Promise<TransitionRecord[]>;
  close(): Promise<void>;
}
