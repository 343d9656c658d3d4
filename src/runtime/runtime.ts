import { uuidv7 } from './ids.ts';
import { readHistoryFeed, type HistoryFeedOptions } from './historyFeed.ts';
import { systemClock, type Clock } from '../ports/clock.ts';
import type { FeedPage, EffectRecord, InboxRecord, JobFilter, JobRecord, JobStatus, JobStore, TransitionRecord } from '../ports/store.ts';
import { ClosedError, JobNotFinishedError, JobNotFoundError, JobTerminalError, toErrorInfo } from '../base/errors.ts';
import { MachineRegistry } from './registry.ts';
import { outcomeEvent } from '../step/attempts.ts';
import { newRunnerId, type ActivityArgs, type AssetInput } from './activities.ts';
import * as ops from './operations.ts';
import type { RuntimeStats } from './operations.ts';
import * as sched from './schedules.ts';
import { ActivitySlots, BacklogGauge, DEFAULT_MAX_BACKLOG } from './limits.ts';
import type { Job, JobDetails, JobDetailsOf, JobOf, ListFilter, LogEntry, MachineEntries, RuntimeEvent, RuntimeOptions, SendOptions, SendResult, SendResultOf, StartManyItem, StartOptions, StartOrSendOptions, StartOrSendResult, StorageFaultEvent } from './api.ts';
import type { RedeliverOptions } from './redelivery.ts';
import type { CatalogOf, JobId, MachineCatalog, MachineIds, StartArgs } from './machineTypes.ts';
import { RuntimeEvents } from './events.ts';
import { inspectRuntime } from './inspection.ts';
import { quarantined, damageOf, refuseDamaged } from './quarantine.ts';
import { JobReader, TERMINAL } from './jobView.ts';
import { checkAsset, checkClose, checkListFilter, checkPercent, checkWait, DEFAULT_MAX_PAYLOAD, Intake, requireOptions, requireText, type CloseOptions, type WaitOptions } from './intake.ts';
import { CommitBatcher, DEFAULT_COMMIT_DELAY_MS } from './commits.ts';
import { JobLocks } from './jobLocks.ts';
import { BackgroundWork } from './background.ts';
import { LeaseKeeper } from './leases.ts';
import { Waiters } from './waiters.ts';
import { drainAll, processPending, recoverStore, type RecoveryHost, type RecoveryReport } from './recovery.ts';
import { tickRound, type TickHost } from './timers.ts';
import { failureInfo, settleToken, type TokenResult } from './tokens.ts';
import { cancelEvent, checkCancelReason, requestCancel } from './cancel.ts';
import { recordAsset, recordProgress, type WriteLease } from './reports.ts';
import { closeRuntime } from './shutdown.ts';
import { JobCommits, type SnapshotCache } from './jobCommits.ts';
import { ActivityExecutor } from './executor.ts';
import type { RunningActivity, RuntimeParts } from './parts.ts';
import { JobEntry } from './entry.ts';
import { RemoteAttempts } from './remote.ts';

/**
 * The public API of a running Spool. Create it with {@link createRuntime}. `C` is the catalog of
 * its machines' types (machineTypes.ts). `Runtime` without it is the untyped API, which every
 * runtime is assignable to (a variable or parameter of type `Runtime` takes a typed one too):
 * string machine ids; inputs, events and job contexts not checked at compile time.
 */
