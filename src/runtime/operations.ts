/**
 * Operations on dead, stuck and unwanted work, written against the store port: what
 * `list --stuck`, `retry`, `suspend`/`resume`, `purge --older-than` and `stats` do. The runtime's
 * public methods (`Runtime.retry`, `Runtime.suspend`, ...) call these, then do what only the
 * engine can (apply pending events, start activities, forget cached snapshots).
 */
import type { AnyMachineSnapshot } from 'xstate';
import type { Clock } from '../ports/clock.ts';
import type { EffectRecord, JobFilter, JobRecord, JobStatus, JobStore, JsonValue, StoreStats } from '../ports/store.ts';
import { JobTerminalError, RetryRefusedError, ValidationError } from '../base/errors.ts';
import { formatStateValue, hashJson, REDACTED } from '../base/json.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { maxAttemptsOf } from '../step/attempts.ts';
import { damageOf, wayOut } from './quarantine.ts';

/** What the operations need from the runtime. */
export interface OperationsHost {
  readonly store: JobStore;
  readonly clock: Clock;
  readonly owner: string | null;
  /** The job if this runtime's owner may see it; otherwise `JobNotFoundError`, exactly as for a missing job. */
  visible(jobId: string): Promise<JobRecord>;
  /** The definition a job runs on and its hydrated snapshot, when it can transition as stored. */
  ready(record: JobRecord): { def: RegisteredMachine; snapshot: AnyMachineSnapshot } | undefined;
  /** The registered definition of the job's own machine version, if any. */
  definition(record: JobRecord): RegisteredMachine | undefined;
  log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>): void;
}

/**
 * What {@link Runtime.stats} returns: every figure is an aggregate over the stored records. Each
 * job count with a list filter (`quarantined`, `suspended`, `cancelRequested`, `exhausted`,
 * `stuck`) is the length of `list({ <filter>: true })` over the same owner scope, whatever the
 * jobs' status (finished jobs included): a figure and its list never disagree.
 */
export interface RuntimeStats {
  /** The clock time the figures were computed at. */
  at: number;
  /** The owner they are scoped to (null: unscoped jobs). */
  owner: string | null;
  /** Jobs by machine, version, status and state value. */
  jobs: StoreStats['jobs'];
  /** Jobs held back by quarantine: `list({ quarantined: true }).length`. */
  quarantined: number;
  /** Suspended jobs: `list({ suspended: true }).length`. */
  suspended: number;
  /**
   * Jobs with a cancel request, applied or not, still active or finished (cancelled or ended
   * otherwise): `list({ cancelRequested: true }).length`. Those still waiting for it:
   * `list({ cancelRequested: true, status: 'active' })`.
   */
  cancelRequested: number;
  /**
   * Jobs with an activity that failed for good (used its attempts, or could not safely be re-run),
   * active or finished, handled by the machine or not: `list({ exhausted: true }).length`.
   */
  exhausted: number;
  /** Jobs nothing will move: `list({ stuck: true }).length`. */
  stuck: number;
  /** Jobs with nothing scheduled whose current state accepts an external event: they wait for input, visibly (no list filter). */
  waitingForInput: number;
  /**
   * Pending (accepted, not yet applied) inbox events: `events`, of `jobs` jobs; `held` of them
   * belong to suspended or quarantined jobs. `oldestAcceptedAt` is the accept time of the oldest
   * pending event, held ones included (an event waiting on a suspension is still waiting), and
   * `oldestAgeMs` = now - that time; both null only when nothing is pending.
   */
  backlog: StoreStats['backlog'] & { oldestAgeMs: number | null };
  /** Scheduled timers; `lagMs` = now - the deadline of the oldest due one not yet fired (0 when a worker keeps up). */
  timers: StoreStats['timers'] & { lagMs: number | null };
  /** Per activity src: effects, effects failed for good, attempts by outcome. */
  activities: StoreStats['activities'];
  /** Claims held on running activities: runner ids and whether the claim has expired. */
  running: (StoreStats['running'][number] & { expired: boolean })[];
  /** Job leases held (not expired), by runner: how many jobs and the earliest expiry. */
  leases: StoreStats['leases'];
}

const PAGE = 500;
const FINAL_STATUSES: readonly JobStatus[] = ['done', 'error', 'stopped'];
const LIVE_EFFECT: ReadonlySet<EffectRecord['status']> = new Set(['pending', 'running', 'waiting', 'backoff']);

