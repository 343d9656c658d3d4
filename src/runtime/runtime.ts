import { uuidv7 } from './ids.ts';
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { systemClock, type Clock } from '../ports/clock.ts';
import type {
  FeedPage,
  TransitionOutcome,
  NewEffect,
  NewJob,
  CommitResult,
  EffectRecord,
  ErrorInfo,
  InboxRecord,
  QueuedEvent,
  CreateJobResult,
  AttemptFinish,
  ClaimedEffect,
  EffectClaim,
  EffectStart,
  FinishStatus,
  JobFilter,
  JobRecord,
  JobStatus,
  JobStore,
  LeaseClaim,
  JsonValue,
  NewInboxEvent,
  TransitionCommit,
  TransitionRecord,
} from '../ports/store.ts';
import {
  ClosedError,
  CorruptRecordError,
  IdempotencyConflictError,
  JobNotFinishedError,
  JobNotFoundError,
  JobTerminalError,
  RevisionConflictError,
  SpoolError,
  ValidationError,
  toErrorInfo,
} from './errors.ts';
import { hydrate, parseSnapshot } from './hydrate.ts';
import { hashJson, redact, statePaths, toJson } from './json.ts';
import { redactText, sensitivePaths } from './redaction.ts';
import { MachineRegistry, namesEventType, type RegisteredMachine } from './registry.ts';
import { crashPoint } from './crashPoints.ts';
import type { ActionPlan } from '../step/actions.ts';
import type { Relations } from '../step/children.ts';
import { afterFailedAttempt, interruptedError, outcomeEvent } from '../step/attempts.ts';
import { migrateStep, needsChildren, startStep, step, stopStep, type Started, type Step, type StepInput } from '../step/step.ts';
import { deferred, isDeferred, newRunnerId, retireRunner, runnerIsGone, type ActivityArgs, type AssetInput } from './activities.ts';
import { classify } from './retry.ts';
import * as ops from './operations.ts';
import type { RuntimeStats } from './operations.ts';
import * as sched from './schedules.ts';
import { ActivitySlots, BacklogGauge, DEFAULT_MAX_BACKLOG, widerScan } from './limits.ts';
import { checkRuntimeOptions } from './options.ts';
import type { Job, JobDetails, ListFilter, LogEntry, RuntimeEvent, RuntimeOptions, SendOptions, SendResult, StartOptions, StorageFaultEvent } from './api.ts';
import { RuntimeEvents } from './events.ts';
import { JobQuarantined, STORE_REFUSED } from './quarantine.ts';
import { describeEnd, JobReader, TERMINAL, toJob } from './jobView.ts';
import {
  checkAsset,
  checkClose,
  checkId,
  checkListFilter,
  checkPercent,
  checkSendOptions,
  checkWait,
  DEFAULT_MAX_PAYLOAD,
  Intake,
  requireOptions,
  requireText,
  storedJson,
  type CloseOptions,
  type WaitOptions,
} from './intake.ts';
import { CommitBatcher, type QueuedWrite } from './commits.ts';
import { JobLocks } from './jobLocks.ts';
import { BackgroundWork } from './background.ts';
import { LeaseKeeper } from './leases.ts';
import { Waiters } from './waiters.ts';
import { drainAll, processPending, recoverStore, type RecoveryHost, type RecoveryReport } from './recovery.ts';
import { fireDueTimers } from './timers.ts';
import { failureInfo, settleToken, tokenFor, type TokenResult } from './tokens.ts';
import { cancelEvent, checkCancelReason, requestCancel } from './cancel.ts';
import { recordAsset, recordProgress, type WriteLease } from './reports.ts';
import { giveBackAttempts, letRunningFinish } from './shutdown.ts';

export type { RuntimeOptions, LogEntry, Job, SendResult, StartOptions, SendOptions, ListFilter, RuntimeEvent, JobDetails } from './api.ts';

interface RunningActivity {
  jobId: string;
  actorId: string;
  attempt: number;
  controller: AbortController;
}

const MAX_CONFLICT_RETRIES = 100;
/** Hydrated snapshots kept in memory (most recently committed jobs). */
const SNAPSHOT_CACHE = 1000;

/** What one applied (or ignored, failed, stale) event produced. */
interface Applied {
  status: 'applied' | 'ignored' | 'failed' | 'stale';
  error: ErrorInfo | null;
  record: JobRecord;
}

type Loaded =
  | { kind: 'ready'; record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor?: unknown }
  | { kind: 'held'; record: JobRecord }
  | { kind: 'terminal'; record: JobRecord };

/**
 * Open a runtime: register the machines, recover the store's jobs, and return the API.
 *
 * @example
 * const store = await SqliteStore.open('./spool.db');
 * const runtime = await createRuntime({ store, machines: [jobLifecycle] });
 * const job = await runtime.start('job-lifecycle', { name: 'resize', steps: 3 });
 * await runtime.send(job.id, { type: 'START' });
 * await runtime.close();
 */
export async function createRuntime(options: RuntimeOptions): Promise<Runtime> {
  checkRuntimeOptions(options);
  const runtime = new Runtime(options);
  if (options.recover ?? true) await runtime.recover();
  return runtime;
}

/** The public API of a running Spool. Create it with {@link createRuntime}. */
export class Runtime {
  readonly registry: MachineRegistry;
  readonly store: JobStore;
  readonly clock: Clock;
  readonly #owner: string | null;
  readonly #newId: () => string;
  readonly #intake: Intake;
  readonly #process: boolean;
  readonly #reader: JobReader;
  readonly #events: RuntimeEvents;
  /** Who listens to this runtime's events (see events.ts). */
  readonly #listeners: ReadonlySet<(event: RuntimeEvent) => void>;
  readonly #jobLocks = new JobLocks();
  readonly #background: BackgroundWork;
  readonly #running = new Map<string, RunningActivity>();
  readonly #pendingDrains = new Set<string>();
  readonly #waiters: Waiters;
  /** By job: the record this runtime last committed or read, and its hydrated snapshot (valid while the revision holds). */
  readonly #snapshots = new Map<string, { record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor: unknown }>();
  /** Group commit (commits.ts): new jobs, transitions, attempt outcomes and activity claims share transactions. */
  readonly #commits: CommitBatcher;
  readonly #runEffects: boolean;
  readonly #maxActivities: number;
  /** Bounded work (limits.ts): per-activity slots and the backlog behind backpressure. */
  readonly #slots: ActivitySlots;
  readonly #backlog: BacklogGauge;
  readonly #leaseMs: number;
  /** Leases this runtime holds, by job id: the fence it holds each with (kept by `#leaseKeeper`, leases.ts). */
  readonly #leases = new Map<string, number>();
  /** Attempts claimed here whose outcome is not recorded yet, by effect id (their job ids): their leases are kept. */
  readonly #attempting = new Map<string, string>();
  /** Renews, releases and expires the leases in `#leases` (leases.ts). */
  readonly #leaseKeeper: LeaseKeeper;
  readonly #hostDriven: boolean;
  readonly #verifySnapshots: boolean | 'auto';
  /** Identifies this runtime's claims on running activities. */
  readonly runnerId: string;
  /** Slots taken for first attempts that a commit in flight claims (`#claimsFor`), not yet in `#running`. */
  #reserved = 0;
  /** Renews the claims of running attempts (`#renewRunningClaims`). */
  #claimTimer: ReturnType<typeof setInterval> | undefined;
  /** Attempts a durable commit claimed, by effect id, for `#afterCommit` to start (`#startClaimed`). */
  readonly #claimedInCommit = new Map<string, { effect: ClaimedEffect; def: RegisteredMachine }>();
  /** Due activities may wait in the store that this runtime has not claimed: a freed slot pumps, and commits claim nothing (older work first). */
  #unclaimed = false;
  #pumping = false;
  #pumpAgain = false;
  #closing = false;
  #closed = false;

  constructor(options: RuntimeOptions) {
    this.store = options.store;
    this.registry = new MachineRegistry(options.machines);
    this.clock = options.clock ?? systemClock;
    this.#owner = options.owner === undefined || options.owner === null || options.owner === '' ? null : options.owner;
    this.#newId = options.newId ?? (() => uuidv7());
    this.#intake = new Intake(this.store, this.#owner, options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD);
    this.#process = options.processEvents ?? true;
    this.#events = new RuntimeEvents(this.clock, options.log);
    this.#listeners = this.#events.listeners;
    this.#background = new BackgroundWork(this.#events);
    this.#commits = new CommitBatcher(this.store);
    this.#reader = new JobReader(this.store, this.registry, this.#owner, this.#snapshots);
    this.#runEffects = options.runEffects ?? this.#process;
    this.#maxActivities = Math.max(1, options.maxConcurrentActivities ?? 8);
    this.#slots = new ActivitySlots(options.activityConcurrency, this.registry.all().flatMap((m) => Object.keys(m.machine.implementations.actors ?? {})));
    this.#backlog = new BacklogGauge(() => this.store.pendingBacklog(), this.clock, options.maxBacklog ?? DEFAULT_MAX_BACKLOG);
    this.#leaseMs = Math.max(1000, options.leaseMs ?? 30_000);
    this.#hostDriven = options.hostDriven ?? false;
    this.#verifySnapshots = options.verifySnapshots ?? 'auto';
    this.runnerId = newRunnerId();
    const leaseState = { held: this.#leases, attempting: this.#attempting, running: this.#running, cache: this.#snapshots, closed: () => this.#closed, releaseIdle: (jobId: string) => this.#releaseIdle(jobId), withLock: this.#withLock };
    this.#leaseKeeper = new LeaseKeeper(this.store, this.clock, this.runnerId, this.#leaseMs, leaseState, this.#events);
    // The lease heartbeat (host-driven mode: `tick()` instead).
    if (!this.#hostDriven) this.#leaseKeeper.startHeartbeat((beat) => this.#track(beat));
    this.#waiters = new Waiters({
      store: this.store,
      hostDriven: this.#hostDriven,
      tell: this.#events,
      subscribe: (listener) => this.subscribe(listener),
      get: (jobId) => this.get(jobId),
      closed: () => this.#closed,
    });
  }