export class Runtime<C extends MachineCatalog = any> {
  readonly registry: MachineRegistry;
  readonly store: JobStore;
  readonly clock: Clock;
  readonly #owner: string | null;
  readonly #newId: () => string;
  readonly #intake: Intake;
  readonly #process: boolean;
  readonly #reader: JobReader;
  readonly #events: RuntimeEvents;
  readonly #jobLocks = new JobLocks();
  readonly #background: BackgroundWork;
  readonly #running = new Map<string, RunningActivity>();
  readonly #pendingDrains = new Set<string>();
  readonly #waiters: Waiters;
  /** By job: the record this runtime last committed or read, and its hydrated snapshot (valid while the revision holds). */
  readonly #snapshots: SnapshotCache = new Map();
  /** Group commit (commits.ts): new jobs, transitions, attempt outcomes and activity claims share transactions. */
  readonly #commits: CommitBatcher;
  readonly #runEffects: boolean;
  /** Bounded work (limits.ts): the backlog behind backpressure (the executor keeps the activity slots). */
  readonly #backlog: BacklogGauge;
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
  /** The commit path of one job (jobCommits.ts) and the activity executor (executor.ts). */
  readonly #jobs: JobCommits;
  readonly #executor: ActivityExecutor;
  /** The way in: start and send (entry.ts). */
  readonly #entry: JobEntry;
  /** Attempts claimed for remote workers and their outcomes (remote.ts; `spool serve`'s /api/workers routes). */
  readonly remote: RemoteAttempts;
  #closing = false;
  #closed = false;