/**
 * The external event types a machine declares that its current state (or an ancestor) has a
 * transition for, guarded or not: what the job is visibly waiting for. `xstate.*` and `spool.*`
 * events (timers, activity outcomes) are not external.
 */
export function acceptedEvents(def: RegisteredMachine, snapshot: AnyMachineSnapshot): string[] {
  const descriptors = new Set<string>();
  for (const node of snapshot._nodes) for (const d of node.ownEvents) descriptors.add(String(d));
  const accepts = (type: string) =>
    descriptors.has(type) ||
    descriptors.has('*') ||
    [...descriptors].some((d) => d.endsWith('.*') && type.startsWith(d.slice(0, -1)));
  return [...def.eventTypes].filter((t) => !t.startsWith('xstate.') && !t.startsWith('spool.') && accepts(t)).sort();
}

/** The event types a job's current state accepts (empty for a finished or unrunnable job). */
export function waitingFor(host: OperationsHost, record: JobRecord): string[] {
  if (record.status !== 'active') return [];
  const ready = host.ready(record);
  return ready ? acceptedEvents(ready.def, ready.snapshot) : [];
}

/**
 * Of the jobs nothing recorded will move (`JobFilter.stuck`), the ones whose state also accepts
 * no external event but the cancel event: nothing will ever move them. A job that only a cancel
 * can move is stuck (cancelling is an operator's way out, not input the job waits for). A job that
 * cannot be hydrated on its own, registered version counts as stuck too; one whose version is
 * not registered here (it waits for a migration, or for a worker that has its version) does not.
 */
function isStuckRecord(host: OperationsHost, record: JobRecord): boolean {
  const ready = host.ready(record);
  // Not runnable as stored. Its own version not registered here (a migration may wait, or a
  // worker that has it): what moves it is unknown here, and `show` says so; not stuck.
  if (!ready) return host.definition(record) !== undefined;
  return !acceptedEvents(ready.def, ready.snapshot).some((t) => t !== ready.def.cancel.event);
}

/** `list({ stuck: true })`: page through the store's idle jobs and keep the stuck ones. */
export async function listStuck(host: OperationsHost, filter: Omit<JobFilter, 'stuck' | 'owner'>): Promise<{ stuck: JobRecord[]; idle: number }> {
  const limit = filter.limit ?? -1;
  const stuck: JobRecord[] = [];
  let idle = 0;
  let afterId = filter.afterId;
  for (;;) {
    const page = await host.store.listJobs({ ...filter, stuck: true, owner: host.owner, limit: PAGE, ...(afterId !== undefined ? { afterId } : {}) });
    for (const record of page) {
      idle += 1;
      if (isStuckRecord(host, record)) {
        stuck.push(record);
        if (limit >= 0 && stuck.length >= limit) return { stuck, idle };
      }
    }
    if (page.length < PAGE) return { stuck, idle };
    afterId = page.at(-1)!.id;
  }
}

/** Suspend a job (see `Runtime.suspend`). Returns false when it already was. */
export async function suspendJob(host: OperationsHost, jobId: string, reason: string): Promise<boolean> {
  if (typeof reason !== 'string' || reason.length === 0 || reason.length > 2000) {
    throw new ValidationError('A suspend reason must be a non-empty string of at most 2000 characters.');
  }
  const record = await host.visible(jobId);
  if (record.status !== 'active') {
    throw new JobTerminalError(`Job ${jobId} has ended (status "${record.status}", state ${formatStateValue(record.value)}): there is nothing to suspend.`, {
      jobId,
      status: record.status,
    });
  }
  const at = host.clock.now();
  const suspended = await host.store.suspendJob(jobId, reason, at, {
    jobId,
    kind: 'suspended',
    message: `suspended: ${reason}. Events sent now stay pending; timers and activity attempts wait for resume.`,
    at,
  });
  if (suspended) host.log('info', 'job suspended', { jobId, reason });
  return suspended;
}

/** Resume a suspended job (see `Runtime.resume`). Returns false when it was not suspended. */
export async function resumeJob(host: OperationsHost, jobId: string): Promise<boolean> {
  const record = await host.visible(jobId);
  if (record.suspendedAt === null) return false;
  const at = host.clock.now();
  const pending = (await host.store.pendingEvents(jobId, 10_000)).length;
  const due = (await host.store.listTimers(jobId)).filter((t) => t.status === 'scheduled' && t.dueAt <= at).length;
  const resumed = await host.store.resumeJob(jobId, {
    jobId,
    kind: 'resumed',
    message: `resumed after ${formatDuration(at - record.suspendedAt)} suspended: ${pending} pending event(s) to apply, ${due} timer(s) due now`,
    at,
  });
  if (resumed) host.log('info', 'job resumed', { jobId, pendingEvents: pending, dueTimers: due });
  return resumed;
}