  /** Listen to runtime events; returns the unsubscribe function. */
  subscribe(listener: (event: RuntimeEvent) => void): () => void {
    return this.#events.subscribe(listener);
  }

  /** Tell listeners (`storage.fault`) and the log (a warning) of a storage fault a loop rides out: `runWorker` calls it once per fault. */
  reportFault(fault: Omit<StorageFaultEvent, 'type'>): void {
    this.#emit({ type: 'storage.fault', ...fault });
    this.#logEntry('warn', 'storage fault', { ...fault });
  }

  /**
   * Start a job of the newest registered version of `machineId`.
   *
   * @example
   * const job = await runtime.start('job-lifecycle', { name: 'thumbnails' }, { idempotencyKey: 'upload-42' });
   */
  async start(machineId: string, input: unknown = {}, options: StartOptions = {}): Promise<Job> {
    this.#assertOpen();
    return this.#unit(() => this.#start(machineId, input, options));
  }

  async #start(machineId: string, input: unknown, options: StartOptions): Promise<Job> {
    if (typeof machineId !== 'string') throw new ValidationError('A machine id must be a string.');
    options = requireOptions(options, 'start', ['jobId', 'idempotencyKey']);
    const def = this.registry.latest(machineId);
    const parsed = this.#validateInput(def, input);
    const jobId = options.jobId ?? this.#newId();
    checkId('job id', jobId);
    if (options.jobId !== undefined && jobId.includes('~')) {
      throw new ValidationError(`A job id must not contain "~": Spool derives the ids of child and scheduled jobs with it (got "${jobId}").`);
    }
    if (options.idempotencyKey !== undefined) checkId('idempotency key', options.idempotencyKey);
    const inputHash = hashJson({ machine: def.id, input: parsed });
    const key = options.idempotencyKey ?? null;

    const existing = await this.#findExisting(jobId, key);
    if (existing) return this.#sameStart(existing, def.id, inputHash, jobId, key, options.jobId);