  constructor(options: RuntimeOptions<MachineEntries>) {
    this.store = options.store;
    this.registry = new MachineRegistry(options.machines);
    this.clock = options.clock ?? systemClock;
    this.#owner = options.owner === undefined || options.owner === null || options.owner === '' ? null : options.owner;
    this.#newId = options.newId ?? (() => uuidv7());
    this.#intake = new Intake(this.store, this.#owner, options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD);
    this.#process = options.processEvents ?? true;
    this.#events = new RuntimeEvents(this.clock, options.log);
    this.#background = new BackgroundWork(this.#events);
    this.#commits = new CommitBatcher(this.store, undefined, options.commitDelayMs ?? DEFAULT_COMMIT_DELAY_MS);
    this.#reader = new JobReader(this.store, this.registry, this.#owner, this.#snapshots);
    this.#runEffects = options.runEffects ?? this.#process;
    const slots = new ActivitySlots(options.activityConcurrency, this.registry.srcs());
    this.#backlog = new BacklogGauge(() => this.store.pendingBacklog(), this.clock, options.maxBacklog ?? DEFAULT_MAX_BACKLOG);
    const leaseMs = Math.max(1000, options.leaseMs ?? 30_000);
    this.#hostDriven = options.hostDriven ?? false;
    this.#verifySnapshots = options.verifySnapshots ?? 'auto';
    this.runnerId = newRunnerId(options.runnerHost);
    const leaseState = { held: this.#leases, attempting: this.#attempting, running: this.#running, cache: this.#snapshots, closed: () => this.#closed, releaseIdle: (jobId: string) => this.#executor.releaseIdle(jobId), withLock: this.#withLock };
    this.#leaseKeeper = new LeaseKeeper(this.store, this.clock, this.runnerId, leaseMs, leaseState, this.#events);
    // The lease heartbeat (host-driven mode: `tick()` instead).
    if (!this.#hostDriven) this.#leaseKeeper.startHeartbeat((beat) => this.#track(beat));
    const parts: RuntimeParts = {
      store: this.store,
      clock: this.clock,
      registry: this.registry,
      runnerId: this.runnerId,
      process: this.#process,
      runEffects: this.#runEffects,
      events: this.#events,
      commits: this.#commits,
      locks: this.#jobLocks,
      background: this.#background,
      leaseKeeper: this.#leaseKeeper,
      readKnown: this.#readKnown,
      leases: this.#leases,
      attempting: this.#attempting,
      running: this.#running,
      pendingDrains: this.#pendingDrains,
    };
    this.#executor = new ActivityExecutor({
      ...parts,
      hostDriven: this.#hostDriven,
      maxActivities: Math.max(1, options.maxConcurrentActivities ?? 8),
      leaseMs,
      slots,
      jobs: { drain: (jobId) => this.#jobs.drain(jobId), check: (jobId) => this.#jobs.check(jobId), applyOutcome: (jobId, event, outcome) => this.#jobs.applyOutcome(jobId, event, outcome) },
      closing: () => this.#closing,
      progress: (jobId, percent, lease) => this.#progress(jobId, percent, lease),
      attach: (jobId, asset, from, lease) => this.#attach(jobId, asset, from, lease),
      assertOpen: () => this.#assertOpen(),
    });
    this.#jobs = new JobCommits({ ...parts, activities: this.#executor, snapshots: this.#snapshots, get: (jobId) => this.get(jobId) });
    this.remote = new RemoteAttempts({
      ...parts,
      progress: (jobId, percent, lease) => this.#progress(jobId, percent, lease),
      attach: (jobId, asset, from, lease) => this.#attach(jobId, asset, from, lease),
      drain: (jobId) => this.#unit(() => this.#jobs.drain(jobId)),
      assertOpen: () => this.#assertOpen(),
    });
    this.#entry = new JobEntry({ ...parts, owner: this.#owner, newId: this.#newId, intake: this.#intake, reader: this.#reader, backlog: this.#backlog, jobs: this.#jobs, activities: this.#executor });
    this.#waiters = new Waiters({
      store: this.store,
      hostDriven: this.#hostDriven,
      tell: this.#events,
      subscribe: (listener) => this.subscribe(listener),
      get: (jobId) => this.get(jobId),
      closed: () => this.#closed,
    });
    // The Stately inspector (inspection.ts): every job an actor, fed after each commit.
    if (options.inspect) inspectRuntime({ observer: options.inspect, registry: this.registry, store: this.store, owner: this.#owner, log: (l, m, f) => this.#events.log(l, m, f), track: (w) => this.#background.track(w) }, this.#events);
  }

  /** Listen to runtime events; returns the unsubscribe function. */
  subscribe(listener: (event: RuntimeEvent<JobOf<C, MachineIds<C>>>) => void): () => void {
    return this.#events.subscribe(listener as (event: RuntimeEvent) => void);
  }

  /** Tell listeners (`storage.fault`) and the log (a warning) of a storage fault a loop rides out: `runWorker` calls it once per fault. */
  reportFault(fault: Omit<StorageFaultEvent, 'type' | 'jobId'>): void {
    this.#emit({ type: 'storage.fault', jobId: null, ...fault });
    this.#logEntry('warn', 'storage fault', { ...fault });
  }

  /**
   * Start a job of the newest registered version of `machineId`.
   *
   * @example
   * const job = await runtime.start('job-lifecycle', { name: 'thumbnails' }, { idempotencyKey: 'upload-42' });
   */
  start<K extends MachineIds<C>>(machineId: K, ...args: StartArgs<C[K]['input'], StartOptions>): Promise<JobOf<C, K>>;
  // The implementations below the typed signatures are untyped (`Job<any>`): the types are the signatures'.
  async start(machineId: string, input: unknown = {}, options: StartOptions = {}): Promise<Job<any>> {
    this.#assertOpen();
    return this.#unit(() => this.#entry.start(machineId, input, options));
  }

  /**
   * Start many jobs of the newest version of `machineId` in one commit: each item is a job's
   * `input` and `start`'s options, and each job comes back in order (a repeated id or key, in the
   * store or earlier in `items`, returns its job as `start` does). Every item is checked before
   * anything is written: a refusal is the error `start` would throw, naming the item
   * (`details.item`). At most 1000 items (`MAX_START_MANY`, entry.ts).
   *
   * @example
   * const jobs = await runtime.startMany('job-lifecycle', [{ input: { name: 'a' } }, { input: { name: 'b' }, idempotencyKey: 'upload-43' }]);
   */
  startMany<K extends MachineIds<C>>(machineId: K, items: readonly StartManyItem<C[K]['input']>[]): Promise<JobOf<C, K>[]>;
  async startMany(machineId: string, items: readonly StartManyItem[]): Promise<Job<any>[]> {
    this.#assertOpen();
    return this.#unit(() => this.#entry.startMany(machineId, items));
  }

  /**
   * Send an event to a job. It is validated, recorded durably under its event id, applied once,
   * and the promise resolves with its outcome.
   *
   * @example
   * const r = await runtime.send(jobId, { type: 'PROGRESS', percent: 40 }, { eventId: 'webhook-7' });
   * r.status; // 'applied' | 'ignored' | 'failed' | ...
   */
  send<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>, event: C[K]['event'], options?: SendOptions): Promise<SendResultOf<C, K>>;
  async send(jobId: string, event: unknown, options: SendOptions = {}): Promise<SendResult<any>> {
    this.#assertOpen();
    return this.#unit(() => this.#entry.send(jobId, event, options));
  }