/**
 * Redrive the failed activities of a job whose invoking state is still current: each starts a
 * fresh sequence of attempts (the policy's `maxAttempts` more), with the same idempotency key.
 * Anything else is refused with a {@link RetryRefusedError} that says what to do instead.
 */
export async function redrive(host: OperationsHost, record: JobRecord, options: { allowUnsafe?: boolean } = {}): Promise<EffectRecord[]> {
  const jobId = record.id;
  const effects = (await host.store.listEffects(jobId)).filter((e) => e.kind !== 'child');
  const lastFailed = [...effects].reverse().find((e) => e.status === 'failed');
  const failure = lastFailed ? `${lastFailed.src} (${describeError(lastFailed)}, attempt ${lastFailed.attempt} of ${lastFailed.maxAttempts})` : undefined;
  if (record.status !== 'active') {
    throw new RetryRefusedError(
      `Job ${jobId} has ended (status "${record.status}", state ${formatStateValue(record.value)})` +
        (failure ? ` after handling the failure of ${failure}` : '') +
        `: a finished job never runs again. Start a new job with the same input: \`spool retry --as-new ${jobId}\` (runtime.retryAsNew).`,
      { jobId, reason: 'final', status: record.status },
    );
  }
  const candidates = effects.filter((e) => e.active && e.status === 'failed');
  if (candidates.length === 0) {
    if (lastFailed && !lastFailed.active) {
      throw new RetryRefusedError(
        `Job ${jobId} already handled the failure of ${failure}: its machine left the invoking state and is now in ${formatStateValue(record.value)} ` +
          '(see `spool show`). Redriving the activity would contradict its history; send the machine one of its own events to go on, or cancel it.',
        { jobId, reason: 'handled', effectId: lastFailed.id },
      );
    }
    const live = effects.filter((e) => e.active && LIVE_EFFECT.has(e.status));
    throw new RetryRefusedError(
      live.length > 0
        ? `Job ${jobId} has no failed activity: ${live.map((e) => `${e.src} is ${e.status}`).join(', ')}. A worker runs it; nothing to redrive.`
        : `Job ${jobId} has no failed activity to retry (state ${formatStateValue(record.value)}). If nothing moves it (\`spool list --stuck\`): an event of it that failed is applied again with \`spool redeliver ${jobId} <event id>\` once fixed; else send it an event or cancel it.`,
      { jobId, reason: 'nothing-failed' },
    );
  }
  const unsafe = candidates.filter((e) => e.unsafe);
  if (unsafe.length > 0 && options.allowUnsafe !== true) {
    const e = unsafe[0]!;
    throw new RetryRefusedError(
      `Activity ${e.src} of job ${jobId} is marked unsafeToRepeat and its last attempt ended with ${describeError(e)}: running it again may do the work twice. ` +
        `Reconcile with the provider (idempotency key ${e.id}) first, then retry with --allow-unsafe (allowUnsafe: true).`,
      { jobId, reason: 'unsafe', effectId: e.id },
    );
  }
  const def = host.definition(record);
  const pending = await host.store.pendingEvents(jobId, 10_000);
  const at = host.clock.now();
  const redriven: EffectRecord[] = [];
  for (const e of candidates) {
    const budget = maxAttemptsOf(def?.activities[e.src]);
    const maxAttempts = e.attempt + budget;
    const waiting = pending.some((p) => p.source === 'effect' && p.sourceId === e.id);
    const message =
      `retry: activity ${e.src} (idempotency key ${e.id}) redriven after ${e.attempt} attempt(s), the last with ${describeError(e)}; ` +
      `attempts ${e.attempt + 1} to ${maxAttempts} may run${e.unsafe ? ' (unsafe to repeat: allowed by the operator)' : ''}` +
      (waiting ? '; its error event, not applied yet, will be recorded as stale' : '');
    if (await host.store.redriveEffect(e.id, maxAttempts, at, { jobId, kind: 'retry', message, at })) {
      host.log('info', 'activity redriven', { jobId, effectId: e.id, src: e.src, attempts: e.attempt, maxAttempts });
      redriven.push((await host.store.getEffect(e.id))!);
    }
  }
  if (redriven.length === 0) {
    throw new RetryRefusedError(`Job ${jobId} changed while its activities were being redriven; look at it again (\`spool show ${jobId}\`).`, { jobId, reason: 'changed' });
  }
  return redriven;
}