    const started = startStep({ def, input: parsed, jobId, idempotencyKey: key, inputHash, owner: this.#owner, runner: this.runnerId, now: this.clock.now(), machines: this.#machines });
    await this.#backlog.admit(false); // backpressure (limits.ts): refused before anything is written; a repeated start returned above
    const newJob = started.job;
    const claims = this.#claimsFor(newJob.effects ?? [], newJob.at);
    if (claims.length > 0) newJob.claims = claims;
    let created = false;
    let record: JobRecord;
    try {
      ({ job: record, created } = await this.#submitCreate(newJob));
    } finally {
      this.#claimsCommitted(newJob.effects ?? [], claims, created ? 1 : null, def);
    }
    if (!created) return this.#sameStart(record, def.id, inputHash, jobId, key, options.jobId);
    if (claims.length > 0) this.#leases.set(jobId, 1);
    // The new job's own actor lends its scope: its first event neither reads nor hydrates it again.
    if (started.actor !== undefined) this.#remember(record, def, started.snapshot, started.actor);
    return this.#started(record, def, started);
  }

  /** Child machine definitions, for the step (a child job's machine is registered with its parent's). */
  readonly #machines: StepInput['machines'] = (id, version) => this.registry.get(id, version);

  /** After a new job's commit: tell observers, run its initial actions, start its activities, apply its self-sends. */
  async #started(record: JobRecord, def: RegisteredMachine, started: Started): Promise<Job> {
    const job = toJob(record, def);
    const { relations } = started;
    this.#emit({ type: 'job.started', job });
    this.#logEntry('info', 'job started', { jobId: record.id, machine: def.id, version: def.version, state: job.value });
    this.#afterCommit(record.id, record.revision, started.plan, started.clean);
    relations.touched.delete(record.id);
    if (relations.deliveries.some((d) => d.jobId === record.id)) this.#pendingDrains.add(record.id);
    this.#afterRelations(relations);
    if (this.#pendingDrains.delete(record.id) && this.#process) {
      await this.#drain(record.id);
      return this.get(record.id);
    }
    return job;
  }

  /**
   * Send an event to a job. It is validated, recorded durably under its event id, applied once,
   * and the promise resolves with its outcome.
   *
   * @example
   * const r = await runtime.send(jobId, { type: 'PROGRESS', percent: 40 }, { eventId: 'webhook-7' });
   * r.status; // 'applied' | 'ignored' | 'failed' | ...
   */
  async send(jobId: string, event: unknown, options: SendOptions = {}): Promise<SendResult> {
    this.#assertOpen();
    return this.#unit(() => this.#send(jobId, event, options));
  }

  async #send(jobId: string, event: unknown, options: SendOptions): Promise<SendResult> {
    options = checkSendOptions(options);
    const record = await this.#visible(jobId, true);
    // An id made up here names the revision the event is about to be applied at: applied there
    // as it is accepted, the store finds it by that history row's key (no index entry to write).
    const eventId = options.eventId ?? `r${record.revision + 1}.${this.#newId()}`;

    const prior = options.eventId === undefined ? undefined : await this.store.getEvent(jobId, eventId);
    if (prior) {
      const def = this.registry.get(record.machineId, record.machineVersion);
      const payload = this.#validateEvent(def, event);
      if (prior.payloadHash !== hashJson(payload)) {
        throw new IdempotencyConflictError(
          `Event id "${eventId}" was already used for job ${jobId} with a different event; use a new event id for a new event.`,
          { jobId, eventId },
        );
      }
      return this.#outcome(jobId, eventId, true, options.wait ?? true);
    }

    if (TERMINAL.has(record.status)) {
      throw new JobTerminalError(`Job ${jobId} is ${describeEnd(record)}: it accepts no more events.`, {
        jobId,
        status: record.status,
        state: record.value,
      });
    }
    const route = this.registry.route(record.machineId, record.machineVersion);
    if (record.quarantine !== null && route && (await this.#withLock(jobId, () => this.#check(jobId))) !== 'quarantined') {
      return this.#send(jobId, event, options); // another runtime held it back; this one can run it
    }
    if (record.quarantine !== null || !route) {
      throw new JobQuarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
    }
    const payload = this.#validateEvent(route.target, event);
    const type = (payload as { type: string }).type;
    const accept: NewInboxEvent = {
      jobId,
      eventId,
      type,
      payload,
      payloadHash: hashJson(payload),
      at: this.clock.now(),
    };

    // Backpressure (limits.ts): refused before anything is written (a repeat of an accepted event id
    // returned its outcome above). An event that will wait in the inbox is counted at once.
    const queues = !(this.#process && (options.wait ?? true) && record.suspendedAt === null);
    await this.#backlog.admit(queues);
    // A suspended job accepts the event and leaves it pending (the commit would refuse it anyway).
    if (this.#process && (options.wait ?? true) && record.suspendedAt === null) {
      const inline = await this.#withLock(jobId, () => this.#applyInline(accept, record));
      if (inline) {
        if (this.#pendingDrains.delete(jobId)) {
          await this.#drain(jobId);
          return this.#outcome(jobId, eventId, false, true);
        }
        return { jobId, eventId, status: inline.status, revision: inline.record.revision, error: inline.error, duplicate: false, job: this.#view(inline.record) };
      }
    }
    const { event: stored, duplicate } = await this.store.acceptEvent(accept);
    if (!queues && !duplicate) this.#backlog.queued(); // the inline path could not take it: it waits in the inbox
    if (duplicate && stored.payloadHash !== accept.payloadHash) {
      throw new IdempotencyConflictError(`Event id "${eventId}" was already used for job ${jobId} with a different event.`, { jobId, eventId });
    }
    crashPoint('after-accept');
    this.#emit({ type: 'event.accepted', jobId, eventId, eventType: type });
    return this.#outcome(jobId, eventId, duplicate, options.wait ?? true);
  }

  /** A job by id. Throws {@link JobNotFoundError} for unknown ids and other owners' jobs. */
  async get(jobId: string): Promise<Job> {
    this.#assertOpen();
    return this.#view(await this.#visible(jobId));
  }

  /** Jobs by machine, state path, status or quarantine, ordered by id. */
  async list(filter: ListFilter = {}): Promise<Job[]> {
    this.#assertOpen();
    filter = checkListFilter(filter);
    if (filter.stuck) {
      const { stuck: _stuck, ...rest } = filter;
      return (await ops.listStuck(this.#ops, rest)).stuck.map((r) => this.#view(r));
    }
    const f: JobFilter = { ...filter, owner: this.#owner };
    return (await this.store.listJobs(f)).map((r) => this.#view(r));
  }

  /** Every commit of a job, in revision order: start, transitions, ignored and failed events, migrations. */
  async history(jobId: string): Promise<TransitionRecord[]> {
    this.#assertOpen();
    await this.#visible(jobId);
    return this.store.history(jobId);
  }

  /** A job's durable inbox: every accepted event and its outcome. */
  async events(jobId: string): Promise<InboxRecord[]> {
    this.#assertOpen();
    await this.#visible(jobId);
    return this.store.listEvents(jobId);
  }

  /**
   * Resolve when the job satisfies `predicate`; checked now, after each commit this runtime makes
   * to it, and when another process commits to the store (a store that counts those, as SQLite
   * does with `data_version`, is polled every 50 ms while someone waits). Rejects with
   * {@link WaitTimeoutError} after `timeoutMs` real milliseconds. Without a timeout a wait keeps
   * the process alive until it resolves, is aborted, or the runtime closes.
   *
   * @example
   * await runtime.waitFor(id, (job) => job.final);
   */
  async waitFor(jobId: string, predicate: (job: Job) => boolean, options: WaitOptions = {}): Promise<Job> {
    this.#assertOpen();
    return this.#waiters.waitFor(jobId, predicate, checkWait(jobId, predicate, options));
  }

  /**
   * Bring the store up to date: quarantine jobs whose machine version is not registered or whose
   * snapshot no longer fits, release jobs that fit again, migrate jobs that have a registered
   * migration, and apply every accepted but unprocessed event. Runs on open.
   */
  async recover(): Promise<RecoveryReport> {
    this.#assertOpen();
    return recoverStore(this.#recovery);
  }

  /**
   * Apply every accepted but unprocessed event (sent by client-only runtimes, other processes,
   * or left by a crash). Returns how many were settled.
   */
  async processPending(): Promise<number> {
    this.#assertOpen();
    return processPending(this.#recovery);
  }

  #recoveryHost: RecoveryHost | undefined;

  /** What recovery.ts needs from this runtime. */
  get #recovery(): RecoveryHost {
    this.#recoveryHost ??= {
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      registry: this.registry,
      runnerId: this.runnerId,
      process: this.#process,
      verifySnapshots: this.#verifySnapshots,
      tell: this.#events,
      check: (jobId, known) => this.#withLock(jobId, () => this.#check(jobId, known)),
      stopJob: (jobId) => this.#unit(() => this.#stopJob(jobId)),
      drain: (jobId) => this.#unit(() => this.#drain(jobId)),
    };
    return this.#recoveryHost;
  }

  /**
   * Stop: claim no new attempts; with `graceMs`, let running activities finish until then (their
   * outcomes are recorded); abort the rest and give their attempts back (recorded `interrupted`,
   * not counted against `maxAttempts`, up to `MAX_RELEASES` times per activity; the next runtime
   * runs them again at once; one unsafe to repeat is left to be taken over, as after a crash);
   * wait for event processing in flight; close the store. Idempotent. Default `graceMs`: 0 (abort
   * at once). `releaseAttempts: false` leaves aborted attempts as a crash would: taken over, and
   * counted (the testing kit's in-process crash).
   *
   * @example
   * process.on('SIGTERM', () => runtime.close({ graceMs: 10_000 }));
   */
  async close(options: CloseOptions = {}): Promise<void> {
    options = checkClose(options);
    if (this.#closed) return;
    this.#closing = true; // no new attempts are claimed from here on
    const graceMs = typeof options.graceMs === 'number' && options.graceMs > 0 ? options.graceMs : 0;
    if (graceMs > 0 && this.#running.size > 0) await letRunningFinish(() => this.#running.size, () => this.#background.pending(), graceMs);
    const aborted = [...this.#running.entries()];
    for (const [, running] of aborted) running.controller.abort(new Error('runtime shutting down'));
    await giveBackAttempts(this.store, this.runnerId, aborted.map(([effectId]) => effectId), options.releaseAttempts !== false, this.clock.now(), this.#events);
    await this.idle();
    if (this.#claimTimer) clearInterval(this.#claimTimer);
    await this.#leaseKeeper.releaseAll();
    this.#closed = true;
    retireRunner(this.runnerId);
    this.#waiters.endAll(new ClosedError('The runtime closed before the awaited condition held.'));
    this.#events.listeners.clear();
    await this.store.close();
  }

  /**
   * One round of time-driven work at the clock's current time: fire every due timer (each once,
   * into its job's inbox, then applied), start due activities and retries, and take over
   * activities whose runner is gone. The worker calls it in a loop; tests call it after moving
   * a virtual clock. Resolves when the round's events are applied (activities keep running: see `idle`).
   */
  async tick(): Promise<{ timersFired: number; activitiesStarted: number }> {
    this.#assertOpen();
    if (this.#hostDriven && this.#waiters.watching) await this.#waiters.poll();
    let timersFired = 0;
    if (this.#runEffects) {
      const { fired, jobs } = await fireDueTimers(this.store, this.#events, this.clock.now());
      timersFired = fired;
      if (this.#process) await this.#drainAll(jobs);
      await sched.fireDueSchedules(this.#schedulesHost); // due occurrences start their jobs (schedules.ts)
    }
    if (this.#hostDriven) await this.#leaseKeeper.renewClaims();
    // This process is alive: renew its own leases before freeing expired ones (host-driven mode has
    // no other heartbeat; otherwise the clock may have moved past the interval's last beat).
    if (this.#hostDriven || this.#leaseKeeper.heartbeatDue()) await this.#leaseKeeper.heartbeat();
    const freed = await this.#leaseKeeper.expire();
    if (this.#process && freed.length > 0) await this.#drainAll(freed);
    // A round already under way (started by a commit of this tick) finishes first: its claims wait
    // for their jobs' commits in flight, and what it starts is started when tick() returns.
    while (this.#pumping) await new Promise<void>((resolve) => setImmediate(resolve));
    const activitiesStarted = await this.#pumpEffects(true);
    return { timersFired, activitiesStarted };
  }

  /** When the next timer, retry or schedule occurrence is due (clock time), or null: a worker sleeps until then. */
  async nextWakeAt(): Promise<number | null> {
    this.#assertOpen();
    return sched.earliest(await this.store.nextWakeAt(), await sched.nextScheduleWake(this.#schedulesHost));
  }

  /**
   * Resolve when this runtime has no activity running and no event processing in flight. An
   * activity that never settles (one awaiting a signal) keeps it pending: wait for an event instead.
   */
  async idle(): Promise<void> {
    while (this.#background.size > 0 || this.#jobLocks.busy || this.#pumping) {
      await Promise.allSettled([...this.#background.pending(), ...this.#jobLocks.pending()]);
      if (this.#pumping) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /**
   * Request cancellation: recorded once (visible on the job), running activities of the job are
   * aborted, and the machine's cancel event (default `CANCEL`) is delivered through the inbox.
   * The job is cancelled only when the machine reaches its cancelled state. Repeating is harmless.
   *
   * @example
   * await runtime.cancel(jobId, 'customer asked');
   */
  async cancel(jobId: string, reason = 'cancelled'): Promise<Job> {
    this.#assertOpen();
    requireText('job id', jobId);
    checkCancelReason(reason);
    await requestCancel(this.store, this.registry, this.clock, this.#events, await this.#visible(jobId), reason);
    for (const running of this.#running.values()) {
      if (running.jobId === jobId) running.controller.abort(new Error(`job cancelled: ${reason}`));
    }
    if (this.#process) await this.#drain(jobId);
    return this.get(jobId);
  }

  /**
   * Complete an activity that finished out of band (see `defer` in {@link ActivityArgs}). The
   * token is single-use; a rejected payload leaves it usable.
   */
  async complete(token: string, output: unknown = null): Promise<Job> {
    return this.#settleToken(token, { kind: 'succeeded', output: this.#intake.jsonPayload('output', output) });
  }

  /** Fail an activity that was waiting out of band. The machine receives `xstate.error.actor.<id>`. */
  async fail(token: string, error: unknown = 'failed'): Promise<Job> {
    return this.#settleToken(token, { kind: 'failed', error: failureInfo(this.#intake.jsonPayload('error', error)) });
  }

  async #settleToken(token: string, result: TokenResult): Promise<Job> {
    this.#assertOpen();
    const jobId = await settleToken({ store: this.store, clock: this.clock, owner: this.#owner, tell: this.#events, outcomeEvent }, token, result);
    if (this.#process) await this.#drain(jobId);
    return this.get(jobId);
  }

  /** Set a job's progress (0-100). Once the job is final the update is ignored, with a visible note. */
  async setProgress(jobId: string, percent: number): Promise<Job> {
    this.#assertOpen();
    requireText('job id', jobId);
    checkPercent(percent);
    await this.#visible(jobId);
    return this.#progress(jobId, percent);
  }

  /** Set progress; from an activity (`lease`: its runner's fence), only while that runner holds the job. */
  async #progress(jobId: string, percent: number, lease?: WriteLease): Promise<Job> {
    await recordProgress(this.store, this.clock, jobId, percent, lease);
    return this.get(jobId);
  }

  /** Link an output to a job. The same key (default: the uri) is attached once, however often it is sent. */
  async attachAsset(jobId: string, asset: AssetInput, from?: { effectId: string; attempt: number }): Promise<{ attached: boolean }> {
    return this.#attach(jobId, asset, from);
  }

  /** Attach an asset; from an activity (`lease`: its runner's fence), only while that runner holds the job. */
  async #attach(jobId: string, asset: AssetInput, from?: { effectId: string; attempt: number }, lease?: WriteLease): Promise<{ attached: boolean }> {
    this.#assertOpen();
    requireText('job id', jobId);
    await this.#visible(jobId);
    checkAsset(asset);
    const meta = asset.meta === undefined ? null : this.#intake.jsonPayload('asset meta', asset.meta);
    return { attached: await recordAsset(this.store, this.clock, jobId, asset, meta, from, lease) };
  }

  /** Delete a finished job with its history, inbox, effects, timers, notes and assets. */
  async purge(jobId: string): Promise<void> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    if (!TERMINAL.has(record.status)) {
      throw new JobNotFinishedError(`Job ${jobId} is still ${record.status}; cancel it and let it finish before purging.`, { jobId });
    }
    await this.store.purgeJob(jobId);
    this.#snapshots.delete(jobId); // a new job may take the id: never hydrate it from the old one's cache
  }

  /** Everything recorded about one job: what `spool show` prints. */
  async details(jobId: string): Promise<JobDetails> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    const job = this.#view(record);
    const [history, events, effects, attempts, timers, notes, assets] = await Promise.all([
      this.store.history(jobId),
      this.store.listEvents(jobId),
      this.store.listEffects(jobId),
      this.store.listAttempts(jobId),
      this.store.listTimers(jobId),
      this.store.listNotes(jobId),
      this.store.listAssets(jobId),
    ]);
    const waitingFor = ops.waitingFor(this.#ops, record);
    const stuck = ops.isStuckJob(this.#ops, record, { events, effects, timers });
    return { job, history, events, effects, attempts, timers, notes, assets, waitingFor, stuck };
  }

  // ---------------------------------------------------------------- operations (operations.ts)

  /**
   * Suspend a job. It keeps accepting events durably (they stay pending: `send` resolves with
   * status `pending`) but processes none, fires no timers (they stay scheduled with their
   * deadlines) and starts no activity attempts (one already running finishes; its outcome waits).
   * `get`/`show` and `list({ suspended: true })` show it, with a note. Suspending again changes
   * nothing; a finished job is a {@link JobTerminalError}.
   *
   * @example
   * await runtime.suspend(jobId, 'provider outage');
   */
  async suspend(jobId: string, reason = 'suspended by an operator'): Promise<Job> {
    this.#assertOpen();
    await ops.suspendJob(this.#ops, jobId, reason);
    return this.get(jobId);
  }

  /**
   * Resume a suspended job: its pending events are applied in accept order, and (in a runtime
   * that runs effects, else in the worker's next round) timers that fell due fire at once and
   * waiting activities start. Resuming a job that is not suspended changes nothing.
   *
   * @example
   * await runtime.resume(jobId);
   */
  async resume(jobId: string): Promise<Job> {
    this.#assertOpen();
    if (await ops.resumeJob(this.#ops, jobId)) {
      if (this.#process) await this.#drain(jobId);
      if (this.#runEffects) await this.tick();
    }
    return this.get(jobId);
  }

  /**
   * Redrive a recorded failure. For each activity of the job that failed for good (retries
   * exhausted, a terminal error, an indeterminate outcome) while its invoking state is still
   * current (the machine has not handled the error: the error event is pending, or was ignored
   * or failed), start a fresh sequence of attempts (the policy's `maxAttempts` more) with the same
   * idempotency key; a note records it, a still-pending error event is recorded as stale.
   * Anything else is a {@link RetryRefusedError} saying what to do instead: a machine that already
   * handled the failure keeps its history (for a finished job, see {@link Runtime.retryAsNew});
   * an activity marked `unsafeToRepeat` needs `allowUnsafe: true`.
   *
   * @example
   * const { effects } = await runtime.retry(jobId);
   */
  async retry(jobId: string, options: { allowUnsafe?: boolean } = {}): Promise<{ job: Job; effects: EffectRecord[] }> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    if (record.quarantine !== null) throw new JobQuarantined(jobId, record.quarantine);
    const effects = await ops.redrive(this.#ops, record, options);
    if (this.#process) await this.#drain(jobId);
    if (this.#runEffects) this.#track(this.#pumpEffects());
    return { job: await this.get(jobId), effects };
  }

  /**
   * Start a new job of the same machine (its newest version) with a finished job's input, linked
   * to it by notes on both. Retrying the same job again returns the same new job (`created:
   * false`). Refused ({@link RetryRefusedError}) for a job still active, and for input with
   * sensitive fields: Spool never replays stored sensitive values into a new job.
   *
   * @example
   * const { job } = await runtime.retryAsNew(failedJobId);
   */
  async retryAsNew(jobId: string, options: { jobId?: string } = {}): Promise<{ job: Job; created: boolean }> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    const input = ops.inputForNewJob(record, this.registry.get(record.machineId, record.machineVersion));
    const idempotencyKey = ops.retryKey(jobId);
    const existing = await this.store.findByIdempotencyKey(this.#owner, idempotencyKey);
    if (existing) return { job: this.#view(existing), created: false };
    const job = await this.start(record.machineId, input, { idempotencyKey, ...(options.jobId !== undefined ? { jobId: options.jobId } : {}) });
    const at = this.clock.now();
    await this.store.addNote({ jobId, kind: 'retried-as-new', message: `retried as new job ${job.id} (${job.machineId}@${job.machineVersion}) with the same input`, at });
    await this.store.addNote({ jobId: job.id, kind: 'retry-of', message: `started as a retry of job ${jobId} with its input`, at });
    this.#logEntry('info', 'job retried as new', { jobId, newJobId: job.id });
    return { job: await this.get(job.id), created: true };
  }

  /**
   * Retention: delete this owner's finished jobs (every final status, or `status`) last updated
   * more than `olderThanMs` ago, with their history, inbox, effects, timers, notes and assets.
   *
   * @example
   * await runtime.purgeFinished({ olderThanMs: 30 * 86_400_000, status: 'done' }); // { purged: 12 }
   */
  async purgeFinished(options: { olderThanMs: number; status?: JobStatus }): Promise<{ purged: number }> {
    this.#assertOpen();
    // A misspelt `status` would purge every finished status: refused by name.
    requireOptions(options, 'purgeFinished', ['olderThanMs', 'status']);
    const ids = await ops.purgeFinished(this.#ops, options);
    for (const id of ids) this.#snapshots.delete(id);
    return { purged: ids.length };
  }

  /**
   * Figures for operators, all aggregates over the stored records of this owner's jobs (no
   * counters are kept): jobs by machine, state and status; quarantined, suspended, stuck and
   * exhausted jobs; backlog and the age of its oldest event; timer lag; attempts and failures by
   * activity; the claims held on running activities.
   *
   * @example
   * const { backlog, timers } = await runtime.stats();
   */
  async stats(): Promise<RuntimeStats> {
    this.#assertOpen();
    return ops.collectStats(this.#ops);
  }

  #opsHost: ops.OperationsHost | undefined;

  /** What operations.ts needs from this runtime. */
  get #ops(): ops.OperationsHost {
    this.#opsHost ??= {
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      visible: (jobId) => this.#visible(jobId),
      ready: (record) => this.#readyFrom(record),
      definition: (record) => this.registry.get(record.machineId, record.machineVersion),
      log: (level, msg, fields) => this.#logEntry(level, msg, fields),
    };
    return this.#opsHost;
  }

  // ---------------------------------------------------------------- schedules (schedules.ts)

  /**
   * Create or update (by id) a schedule: a cron expression (read in `timezone`, default UTC) or an
   * interval that starts jobs of `machineId` with `input`. The machine, the input and the
   * definition are validated first (typed errors; nothing is stored on error). Writing the same
   * definition again changes nothing, so every process may call it at boot. Occurrences fire in
   * `tick()` (the worker), each at most once across all processes, with the `overlap` and
   * `catchUp` policies; see {@link ScheduleSpec}.
   *
   * @example
   * await runtime.schedule({ id: 'nightly-export', machineId: 'export-job', input: { format: 'csv' },
   *   cron: '0 3 * * *', timezone: 'Europe/Paris', overlap: 'skip', catchUp: 'run-once' });
   */
  async schedule(spec: sched.ScheduleSpec): Promise<sched.ScheduleResult> {
    this.#assertOpen();
    return sched.upsertSchedule(this.#schedulesHost, spec);
  }

  /** Remove a schedule (true if there was one). The jobs it started carry on. */
  async unschedule(id: string): Promise<boolean> {
    this.#assertOpen();
    return sched.removeSchedule(this.#schedulesHost, id);
  }

  /** This owner's schedules, ordered by id, with their next occurrence and what they last did. */
  async schedules(): Promise<sched.Schedule[]> {
    this.#assertOpen();
    return sched.listSchedules(this.#schedulesHost);
  }

  #schedulesHostValue: sched.SchedulesHost | undefined;

  /** What schedules.ts needs from this runtime. */
  get #schedulesHost(): sched.SchedulesHost {
    this.#schedulesHostValue ??= {
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      hasMachine: (machineId) => this.registry.all().some((m) => m.id === machineId),
      canCancel: (machineId) => {
        const def = this.registry.latest(machineId);
        return namesEventType(def, def.cancel.event);
      },
      prepareStart: (machineId, input, jobId, at) => {
        const def = this.registry.latest(machineId);
        const parsed = this.#validateInput(def, input);
        checkId('job id', jobId);
        const started = startStep({ def, input: parsed, jobId, idempotencyKey: null, inputHash: hashJson({ machine: def.id, input: parsed }), owner: this.#owner, runner: this.runnerId, now: at, machines: this.#machines });
        return { job: started.job, sensitivePaths: sensitivePaths(parsed, def.sensitive), started: async (record) => void (await this.#started(record, def, started)) };
      },
      cancelEvent: (record, reason, at) => {
        const def = this.registry.route(record.machineId, record.machineVersion)?.target;
        return def && namesEventType(def, def.cancel.event) ? cancelEvent(record.id, def, reason, at) : undefined;
      },
      cancelled: async (jobId, reason) => {
        this.#emit({ type: 'cancel.requested', jobId, reason });
        try {
          await this.cancel(jobId, reason); // the request is recorded: this aborts its activities and applies the event
        } catch (error) {
          if (!(error instanceof SpoolError && (error.category === 'terminal' || error.category === 'conflict'))) throw error;
        }
      },
      emit: (event) => this.#emit(event),
      log: (level, msg, fields) => this.#logEntry(level, msg, fields),
    };
    return this.#schedulesHostValue;
  }

  // ---------------------------------------------------------------- internals

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('This Spool runtime is closed; create a new one with createRuntime().');
  }

  // One-line delegates to the parts, under the names the commit path and the activity executor call.
  /** A job read from the record this runtime last committed or read of it, if any (jobView.ts). */
  readonly #readKnown = (jobId: string): Promise<JobRecord | undefined> => this.#reader.readKnown(jobId);
  /** A job of this runtime's owner; `cached`: read it with {@link #readKnown} (jobView.ts). */
  readonly #visible = (jobId: string, cached = false): Promise<JobRecord> => this.#reader.visible(jobId, cached);
  readonly #view = (record: JobRecord): Job => this.#reader.view(record);
  /** The job a `start` repeats (intake.ts). */
  readonly #findExisting = (jobId: string, key: string | null): Promise<JobRecord | undefined> => this.#intake.findExisting(jobId, key);
  readonly #validateInput = (def: RegisteredMachine, input: unknown): JsonValue => this.#intake.validateInput(def, input);
  readonly #validateEvent = (def: RegisteredMachine | undefined, event: unknown): JsonValue => this.#intake.validateEvent(def, event);
  /** Run `work` in the background: its failure is logged, and `idle`/`close` wait for it (background.ts). */
  readonly #track = (work: Promise<unknown>): void => this.#background.track(work);
  /** Count an operation that may commit, so commits of concurrent operations share a transaction (commits.ts). */
  readonly #unit = <T>(work: () => Promise<T>): Promise<T> => this.#commits.unit(work);
  /** Group-committed writes (commits.ts): a caller is resolved once the batch holding its write is durable. */
  readonly #submit = (commit: TransitionCommit): Promise<CommitResult> => this.#commits.submit(commit);
  readonly #submitCreate = (create: NewJob): Promise<CreateJobResult> => this.#commits.submitCreate(create);
  readonly #submitFinish = (finish: AttemptFinish): Promise<FinishStatus> => this.#commits.submitFinish(finish);
  readonly #submitClaim = (claim: EffectClaim): Promise<ClaimedEffect | undefined> => this.#commits.submitClaim(claim);
  readonly #enqueue = (entry: QueuedWrite, eager = true): void => this.#commits.enqueue(entry, eager);
  /** Serialise work on one job inside this process (jobLocks.ts; other processes are fenced by revision). */
  readonly #withLock = <T>(jobId: string, work: () => Promise<T>): Promise<T> => this.#jobLocks.run(jobId, work);
  /** This runtime no longer holds the job (leases.ts). */
  readonly #leaseLost = (jobId: string, fence: number): void => this.#leaseKeeper.lost(jobId, fence);
  /** The lease a commit of this job is made under (leases.ts). */
  readonly #leaseFor = (jobId: string, hold: boolean, now: number): LeaseClaim => this.#leaseKeeper.claimFor(jobId, hold, now);
  readonly #emit = (event: RuntimeEvent): void => this.#events.emit(event);
  readonly #logEntry = (level: LogEntry['level'], msg: string, fields: Record<string, unknown>): void => this.#events.log(level, msg, fields);

  /** The job a repeated `start` returns, once it is the same request (intake.ts). */
  #sameStart(record: JobRecord, machineId: string, inputHash: string, jobId: string, key: string | null, requestedId: string | undefined): Job {
    this.#intake.checkSameStart(record, machineId, inputHash, jobId, key, requestedId);
    return this.#view(record);
  }

  async #outcome(jobId: string, eventId: string, duplicate: boolean, wait: boolean): Promise<SendResult> {
    let event = await this.store.getEvent(jobId, eventId);
    if (event && event.status === 'pending' && this.#process) {
      if (wait) await this.#drain(jobId);
      else this.#track(this.#drain(jobId));
      if (wait) event = await this.store.getEvent(jobId, eventId);
    }
    if (!event) throw new JobNotFoundError(jobId);
    const record = await this.#visible(jobId);
    return {
      jobId,
      eventId,
      status: event.status,
      revision: event.revision,
      error: event.error,
      duplicate,
      job: this.#view(record),
    };
  }

  /** Drain many jobs at once, so their commits share transactions (recovery.ts). */
  #drainAll(ids: readonly string[]): Promise<number> {
    return drainAll((id) => this.#unit(() => this.#drain(id)), ids);
  }

  /** Apply every pending event of a job, oldest first. Returns how many were settled. */
  #drain(jobId: string): Promise<number> {
    return this.#withLock(jobId, async () => {
      let settled = 0;
      let conflicts = 0;
      for (;;) {
        const loaded = await this.#load(jobId);
        if (!loaded || loaded.kind === 'held') return settled;
        if (loaded.record.suspendedAt !== null) return settled; // suspended: its events wait for resume
        this.#pendingDrains.delete(jobId);
        const [event] = await this.store.pendingEvents(jobId, 1);
        if (!event) return settled;
        const result = await this.#applyPending(loaded, event);
        if (result === 'leased') return settled; // another runner holds the job: it applies its events
        if (result === 'refused') return settled; // the store refused the job's rows: it is quarantined
        if (result === 'conflict') {
          conflicts += 1;
          if (conflicts > MAX_CONFLICT_RETRIES) {
            throw new RevisionConflictError(`Job ${jobId} kept changing under this process (${conflicts} conflicts); giving up this round.`, { jobId });
          }
          continue;
        }
        settled += 1;
      }
    });
  }

  /** Load a job ready to transition: migrated, hydrated, or held back with a visible reason. */
  async #load(jobId: string): Promise<Loaded | undefined> {
    for (let round = 0; round < 3; round += 1) {
      const record = await (round === 0 ? this.#readKnown(jobId) : this.store.getJob(jobId));
      if (!record) return undefined;
      if (TERMINAL.has(record.status)) return { kind: 'terminal', record };
      const ready = this.#readyFrom(record);
      if (ready) return ready;
      const outcome = await this.#check(jobId);
      if (outcome === 'missing') return undefined;
      if (outcome === 'quarantined') return { kind: 'held', record: (await this.store.getJob(jobId)) ?? record };
    }
    const record = await this.store.getJob(jobId);
    return record ? { kind: 'held', record } : undefined;
  }

  /**
   * Check one job against the registry: quarantine it if it cannot run, release it if it can
   * again, migrate it when a migration chain is registered.
   */
  async #check(jobId: string, known?: JobRecord): Promise<'missing' | 'ok' | 'quarantined' | 'migrated' | 'terminal'> {
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
      // Recovery passes the row it just listed; a stale one only costs a conflict and a fresh read.
      const record = attempt === 0 && known ? known : await this.store.getJob(jobId);
      if (!record) return 'missing';
      if (TERMINAL.has(record.status)) return 'terminal';
      const route = this.registry.route(record.machineId, record.machineVersion);
      let reason: string | null = null;
      let migratedTo: RegisteredMachine | undefined;
      let snapshotJson: ReturnType<typeof parseSnapshot> = parseSnapshot(record.snapshot);
      if (!route) {
        const known = this.registry.all().filter((m) => m.id === record.machineId).map((m) => m.version);
        reason = known.length
          ? `machine ${record.machineId} version ${record.machineVersion} is not registered (registered: ${known.join(', ')}); register it again or add a migration from ${record.machineVersion}`
          : `machine ${record.machineId} is not registered`;
      } else if (record.corruption !== undefined) {
        reason = record.corruption;
      } else if (typeof snapshotJson === 'string') {
        reason = snapshotJson;
      } else {
        if (route.chain.length > 0) {
          try {
            let from = record.machineVersion;
            for (const step of route.chain) {
              snapshotJson = step.migrations[from]!(structuredClone(snapshotJson));
              from = step.version;
            }
            migratedTo = route.target;
          } catch (error) {
            reason = `migration from ${record.machineVersion} to ${route.target.version} failed: ${redactText(toErrorInfo(error).message, record.context, route.target.sensitive)}`;
          }
        }
        if (reason === null) {
          const h = hydrate(route.target, snapshotJson as Exclude<typeof snapshotJson, string>, record.status);
          if (!h.ok) reason = h.reason;
          else if (migratedTo) {
            const result = await this.#commitOne(record, route.target, h.snapshot, migrateStep(record, route.target, h.snapshot, this.clock.now()));
            if (result === 'leased') return 'ok'; // its holder migrates it
            if (result === 'refused') return 'quarantined';
            if (result === 'conflict' || result === 'duplicate') continue;
            this.#logEntry('info', 'job migrated', { jobId, from: record.machineVersion, to: route.target.version });
            // Held back before its migration was registered: it runs now.
            if (record.quarantine !== null) await this.#release(jobId);
            return 'migrated';
          }
        }
      }
      if (reason !== null) {
        if (record.quarantine !== reason) {
          await this.store.setQuarantine(jobId, reason, this.clock.now());
          this.#emit({ type: 'job.quarantined', jobId, reason });
          this.#logEntry('warn', 'job quarantined', { jobId, reason });
        }
        return 'quarantined';
      }
      // A job the store refused to commit stays held until its history and revision agree again
      // (a repaired row): releasing it would only fail the next commit the same way.
      if (record.quarantine?.startsWith(STORE_REFUSED) && (await this.store.history(jobId)).at(-1)?.revision !== record.revision) return 'quarantined';
      if (record.quarantine !== null) await this.#release(jobId);
      return 'ok';
    }
    throw new RevisionConflictError(`Job ${jobId} kept changing while being checked.`, { jobId });
  }

  async #release(jobId: string): Promise<void> {
    await this.store.setQuarantine(jobId, null, this.clock.now());
    this.#emit({ type: 'job.released', jobId });
    this.#logEntry('info', 'job released from quarantine', { jobId });
  }

  /**
   * The fast path: accept and apply a new event in one commit. It starts from the record the
   * caller just read; the commit checks the revision and that nothing is queued before the
   * event, so a stale start only costs a fallback to the queued path.
   */
  async #applyInline(accept: NewInboxEvent, visible: JobRecord): Promise<Applied | undefined> {
    const loaded = this.#readyFrom(visible) ?? (await this.#load(accept.jobId));
    if (!loaded || loaded.kind !== 'ready') return undefined;
    const result = await this.#applyEvent(loaded, accept.payload, { accept });
    return typeof result === 'object' ? result : undefined;
  }

  /** A record that can transition as it is (no quarantine, migration or corruption), hydrated or from the cache. */
  #readyFrom(record: JobRecord): Extract<Loaded, { kind: 'ready' }> | undefined {
    if (TERMINAL.has(record.status) || record.quarantine !== null || record.corruption !== undefined) return undefined;
    const route = this.registry.route(record.machineId, record.machineVersion);
    if (!route || route.chain.length > 0) return undefined;
    const cached = this.#snapshots.get(record.id);
    if (cached && cached.record.revision === record.revision && cached.record.createdAt === record.createdAt && cached.def === route.target) {
      return { kind: 'ready', record, def: route.target, snapshot: cached.snapshot, actor: cached.actor };
    }
    const json = parseSnapshot(record.snapshot);
    const hydrated = typeof json === 'string' ? undefined : hydrate(route.target, json, record.status);
    if (!hydrated?.ok) return undefined;
    this.#remember(record, route.target, hydrated.snapshot, hydrated.actor);
    return { kind: 'ready', record, def: route.target, snapshot: hydrated.snapshot, actor: hydrated.actor };
  }

  /**
   * Keep the record and snapshot a commit produced (or a read hydrated): the job's next event
   * skips hydration, and its send reads only the columns that change without a commit. Bounded.
   */
  #remember(record: JobRecord, def: RegisteredMachine, snapshot: AnyMachineSnapshot, actor?: unknown): void {
    const jobId = record.id;
    const previous = this.#snapshots.get(jobId);
    this.#snapshots.delete(jobId);
    const scope = actor ?? (previous?.def === def ? previous.actor : undefined);
    if (scope === undefined) return; // without a scope of its own the next event hydrates afresh
    this.#snapshots.set(jobId, { record, def, snapshot, actor: scope });
    if (this.#snapshots.size > SNAPSHOT_CACHE) this.#snapshots.delete(this.#snapshots.keys().next().value!);
  }

  async #applyPending(loaded: Loaded, event: QueuedEvent): Promise<'ok' | 'conflict' | 'duplicate' | 'leased' | 'refused'> {
    if (loaded.kind === 'held') return 'ok';
    if (loaded.kind === 'terminal') {
      const error = toErrorInfo(new JobTerminalError(`Job ${event.jobId} is ${describeEnd(loaded.record)}: the event arrived after its end.`));
      // Processed now: its sensitive fields are redacted as any processed event's (when its machine is known here).
      const sensitive = this.registry.get(loaded.record.machineId, loaded.record.machineVersion)?.sensitive;
      await this.store.rejectEvent(event.seq, error, this.clock.now(), sensitive && sensitive.size > 0 ? redact(event.payload, sensitive) : undefined);
      this.#emit({ type: 'event.rejected', jobId: event.jobId, eventId: event.eventId, error });
      return 'ok';
    }
    const payload = event.payload as { type?: unknown } | null;
    if (payload === null || typeof payload !== 'object' || typeof payload.type !== 'string') {
      const error = toErrorInfo(new CorruptRecordError(`The stored event ${event.eventId} of job ${event.jobId} is unreadable; it was set aside.`));
      await this.store.rejectEvent(event.seq, error, this.clock.now());
      this.#emit({ type: 'event.rejected', jobId: event.jobId, eventId: event.eventId, error });
      return 'ok';
    }
    const stale = await this.#staleReason(event);
    const result = await this.#applyEvent(loaded, event.payload, { seq: event.seq, eventId: event.eventId }, stale, event.source === 'timer' ? event.sourceId : null);
    return typeof result === 'object' ? 'ok' : result === 'outcome-not-current' ? 'conflict' : result;
  }

  /** Why an outcome or timer event no longer belongs to the current state, or null if it does. */
  async #staleReason(event: InboxRecord): Promise<string | null> {
    if (event.source === 'effect' && event.sourceId !== null) {
      const effect = await this.store.getEffect(event.sourceId);
      if (!effect || !effect.active) return `invocation ${event.sourceId} is no longer current (its state was left)`;
      if (effect.attempt !== event.attempt) return `attempt ${event.attempt} of ${event.sourceId} was superseded by attempt ${effect.attempt}`;
      if (effect.status !== 'succeeded' && effect.status !== 'failed') return `invocation ${event.sourceId} is ${effect.status}`;
    }
    if (event.source === 'timer' && event.sourceId !== null) {
      const timer = (await this.store.listTimers(event.jobId)).find((t) => t.id === event.sourceId);
      if (!timer || timer.status !== 'fired') return `timer ${event.sourceId} was cancelled`;
    }
    return null;
  }

  /** Compute the transition for one event (the step) and commit it, with every record it asks for, in one transaction. */
  async #applyEvent(
    loaded: Extract<Loaded, { kind: 'ready' }>,
    payload: JsonValue,
    source: { accept: NewInboxEvent; outcome?: OutcomeInCommit } | { seq: number; eventId: string },
    stale: string | null = null,
    timerId: string | null = null,
  ): Promise<Applied | 'conflict' | 'duplicate' | 'leased' | 'refused' | 'outcome-not-current'> {
    const { record, def } = loaded;
    const s = step({
      job: record,
      def,
      snapshot: loaded.snapshot,
      // A child job's transition needs its parent marker in scope: the cached actor has none.
      actor: def.scopeReusable && !record.parent ? loaded.actor : undefined,
      event: payload,
      source: 'accept' in source ? { accept: source.accept } : source,
      now: this.clock.now(),
      stale,
      timerId,
      // Read only where there is something to read: the hot path (no children, no parent) awaits nothing here.
      ...(stale || !(needsChildren(def) || record.parent) ? {} : await this.#relationBook(record, def)),
      machines: this.#machines,
      runner: this.runnerId,
    });
    crashPoint('before-commit');
    const result = await this.#commitOne(record, def, s.next, s.commit, s.plan, 'accept' in source ? source.outcome : undefined);
    if (typeof result !== 'object') return result;
    crashPoint('after-commit');
    const eventId = s.commit.transition.eventId;
    const eventType = s.commit.transition.eventType;
    if (s.status === 'failed') this.#logEntry('warn', 'event failed', { jobId: record.id, eventId, eventType, error: s.error });
    if (s.status === 'stale') this.#logEntry('info', 'stale outcome recorded', { jobId: record.id, eventId, eventType, reason: stale });
    if (s.plan) this.#afterCommit(record.id, result.record.revision, s.plan, s.clean);
    if (s.relations) this.#afterRelations(s.relations);
    return { status: s.status, error: s.error, record: result.record };
  }

  /**
   * What a step of this job needs beyond its row: the job's current child invocations (read only
   * for a machine that has child machines) and, for a child job, the parent's invocation it settles.
   */
  async #relationBook(record: JobRecord, def: RegisteredMachine): Promise<Pick<StepInput, 'children' | 'parentEffect'>> {
    const children = needsChildren(def)
      ? new Map((await this.store.listEffects(record.id)).filter((e) => e.kind === 'child' && e.active).map((e) => [e.actorId, e.id]))
      : undefined;
    const parentEffect = record.parent ? await this.store.getEffect(record.parent.effectId) : undefined;
    return { children, parentEffect };
  }

  /** After a commit: stop children of left states, and let the jobs that received events run. */
  #afterRelations(relations: Relations): void {
    for (const childJob of relations.stopChildren) this.#track(this.#unit(() => this.#stopJob(childJob)));
    if (relations.children.some((c) => c.effects?.some((e) => e.kind !== 'child'))) this.#track(this.#pumpEffects());
    if (!this.#process) return;
    for (const jobId of relations.touched) this.#track(this.#unit(() => this.#drain(jobId)));
  }

  /** Stop a child job whose invoking state was left: status `stopped`, its effects and timers cancelled, its own children stopped. */
  async #stopJob(jobId: string): Promise<void> {
    const grandchildren = await this.#withLock(jobId, async () => {
      for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt += 1) {
        const record = await this.store.getJob(jobId);
        if (!record || TERMINAL.has(record.status)) return [];
        const children = (await this.store.listEffects(jobId)).filter((e) => e.kind === 'child' && e.active).map((e) => e.id);
        const now = this.clock.now();
        // The parent's decision overrides any lease on the child: the holder's next write fails its fence.
        const [result] = await this.store.commit([{ ...stopStep(record, now), lease: { ...this.#leaseFor(jobId, false, now), force: true } }]);
        if (result?.ok) {
          this.#snapshots.delete(jobId);
          this.#leases.delete(jobId);
          for (const running of this.#running.values()) if (running.jobId === jobId) running.controller.abort(new Error('stopped: its parent left the invoking state'));
          this.#logEntry('info', 'child job stopped', { jobId });
          return children;
        }
      }
      return [];
    });
    for (const child of grandchildren) await this.#stopJob(child);
  }

  /** Submit a step's commit under this runner's lease (and, for an outcome applied with its event, the attempt's finish), and keep what it produced. */
  async #commitOne(
    record: JobRecord,
    def: RegisteredMachine,
    next: AnyMachineSnapshot,
    prepared: Step['commit'],
    plan?: ActionPlan,
    outcome?: OutcomeInCommit,
  ): Promise<{ record: JobRecord } | 'conflict' | 'duplicate' | 'leased' | 'refused' | 'outcome-not-current'> {
    const now = prepared.job.at;
    const commit: TransitionCommit = {
      ...prepared,
      lease: this.#leaseFor(record.id, next.status === 'active' && this.#holdsWork(record.id, plan, outcome?.finish.id), now),
      ...(outcome ? { finish: outcome.finish } : {}),
    };
    const claims = plan && commit.lease?.until != null ? this.#claimsFor(plan.effects.create, now) : [];
    if (claims.length > 0) commit.claims = claims;
    let result: CommitResult | undefined;
    try {
      result = await this.#submit(commit);
    } finally {
      this.#claimsCommitted(plan?.effects.create ?? [], claims, result?.ok ? result.fence : null, def);
    }
    if (!result) throw new RevisionConflictError(`The store returned no result for job ${record.id}.`);
    if (result.ok) {
      if (commit.lease?.until != null && result.fence !== null) this.#leases.set(record.id, result.fence);
      else this.#leases.delete(record.id);
    }
    if (!result.ok) {
      if (result.reason === 'leased') {
        // Another live runner holds the job: its events wait in the inbox for that runner.
        const held = this.#leases.get(record.id);
        if (held !== undefined) this.#leaseLost(record.id, held);
        return 'leased';
      }
      if (result.reason === 'conflict' || result.reason === 'event-settled') return 'conflict';
      if (result.reason === 'duplicate-event') return 'duplicate';
      if (result.reason === 'outcome-not-current') return 'outcome-not-current';
      // The store refused the rows themselves (a damaged job: its history disagrees with its
      // revision…): hold this job back with the reason, and let every other job carry on.
      const reason = `${STORE_REFUSED}${result.error.message}`;
      await this.store.setQuarantine(record.id, reason, this.clock.now());
      this.#snapshots.delete(record.id);
      this.#emit({ type: 'job.quarantined', jobId: record.id, reason });
      this.#logEntry('error', 'job quarantined', { jobId: record.id, reason });
      return 'refused';
    }
    const updated: JobRecord = {
      ...record,
      revision: result.revision,
      status: commit.job.status,
      value: commit.job.value,
      context: commit.job.context,
      snapshot: commit.job.snapshot,
      machineVersion: def.version,
      progress: commit.job.progress === undefined ? record.progress : commit.job.progress,
      updatedAt: now,
    };
    // The attempt's end is told before the transition it caused, as when it is recorded on its own.
    outcome?.recorded();
    // The job view and the event are built only for someone listening (the hot path has no one).
    if (this.#listeners.size > 0) {
      const job = toJob(updated, def);
      this.#emit({ type: 'job.committed', job, transition: { ...commit.transition, jobId: record.id, revision: result.revision, runner: this.runnerId, fence: result.fence } });
    }
    if (TERMINAL.has(updated.status) && !TERMINAL.has(record.status)) {
      this.#logEntry('info', 'job finished', { jobId: record.id, status: updated.status, state: updated.value });
    }
    this.#remember(updated, def, next);
    return { record: updated };
  }

  /** Whether this runtime keeps the job's lease after a commit: its activities run (or are about to run) here. */
  #holdsWork(jobId: string, plan: ActionPlan | undefined, finishing?: string): boolean {
    if (this.#runEffects && plan?.effects.create.length) return true;
    // Every attempt of the job counted here but the one whose outcome this commit records (other commits keep the lease for it).
    for (const [effectId, id] of this.#attempting) if (id === jobId && effectId !== finishing) return true;
    return false;
  }

  /** Carry out what a committed transition asked for: abort left invocations, run actions, start effects. */
  #afterCommit(jobId: string, revision: number, plan: ActionPlan, clean?: (message: string) => string): void {
    for (const actorId of plan.effects.deactivate) {
      for (const [effectId, running] of this.#running) {
        if (running.jobId === jobId && running.actorId === actorId && !plan.effects.create.some((e) => e.id === effectId)) {
          running.controller.abort(new Error(`state left: invocation ${actorId} is no longer current`));
        }
      }
    }
    this.#runActions(jobId, revision, plan.afterCommit, clean);
    if (plan.deliveries.length > 0) this.#pendingDrains.add(jobId);
    if (plan.effects.create.length > 0) this.#startClaimed(plan.effects.create);
    if (plan.timers.schedule.length > 0) this.#emit({ type: 'timers.scheduled', jobId, dueAt: plan.timers.schedule.map((t) => t.dueAt) });
  }

  /** Carry out the actions a committed transition asked for. Runs only after the commit. */
  #runActions(jobId: string, revision: number, actions: readonly unknown[], clean: (message: string) => string = (m) => m): void {
    for (const raw of actions) {
      const action = raw as { type: string; params?: Record<string, unknown>; info?: unknown; exec?: (info: unknown, params: unknown) => void };
      const emitted = action.type === 'xstate.emit';
      if (!emitted && (action.type.startsWith('xstate.') || typeof action.exec !== 'function')) continue;
      // The transition is committed: what an action throws (or an emitted event JSON cannot hold)
      // is reported, and never reaches the caller whose event was applied.
      try {
        if (emitted) this.#emit({ type: 'emitted', jobId, event: toJson(action.params?.['event']) });
        else action.exec!(action.info, action.params);
      } catch (error) {
        const raw = toErrorInfo(error);
        const info = { ...raw, message: clean(raw.message) };
        this.#emit({ type: 'action.failed', jobId, revision, action: action.type, error: info });
        this.#logEntry('error', 'action failed after commit', { jobId, action: action.type, error: info });
        // On the job's record too (`show` lists notes): the transition stands, the action's work did not happen.
        const note = { jobId, kind: 'action-failed', message: `action ${action.type} failed after the commit of revision ${revision} (the transition stands): ${info.message}`, at: this.clock.now() };
        this.#track(this.store.addNote(note).catch(() => undefined));
      }
    }
  }

  /**
   * Start due activities up to the concurrency limit. Returns how many attempts it started.
   * `orphans`: also take over attempts of runners that are gone (the poll's round, `tick()`).
   */
  async #pumpEffects(orphans = false): Promise<number> {
    if (!this.#runEffects || this.#closing) return 0;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return 0;
    }
    this.#pumping = true;
    let started = 0;
    try {
      do {
        this.#pumpAgain = false;
        if (orphans) started += await this.#takeOverOrphans();
        orphans = false;
        const free = this.#maxActivities - this.#busySlots();
        if (free <= 0) {
          this.#unclaimed = true; // no slot to look with: the next freed slot pumps
          break;
        }
        this.#unclaimed = false;
        for (let window: number | undefined = free + this.#running.size; window !== undefined; window = widerScan(window)) {
          const due = await this.store.dueEffects(this.clock.now(), window, this.runnerId);
          let held = 0;
          // The round's claims go out together and share one group-commit transaction. One claim
          // per job: a second claim of the same job needs the lease fence the first one returns.
          const starts: Promise<boolean>[] = [];
          const jobs = new Set<string>();
          // A full window, or rows held by their limits: more may be due than this round takes.
          if (due.length >= window) this.#unclaimed = true;
          for (const effect of due) {
            if (this.#busySlots() + starts.length >= this.#maxActivities || this.#closing) break;
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
          for (const ok of await Promise.all(starts)) if (ok) started += 1;
          // Held rows may hide startable ones behind them: read further, up to a bound (limits.ts).
          if (held === 0 || due.length < window || this.#busySlots() >= this.#maxActivities || this.#closing) break;
        }
      } while (this.#pumpAgain && !this.#closing);
    } finally {
      this.#pumping = false;
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
   * now, before the commit; `#claimsCommitted` gives them back if the commit does not hold.
   */
  #claimsFor(effects: readonly NewEffect[], now: number): EffectStart[] {
    if (!this.#runEffects || this.#closing || this.#unclaimed) return [];
    const claims: EffectStart[] = [];
    for (const effect of effects) {
      if (effect.kind === 'child') continue;
      if (this.#busySlots() >= this.#maxActivities || !this.#slots.has(effect.src)) {
        this.#unclaimed = true; // left pending in the store: the next freed slot pumps
        continue;
      }
      this.#slots.take(effect.src);
      this.#reserved += 1;
      this.#attempting.set(effect.id, effect.jobId); // a commit of the job built meanwhile keeps the lease
      claims.push({ effectId: effect.id, claimUntil: now + this.#leaseMs });
    }
    return claims;
  }

  /** The commit carrying `claims` held (`fence`: the job's lease fence after it) or not (null): keep them for `#startClaimed`, or give their slots back. */
  #claimsCommitted(effects: readonly NewEffect[], claims: readonly EffectStart[], fence: number | null, def: RegisteredMachine): void {
    for (const claim of claims) {
      const created = effects.find((e) => e.id === claim.effectId)!;
      if (fence === null) {
        this.#reserved -= 1;
        this.#slots.release(created.src);
        this.#attempting.delete(created.id);
        continue;
      }
      const effect: ClaimedEffect = {
        ...created,
        kind: 'activity',
        status: 'running',
        active: true,
        attempt: 1,
        nextRunAt: null,
        claimedBy: this.runnerId,
        claimExpiresAt: claim.claimUntil,
        token: null,
        output: null,
        error: null,
        createdAt: created.at,
        updatedAt: created.at,
        leaseFence: fence,
      };
      this.#claimedInCommit.set(claim.effectId, { effect, def });
    }
  }

  /** After a commit (`#afterCommit`): run the attempts it claimed; pump for new activities it could not claim. */
  #startClaimed(effects: readonly NewEffect[]): void {
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
    if (unclaimed) this.#track(this.#pumpEffects());
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
      const event = { ...outcomeEvent(effect, effect.attempt, { error }), at: now };
      if (await this.store.failEffect(effect.id, error, event, now)) {
        this.#logEntry('warn', 'interrupted activity not re-run', { jobId: effect.jobId, effectId: effect.id, error });
        if (this.#process) this.#track(this.#drain(effect.jobId));
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
    // Slot and attempt are counted before anything is awaited: other claims of the round see the
    // slot taken, and a commit of the job built meanwhile keeps the lease the claim is taking.
    this.#slots.take(effect.src);
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
        await this.#withLock(effect.jobId, () => this.#check(effect.jobId)).catch((error: unknown) => {
          this.#logEntry('warn', 'could not check a job whose activity this runtime cannot run', { jobId: effect.jobId, error: toErrorInfo(error) });
        });
        return false;
      }
      // Under the job's lock, as its commits are: the claim goes to the store once a commit of the
      // job in flight has settled, with the fence that commit left (an asynchronous store may run
      // two writes in flight in either order, and deliver their results in either order).
      claimed = await this.#withLock(effect.jobId, async () => {
        const claim = await this.#submitClaim({ id: effect.id, runner: this.runnerId, now, claimUntil: now + this.#leaseMs, takeOver, fence: this.#leases.get(effect.jobId) ?? null });
        if (claim) this.#leases.set(claim.jobId, claim.leaseFence);
        return claim;
      });
    } finally {
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
  #launch(claimed: ClaimedEffect, def: RegisteredMachine | undefined): void {
    crashPoint('after-claim');
    const controller = new AbortController();
    this.#running.set(claimed.id, { jobId: claimed.jobId, actorId: claimed.actorId, attempt: claimed.attempt, controller });
    this.#renewRunningClaims();
    this.#emit({ type: 'activity.started', jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#logEntry('info', 'activity started', { jobId: claimed.jobId, effectId: claimed.id, src: claimed.src, attempt: claimed.attempt });
    this.#track(this.#runAttempt(claimed, def, controller).finally(() => this.#attempting.delete(claimed.id)));
  }

  async #runAttempt(effect: EffectRecord, def: RegisteredMachine | undefined, controller: AbortController): Promise<void> {
    const attempt = effect.attempt;
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      const logic = def?.machine.implementations.actors[effect.src] as { config?: (args: unknown) => unknown } | undefined;
      if (!def || typeof logic?.config !== 'function') {
        throw Object.assign(new Error(`No activity "${effect.src}" in the registered machine.`), { terminal: true });
      }
      const args: ActivityArgs & { self: undefined; system: undefined; emit: () => void } = {
        input: structuredClone(effect.input),
        idempotencyKey: effect.id,
        attempt,
        signal: controller.signal,
        jobId: effect.jobId,
        defer: (onToken) => {
          const token = tokenFor();
          pendingToken = { token, onToken };
          return deferred(token);
        },
        // Writes of an attempt are fenced like its outcome: ignored once another runner holds the job.
        progress: async (percent) => {
          this.#assertOpen();
          checkPercent(percent);
          await this.#progress(effect.jobId, percent, this.#attemptLease(effect.jobId));
        },
        attachAsset: async (asset) => {
          await this.#attach(effect.jobId, asset, { effectId: effect.id, attempt }, this.#attemptLease(effect.jobId));
        },
        self: undefined,
        system: undefined,
        emit: () => undefined,
      };
      let pendingToken: { token: string; onToken: ((token: string) => void | Promise<void>) | undefined } | undefined;
      // Shutdown aborts the attempt and stops waiting for it, whether or not the activity heeds
      // its signal: the attempt is taken over by the next runtime, and close() must not hang.
      const abandoned = new Promise<never>((_, reject) => {
        controller.signal.addEventListener('abort', () => this.#closing && reject(controller.signal.reason as Error), { once: true });
      });
      const value = await Promise.race([logic.config(args), abandoned]);
      if (isDeferred(value) && pendingToken && pendingToken.token === value.token) {
        const status = await this.#submitFinish({ id: effect.id, attempt, result: { kind: 'waiting', token: value.token }, at: this.clock.now(), lease: this.#attemptLease(effect.jobId) });
        this.#attempting.delete(effect.id);
        await this.#releaseIdle(effect.jobId); // waiting on a token: nothing runs here for it
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
    if (this.#closing && controller.signal.aborted) return; // shutdown: the next runtime takes the attempt over
    crashPoint('before-outcome');
    await this.#recordOutcome(effect, def, outcome);
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
      const until = this.clock.now() + this.#leaseMs;
      for (const [effectId, running] of this.#running) void this.store.renewClaim(effectId, running.attempt, this.runnerId, until).catch(() => undefined);
    }, Math.max(1000, Math.floor(this.#leaseMs / 3)));
    this.#claimTimer.unref();
  }

  /** The lease an attempt's outcome is recorded under: the fence this runtime holds on the job (-1: none, so it is refused). */
  #attemptLease(jobId: string): { runner: string; fence: number } {
    return { runner: this.runnerId, fence: this.#leases.get(jobId) ?? -1 };
  }

  async #recordOutcome(effect: EffectRecord, def: RegisteredMachine | undefined, outcome: { ok: true; value: unknown } | { ok: false; error: unknown }): Promise<void> {
    const attempt = effect.attempt;
    const now = this.clock.now();
    let status: FinishStatus | 'applied';
    let reported: 'succeeded' | 'failed' | 'retrying' | 'stale';
    let errorInfo: ErrorInfo | undefined;
    let output: JsonValue | undefined;
    let retryAt = 0;
    // Told once: by the commit that records the outcome with its transition (before that
    // transition's own event), or below once the outcome is recorded on its own.
    let told = false;
    const tell = (result: typeof reported) => {
      if (told) return;
      told = true;
      this.#emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt, outcome: result, ...(errorInfo ? { error: errorInfo } : {}) });
      this.#logEntry(result === 'succeeded' ? 'info' : 'warn', `activity ${result}`, { jobId: effect.jobId, effectId: effect.id, attempt, ...(errorInfo ? { error: errorInfo } : {}) });
    };
    if (outcome.ok) {
      try {
        output = storedJson('output', outcome.value === undefined ? null : outcome.value);
      } catch (error) {
        outcome = { ok: false, error: Object.assign(new Error(`activity output is not JSON: ${(error as Error).message}`), { terminal: true }) };
      }
    }
    if (outcome.ok) {
      const event = { ...outcomeEvent(effect, attempt, { output: output ?? null }), at: now };
      status = await this.#finishApplying({ id: effect.id, attempt, result: { kind: 'succeeded', output: output ?? null, event }, at: now, lease: this.#attemptLease(effect.jobId) }, effect.jobId, () => tell('succeeded'));
      reported = 'succeeded';
    } else {
      const { info, terminal, retryAfterMs } = classify(outcome.error);
      const policy = def?.activities[effect.src] ?? {};
      errorInfo = { ...info, message: redactText(info.message, effect.input, def?.sensitive ?? new Set()) };
      const next = afterFailedAttempt({ policy, effectId: effect.id, attempt, maxAttempts: effect.maxAttempts, error: errorInfo, terminal, retryAfterMs, now });
      if (next.retry) {
        retryAt = next.retryAt;
        status = await this.#submitFinish({ id: effect.id, attempt, result: { kind: 'failed', error: errorInfo, retryAt: next.retryAt, event: null }, at: now, lease: this.#attemptLease(effect.jobId) });
        reported = 'retrying';
      } else {
        const event = { ...outcomeEvent(effect, attempt, { error: next.eventError }), at: now };
        status = await this.#finishApplying({ id: effect.id, attempt, result: { kind: 'failed', error: next.error, retryAt: null, event }, at: now, lease: this.#attemptLease(effect.jobId) }, effect.jobId, () => tell('failed'));
        reported = 'failed';
      }
    }
    this.#attempting.delete(effect.id); // recorded: a commit of the job may release its lease now
    crashPoint('after-outcome');
    // Applied in its own commit, which found nothing queued before it: only a self-send of that commit waits.
    const applied = status === 'applied';
    if (status !== 'current' && status !== 'applied') reported = 'stale';
    if (status === 'lease-lost') this.#leaseLost(effect.jobId, this.#leases.get(effect.jobId) ?? -1);
    tell(reported);
    if (this.#process && reported !== 'retrying' && (!applied || this.#pendingDrains.has(effect.jobId))) await this.#unit(() => this.#drain(effect.jobId));
    if (reported === 'retrying') this.#emit({ type: 'timers.scheduled', jobId: effect.jobId, dueAt: [retryAt] }); // a worker wakes then
    await this.#releaseIdle(effect.jobId);
    // The freed slot: a next step of this job was claimed by its commit; other due work here is pumped.
    if (this.#unclaimed) this.#track(this.#pumpEffects());
  }

  /**
   * Record an attempt's outcome that goes to the machine as its event. When this runtime applies
   * events and nothing waits before it in the job's inbox, the outcome is recorded in the commit
   * that applies its event (the store writes the attempt's end first, and nothing at all if the
   * attempt is no longer current): one write, no queued inbox row. Otherwise, or when that commit
   * is refused, it is recorded on its own (group-committed) and applied in inbox order.
   * `applied`: recorded and applied in one commit.
   */
  async #finishApplying(finish: AttemptFinish & { result: { event: NewInboxEvent } }, jobId: string, recorded: () => void): Promise<FinishStatus | 'applied'> {
    const event = finish.result.event;
    if (this.#process && !this.#closing) {
      const effectId = finish.id;
      // The commit decides the job's lease as if the attempt were over (released if nothing else
      // runs here); until it is durable the heartbeat, and other commits of the job, still count the attempt.
      // Set once the commit holding the outcome is durable: whatever happens after, it is recorded.
      let committed = false;
      const outcome = {
        finish,
        recorded: () => {
          committed = true;
          recorded();
        },
      };
      await this.#unit(() =>
        this.#withLock(jobId, async () => {
          const loaded = await this.#load(jobId);
          if (loaded?.kind !== 'ready' || loaded.record.suspendedAt !== null) return;
          // Events queued before it come first: the store refuses this commit then (a conflict,
          // nothing written), and the outcome is recorded on its own below, queued behind them.
          await this.#applyEvent(loaded, event.payload, { accept: event, outcome });
        }),
      )
        .catch((error: unknown) => {
          if (committed) this.#logEntry('error', 'failed after the commit that recorded an outcome', { jobId, effectId, error: toErrorInfo(error) });
          else this.#logEntry('warn', 'outcome not applied with its commit; recorded on its own', { jobId, effectId, error: toErrorInfo(error) });
        });
      if (committed) return 'applied';
    }
    return this.#submitFinish(finish);
  }

  /** Release the lease of a job nothing here works on any more (an outcome that led to no commit: a retry, a stale result). */
  async #releaseIdle(jobId: string): Promise<void> {
    await this.#withLock(jobId, async () => {
      const fence = this.#leases.get(jobId);
      if (fence === undefined) return;
      // An attempt of the job still counted here, finishing or not: its own commit decides the lease.
      for (const id of this.#attempting.values()) if (id === jobId) return;
      await this.store.releaseLeases(this.runnerId, [jobId]);
      if (this.#leases.get(jobId) === fence) this.#leases.delete(jobId);
    });
  }

  /**
   * This owner's commits of every job in one growing order, after the cursor `after` (a record's
   * `seq`; 0 from the start), at most `limit` (1-1000, default 100): what the all-jobs event
   * stream of `spool serve` pages through. Pass the page's `next` back to read on. Needs a store
   * with `historySince` (SQLite, memory).
   */
  async historySince(after: number, filter: { limit?: number; machineId?: string; jobId?: string; outcomes?: TransitionOutcome[] } = {}): Promise<FeedPage> {
    this.#assertOpen();
    const { limit = 100, ...rest } = requireOptions(filter, 'historySince', ['limit', 'machineId', 'jobId', 'outcomes']);
    if (!Number.isSafeInteger(after) || after < 0) throw new ValidationError('historySince: after must be a non-negative integer (a seq).');
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError('historySince: limit must be an integer from 1 to 1000.');
    if (!this.store.historySince) throw new ValidationError(`historySince: the store ${this.store.description} keeps no global order of commits.`);
    // A filter that matches little reads at most this many seqs per page.
    return this.store.historySince(after, limit, limit * 100, { ...rest, owner: this.#owner });
  }
}

/** An attempt's outcome recorded in the commit that applies its event; `recorded` runs once that commit is durable. */
interface OutcomeInCommit {
  finish: AttemptFinish;
  recorded: () => void;
}