  /**
   * Create job `jobId` of `machineId` if it does not exist (with `event` in its inbox, one commit),
   * else send `event` to it (entry.ts). Concurrent callers converge: give `eventId`. Typed like
   * `start` and `send`: the machine's id, its input and its events.
   *
   * @example
   * const r = await runtime.startOrSend('order', 'order-42', { sku: 'A1' }, { type: 'ADD' }, { eventId: 'cart-7' }); // r.created
   */
  startOrSend<K extends MachineIds<C>>(machineId: K, jobId: string, input: C[K]['input'], event: C[K]['event'], options?: StartOrSendOptions): Promise<StartOrSendResult>;
  async startOrSend(machineId: string, jobId: string, input: unknown, event: unknown, options: StartOrSendOptions = {}): Promise<StartOrSendResult> {
    this.#assertOpen();
    return this.#unit(() => this.#entry.startOrSend(machineId, jobId, input, event, options));
  }

  /**
   * Apply a failed (poison) event again on the job's current state, as `redeliver~<eventId>` (a new
   * history record; the first outcome stays). Refusals: {@link RedeliveryRefusedError} (redelivery.ts).
   *
   * @example
   * await runtime.redeliver(jobId, 'webhook-7', { force: false });
   */
  async redeliver(jobId: string, eventId: string, options: RedeliverOptions = {}): Promise<SendResult> {
    this.#assertOpen();
    return this.#unit(() => this.#entry.redeliver(jobId, eventId, options));
  }