/**
 * The input to start a job again with (`retryAsNew`): only for a finished job, and only when its
 * input holds no sensitive field (Spool never replays stored sensitive values into a new job).
 */
export function inputForNewJob(record: JobRecord, def: RegisteredMachine | undefined): JsonValue {
  if (record.status === 'active') {
    throw new RetryRefusedError(
      `Job ${record.id} is still active: retry it in place (\`spool retry ${record.id}\`) or cancel it first, so two jobs never do the same work.`,
      { jobId: record.id, reason: 'still-active' },
    );
  }
  const found = sensitiveKeysIn(record.input, def?.sensitive ?? new Set());
  if (found.length > 0) {
    throw new RetryRefusedError(
      `Job ${record.id}'s input has sensitive fields (${found.join(', ')}), which Spool never replays from storage into a new job. ` +
        `Start a new job with the original input: \`spool start ${record.machineId} --input '<json>'\`.`,
      { jobId: record.id, reason: 'sensitive-input', fields: found },
    );
  }
  return record.input;
}

/** The idempotency key of the job `retryAsNew` starts for `jobId`: retrying again returns the same new job. */
export function retryKey(jobId: string): string {
  const key = `retry-of:${jobId}`;
  return key.length <= 200 ? key : `retry-of:${hashJson(jobId)}`;
}

/**
 * `Runtime.retryAsNew`: the job started again with `record`'s input by `start` (under
 * `retryKey`, so retrying again finds it), linked to the old one by a note on each. Returns the
 * new job's id, and whether this call created it.
 */
export async function retryAsNew(
  host: OperationsHost,
  record: JobRecord,
  start: (machineId: string, input: JsonValue, idempotencyKey: string) => Promise<{ id: string; machineId: string; machineVersion: string }>,
): Promise<{ jobId: string; created: boolean }> {
  const input = inputForNewJob(record, host.definition(record));
  const idempotencyKey = retryKey(record.id);
  const existing = await host.store.findByIdempotencyKey(host.owner, idempotencyKey);
  if (existing) return { jobId: existing.id, created: false };
  const job = await start(record.machineId, input, idempotencyKey);
  const at = host.clock.now();
  await host.store.addNote({ jobId: record.id, kind: 'retried-as-new', message: `retried as new job ${job.id} (${job.machineId}@${job.machineVersion}) with the same input`, at });
  await host.store.addNote({ jobId: job.id, kind: 'retry-of', message: `started as a retry of job ${record.id} with its input`, at });
  host.log('info', 'job retried as new', { jobId: record.id, newJobId: job.id });
  return { jobId: job.id, created: true };
}

/** `Runtime.details`' records of one job beside it: history, inbox, effects, attempts, timers, notes, assets, what it waits for, and whether it is stuck. */
export async function jobRecords(host: OperationsHost, record: JobRecord) {
  const jobId = record.id;
  const [history, events, effects, attempts, timers, notes, assets] = await Promise.all([
    host.store.history(jobId),
    host.store.listEvents(jobId),
    host.store.listEffects(jobId),
    host.store.listAttempts(jobId),
    host.store.listTimers(jobId),
    host.store.listNotes(jobId),
    host.store.listAssets(jobId),
  ]);
  // A job whose rows are damaged is held back (whether or not quarantined yet): it accepts nothing, and is not stuck but held.
  const damage = damageOf(record);
  if (damage !== null) return { history, events, effects, attempts, timers, notes, assets, waitingFor: [], stuck: false, held: { damaged: damage, wayOut: wayOut(damage, jobId) } };
  const stuck = isStuckJob(host, record, { events, effects, timers });
  return { history, events, effects, attempts, timers, notes, assets, waitingFor: waitingFor(host, record), stuck };
}

/**
 * {@link jobRecords} of one revision of the job: the records are read one by one (on Postgres on
 * several connections), so a commit landing between them is seen by reading the job again after
 * them, and they are read again (at most twice more). Otherwise the job could show one revision
 * and its history the next, or `stuck` be judged on a job row older than its effects (an outcome
 * applied in between: no live work left, the job still waiting for it).
 */
export async function jobRecordsAtOneRevision(host: OperationsHost, record: JobRecord, reread: () => Promise<JobRecord>) {
  for (let tries = 1; ; tries += 1) {
    const records = await jobRecords(host, record);
    const again = await reread();
    if (again.revision === record.revision) return { record, records };
    // Still moving after three reads: the newest job, and no `stuck` claimed from mixed revisions.
    if (tries === 3) return { record: again, records: { ...records, stuck: false } };
    record = again;
  }
}

/** Delete finished jobs last updated before `now - olderThanMs` (see `Runtime.purgeFinished`). */
export async function purgeFinished(host: OperationsHost, options: { olderThanMs: number; status?: JobStatus }): Promise<string[]> {
  const { olderThanMs, status } = options;
  if (typeof olderThanMs !== 'number' || !Number.isFinite(olderThanMs) || olderThanMs < 0) {
    throw new ValidationError('olderThanMs must be a non-negative number of milliseconds.');
  }
  if (status !== undefined && !FINAL_STATUSES.includes(status)) {
    throw new ValidationError(`Only finished jobs are purged: status must be one of ${FINAL_STATUSES.join(', ')}.`);
  }
  const before = host.clock.now() - olderThanMs;
  const statuses = status === undefined ? FINAL_STATUSES : [status];
  const purged: string[] = [];
  for (;;) {
    const batch = await host.store.purgeFinished({ before, statuses, owner: host.owner, limit: PAGE });
    purged.push(...batch);
    if (batch.length < PAGE) break;
  }
  if (purged.length > 0) host.log('info', 'jobs purged', { count: purged.length, before, statuses });
  return purged;
}

/** Every figure of `Runtime.stats`, from the store's aggregates and the stuck jobs. */
export async function collectStats(host: OperationsHost): Promise<RuntimeStats> {
  const at = host.clock.now();
  const s = await host.store.stats({ owner: host.owner, now: at });
  const { stuck } = await listStuck(host, {});
  return {
    at,
    owner: host.owner,
    jobs: s.jobs,
    quarantined: s.quarantined,
    suspended: s.suspended,
    cancelRequested: s.cancelRequested,
    exhausted: s.exhausted,
    stuck: stuck.length,
    waitingForInput: Math.max(0, s.idle - stuck.length),
    backlog: { ...s.backlog, oldestAgeMs: s.backlog.oldestAcceptedAt === null ? null : at - s.backlog.oldestAcceptedAt },
    timers: { ...s.timers, lagMs: s.timers.oldestDueAt === null ? null : at - s.timers.oldestDueAt },
    activities: s.activities,
    running: s.running,
    leases: s.leases,
  };
}

/** `CODE: message` of an effect's last error (`status failed` without one). */
function describeError(e: EffectRecord): string {
  if (!e.error) return `status ${e.status}`;
  return `${e.error.code ?? e.error.name}: ${e.error.message}`;
}

/** Sensitive property names present anywhere in a value (or a value already redacted). */
function sensitiveKeysIn(value: JsonValue, sensitive: ReadonlySet<string>): string[] {
  const found = new Set<string>();
  const walk = (v: JsonValue, key: string | null): void => {
    if (v === REDACTED && key !== null) found.add(key);
    if (Array.isArray(v)) v.forEach((x) => walk(x, key));
    else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (sensitive.has(k)) found.add(k);
        walk(child, k);
      }
    }
  };
  walk(value, null);
  return [...found].sort();
}

function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  if (ms < 172_800_000) return `${Math.round(ms / 3_600_000)} h`;
  return `${Math.round(ms / 86_400_000)} d`;
}

/** `details().stuck`: the same rule as `list({ stuck: true })`, from records already read. */
export function isStuckJob(
  host: OperationsHost,
  record: JobRecord,
  read: { events: readonly { status: string }[]; effects: readonly EffectRecord[]; timers: readonly { status: string }[] },
): boolean {
  if (record.status !== 'active' || record.quarantine !== null || record.suspendedAt !== null) return false;
  if (read.events.some((e) => e.status === 'pending')) return false;
  if (read.timers.some((t) => t.status === 'scheduled' || t.status === 'fired')) return false;
  if (read.effects.some((e) => e.active && LIVE_EFFECT.has(e.status))) return false;
  return isStuckRecord(host, record);
}