  /**
   * A job by id. Throws {@link JobNotFoundError} for unknown ids and other owners' jobs. Typed by
   * the machine of `job.id` when the id came from this runtime, else one of its machines' jobs:
   * narrow on `machineId`.
   */
  get<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>): Promise<JobOf<C, K>>;
  async get(jobId: string): Promise<Job<any>> {
    this.#assertOpen();
    return this.#view(await this.#visible(jobId));
  }

  /** Jobs by machine, state path, status or quarantine, ordered by id; typed by `machineId` when given. */
  list<K extends MachineIds<C> = MachineIds<C>>(filter?: ListFilter<K>): Promise<JobOf<C, K>[]>;
  async list(filter: ListFilter = {}): Promise<Job<any>[]> {
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
  waitFor<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>, predicate: (job: JobOf<C, K>) => boolean, options?: WaitOptions): Promise<JobOf<C, K>>;
  async waitFor(jobId: string, predicate: (job: any) => boolean, options: WaitOptions = {}): Promise<Job<any>> {
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
      check: (jobId, known) => this.#withLock(jobId, () => this.#jobs.check(jobId, known)),
      stopJob: (jobId) => this.#unit(() => this.#jobs.stopJob(jobId)),
      drain: (jobId) => this.#unit(() => this.#jobs.drain(jobId)),
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
    const graceMs = typeof options.graceMs === 'number' && options.graceMs > 0 ? options.graceMs : 0;
    const parts = { store: this.store, clock: this.clock, runnerId: this.runnerId, events: this.#events, running: this.#running, background: this.#background, executor: this.#executor, leaseKeeper: this.#leaseKeeper, waiters: this.#waiters };
    await closeRuntime(parts, { beginClosing: () => (this.#closing = true), idle: () => this.idle(), markClosed: () => (this.#closed = true) }, graceMs, options.releaseAttempts !== false);
  }

  /**
   * One round of time-driven work at the clock's current time: fire every due timer (each once,
   * into its job's inbox, then applied), start due activities and retries, and take over
   * activities whose runner is gone. The worker calls it in a loop; tests call it after moving
   * a virtual clock. Resolves when the round's events are applied (activities keep running: see `idle`).
   */
  async tick(): Promise<{ timersFired: number; activitiesStarted: number }> {
    this.#assertOpen();
    this.#tickHost ??= {
      store: this.store, clock: this.clock, tell: this.#events, process: this.#process, runEffects: this.#runEffects, hostDriven: this.#hostDriven,
      leaseKeeper: this.#leaseKeeper, executor: this.#executor, drainAll: this.#drainAll,
      pollWaiters: async () => {
        if (this.#waiters.watching) await this.#waiters.poll(this.#hostDriven);
      },
      fireSchedules: () => sched.fireDueSchedules(this.#schedules),
    };
    return tickRound(this.#tickHost);
  }

  #tickHost: TickHost | undefined;

  /** When the next timer, retry or schedule occurrence is due (clock time), or null: a worker sleeps until then. */
  async nextWakeAt(): Promise<number | null> {
    this.#assertOpen();
    return sched.earliest(await this.store.nextWakeAt(this.clock.now()), await sched.nextScheduleWake(this.#schedules));
  }

  /**
   * Resolve when this runtime has no activity running and no event processing in flight. An
   * activity that never settles (one awaiting a signal) keeps it pending: wait for an event instead.
   */
  async idle(): Promise<void> {
    while (this.#background.size > 0 || this.#jobLocks.busy || this.#executor.pumping) {
      await Promise.allSettled([...this.#background.pending(), ...this.#jobLocks.pending()]);
      await this.#executor.pumped();
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
    const record = await this.#visible(jobId);
    refuseDamaged(record); // a cancel it could never apply: its way out is purge
    await requestCancel(this.store, this.registry, this.clock, this.#events, record, reason);
    for (const running of this.#running.values()) {
      if (running.jobId === jobId) running.controller.abort(new Error(`job cancelled: ${reason}`));
    }
    if (this.#process) await this.#jobs.drain(jobId);
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
    // An Error (what a webhook handler usually has) is its name and message, as an activity's throw is.
    const value = error instanceof Error ? toErrorInfo(error) : error;
    return this.#settleToken(token, { kind: 'failed', error: failureInfo(this.#intake.jsonPayload('error', value)) });
  }

  async #settleToken(token: string, result: TokenResult): Promise<Job> {
    this.#assertOpen();
    const jobId = await settleToken({ store: this.store, clock: this.clock, owner: this.#owner, tell: this.#events, outcomeEvent }, token, result);
    if (this.#process) await this.#jobs.drain(jobId);
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

  /** Delete a finished job, or one whose rows are damaged (quarantined for damage), with its history, inbox, effects, timers, notes and assets. */
  async purge(jobId: string): Promise<void> {
    this.#assertOpen();
    const record = await this.#visible(jobId);
    // A job whose rows are damaged can never finish: purging it is its way out.
    if (!TERMINAL.has(record.status) && damageOf(record) === null) {
      throw new JobNotFinishedError(`Job ${jobId} is still ${record.status}; cancel it and let it finish before purging.`, { jobId });
    }
    await this.store.purgeJob(jobId);
    this.#snapshots.delete(jobId); // a new job may take the id: never hydrate it from the old one's cache
  }

  /** Everything recorded about one job: what `spool show` prints. */
  details<K extends MachineIds<C> = MachineIds<C>>(jobId: JobId<K>): Promise<JobDetailsOf<C, K>>;
  async details(jobId: string): Promise<JobDetails<any>> {
    this.#assertOpen();
    const { record, records } = await ops.jobRecordsAtOneRevision(this.#ops, await this.#visible(jobId), () => this.#visible(jobId));
    return { job: this.#view(record), ...records };
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
      if (this.#process) await this.#jobs.drain(jobId);
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
    refuseDamaged(record);
    if (record.quarantine !== null) throw quarantined(jobId, record.quarantine);
    const effects = await ops.redrive(this.#ops, record, options);
    if (this.#process) await this.#jobs.drain(jobId);
    if (this.#runEffects) this.#track(this.#executor.pump());
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
    const { jobId: newId, created } = await ops.retryAsNew(this.#ops, await this.#visible(jobId), (machineId, input, idempotencyKey) =>
      this.start(machineId, input, { idempotencyKey, ...(options.jobId !== undefined ? { jobId: options.jobId } : {}) }),
    );
    return { job: await this.get(newId), created };
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
      ready: (record) => this.#jobs.readyFrom(record),
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
    return sched.upsertSchedule(this.#schedules, spec);
  }

  /** Remove a schedule (true if there was one). The jobs it started carry on. */
  async unschedule(id: string): Promise<boolean> {
    this.#assertOpen();
    return sched.removeSchedule(this.#schedules, id);
  }

  /** This owner's schedules, ordered by id, with their next occurrence and what they last did. */
  async schedules(): Promise<sched.Schedule[]> {
    this.#assertOpen();
    return sched.listSchedules(this.#schedules);
  }

  #schedulesHost: sched.SchedulesHost | undefined;

  /** What schedules.ts needs from this runtime (schedules.ts builds it). */
  get #schedules(): sched.SchedulesHost {
    this.#schedulesHost ??= sched.schedulesHost({
      store: this.store,
      clock: this.clock,
      owner: this.#owner,
      registry: this.registry,
      prepareStart: (machineId, input, jobId, at) => this.#entry.prepareStart(machineId, input, jobId, at),
      cancelEvent,
      cancel: (jobId, reason) => this.cancel(jobId, reason),
      emit: (event) => this.#emit(event),
      log: (level, msg, fields) => this.#logEntry(level, msg, fields),
    });
    return this.#schedulesHost;
  }

  // ---------------------------------------------------------------- internals

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('This Spool runtime is closed; create a new one with createRuntime().');
  }

  // One-line delegates to the parts.
  /** Drain many jobs at once, so their commits share transactions (recovery.ts). */
  readonly #drainAll = (ids: readonly string[]): Promise<number> => drainAll((id) => this.#unit(() => this.#jobs.drain(id)), ids);
  /** A job read from the record this runtime last committed or read of it, if any (jobView.ts). */
  readonly #readKnown = (jobId: string): Promise<JobRecord | undefined> => this.#reader.readKnown(jobId);
  /** A job of this runtime's owner; `cached`: read it with {@link #readKnown} (jobView.ts). */
  readonly #visible = (jobId: string, cached = false): Promise<JobRecord> => this.#reader.visible(jobId, cached);
  readonly #view = (record: JobRecord): Job => this.#reader.view(record);
  /** Run `work` in the background: its failure is logged, and `idle`/`close` wait for it (background.ts). */
  readonly #track = (work: Promise<unknown>): void => this.#background.track(work);
  /** Count an operation that may commit, so commits of concurrent operations share a transaction (commits.ts). */
  readonly #unit = <T>(work: () => Promise<T>): Promise<T> => this.#commits.unit(work);
  /** Serialise work on one job inside this process (jobLocks.ts; other processes are fenced by revision). */
  readonly #withLock = <T>(jobId: string, work: () => Promise<T>): Promise<T> => this.#jobLocks.run(jobId, work);
  readonly #emit = (event: RuntimeEvent): void => this.#events.emit(event);
  readonly #logEntry = (level: LogEntry['level'], msg: string, fields: Record<string, unknown>): void => this.#events.log(level, msg, fields);

  /**
   * This owner's commits of every job in one growing order, after the cursor `after` (a record's
   * `seq`; 0 from the start), at most `limit` (1-1000, default 100): what the all-jobs event
   * stream of `spool serve` pages through. Pass the page's `next` back to read on. Needs a store
   * with `historySince` (SQLite, memory, Postgres).
   */
  async historySince(after: number, filter: HistoryFeedOptions = {}): Promise<FeedPage> {
    this.#assertOpen();
    return readHistoryFeed(this.store, this.#owner, after, filter);
  }
}
