/**
 * The commit path of one job: load (the known row, or a fresh read), check it against the
 * registry (quarantine, release, migrate), hydrate (or take the cached snapshot), step (pure,
 * `src/step`), commit under the job's lease through the group-commit batcher, then carry out what
 * the commit asked for (actions, activities claimed in it, deliveries to other jobs, child jobs to
 * stop). `drain` applies a job's inbox in order, one commit per event; `applyInline` accepts and
 * applies a new event in one commit.
 */
import type { AnyMachineSnapshot } from 'xstate';
import type { Clock } from '../ports/clock.ts';
import type { CommitResult, ErrorInfo, InboxRecord, JobRecord, JobStore, JsonValue, LeaseClaim, NewInboxEvent, QueuedEvent, TransitionCommit } from '../ports/store.ts';
import { DAMAGED_RECORD } from '../ports/store.ts';
import { CorruptRecordError, JobTerminalError, RevisionConflictError, toErrorInfo } from '../base/errors.ts';
import { hydrate, parseSnapshot } from '../base/hydrate.ts';
import { redact, toJson } from '../base/json.ts';
import { redactText } from '../base/redaction.ts';
import type { MachineRegistry } from './registry.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { crashPoint } from './crashPoints.ts';
import type { ActionPlan } from '../step/actions.ts';
import type { Relations } from '../step/children.ts';
import { migrateStep, needsChildren, step, type Started, type Step, type StepInput } from '../step/step.ts';
import type { Job, LogEntry, RuntimeEvent } from './api.ts';
import { quarantined, STORE_REFUSED, damageOf, isDamage } from './quarantine.ts';
import { describeEnd, TERMINAL, toJob } from './jobView.ts';
import type { ActivityExecutor, OutcomeInCommit } from './executor.ts';
import type { RunningActivity, RuntimeParts } from './parts.ts';
import { stopChildJob } from './childJobs.ts';

const MAX_CONFLICT_RETRIES = 100;
/** Hydrated snapshots kept in memory (most recently committed jobs). */
const SNAPSHOT_CACHE = 1000;

/** What one job's check against the registry found (`check`). */
export type CheckOutcome = 'missing' | 'ok' | 'quarantined' | 'migrated' | 'terminal';

/** What one applied (or ignored, failed, stale) event produced. */
export interface Applied {
  status: 'applied' | 'ignored' | 'failed' | 'stale';
  error: ErrorInfo | null;
  record: JobRecord;
}

/** A job as `load` found it: ready to transition, held back (quarantined), or final. */
export type Loaded =
  /** `unread`: the record was not read again (its commit is made `unread`: TransitionCommit). */
  | { kind: 'ready'; record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor?: unknown; unread?: boolean }
  | { kind: 'held'; record: JobRecord }
  | { kind: 'terminal'; record: JobRecord };

/** By job: the record this runtime last committed or read, and its hydrated snapshot (valid while the revision holds). */
export type SnapshotCache = Map<string, { record: JobRecord; def: RegisteredMachine; snapshot: AnyMachineSnapshot; actor: unknown }>;

/** What the commit path is built with besides the shared parts. */
export interface JobCommitsDeps extends RuntimeParts {
  /** The activity executor: the claims a commit carries, the attempts it starts. */
  activities: Pick<ActivityExecutor, 'claimsFor' | 'claimsCommitted' | 'startClaimed' | 'pump' | 'runsAny' | 'refill'>;
  /** A job as the caller sees it (the runtime's `get`). */
  get: (jobId: string) => Promise<Job>;
  snapshots: SnapshotCache;
}

/** Of two records of a job, the later one: `b` unless `a` is a later revision of the same job (born at the same time). */
function newer(a: JobRecord | undefined, b: JobRecord | undefined): JobRecord | undefined {
  return !b || (a && a.createdAt === b.createdAt && a.revision > b.revision) ? a : b;
}

/** The commit path (see the file's comment). */
export class JobCommits {
  readonly store: JobStore;
  readonly clock: Clock;
  readonly registry: MachineRegistry;
  readonly runnerId: string;
  readonly #process: boolean;
  readonly #deps: JobCommitsDeps;
  readonly #activities: JobCommitsDeps['activities'];
  readonly #snapshots: SnapshotCache;
  readonly #leases: Map<string, number>;
  readonly #attempting: ReadonlyMap<string, string>;
  readonly #running: ReadonlyMap<string, RunningActivity>;
  readonly #pendingDrains: Set<string>;
  readonly #listeners: ReadonlySet<unknown>;
  readonly #get: (jobId: string) => Promise<Job>;
  readonly #readKnown: (jobId: string) => Promise<JobRecord | undefined>;
  readonly #emit: (event: RuntimeEvent) => void;
  readonly #logEntry: (level: LogEntry['level'], msg: string, fields: Record<string, unknown>) => void;
  /** Run `work` in the background: its failure is logged, and `idle`/`close` wait for it (background.ts). */
  readonly #track: (work: Promise<unknown>) => void;
  /** Count an operation that may commit, so commits of concurrent operations share a transaction (commits.ts). */
  readonly #unit: <T>(work: () => Promise<T>) => Promise<T>;
  /** A transition, group-committed: resolved once the batch holding it is durable (commits.ts). */
  readonly #submit: (commit: TransitionCommit) => Promise<CommitResult>;
  /** Serialise work on one job inside this process (jobLocks.ts; other processes are fenced by revision). */
  readonly #withLock: <T>(jobId: string, work: () => Promise<T>) => Promise<T>;
  /** The lease a commit of this job is made under; this runtime no longer holds the job (leases.ts). */
  readonly #leaseFor: (jobId: string, hold: boolean, now: number) => LeaseClaim;
  readonly #leaseLost: (jobId: string, fence: number) => void;

  constructor(deps: JobCommitsDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.registry = deps.registry;
    this.runnerId = deps.runnerId;
    this.#process = deps.process;
    this.#deps = deps;
    this.#activities = deps.activities;
    this.#snapshots = deps.snapshots;
    this.#leases = deps.leases;
    this.#attempting = deps.attempting;
    this.#running = deps.running;
    this.#pendingDrains = deps.pendingDrains;
    this.#listeners = deps.events.listeners;
    this.#get = deps.get;
    this.#readKnown = deps.readKnown;
    this.#emit = (event) => deps.events.emit(event);
    this.#logEntry = (level, msg, fields) => deps.events.log(level, msg, fields);
    this.#track = (work) => deps.background.track(work);
    this.#unit = (work) => deps.commits.unit(work);
    this.#submit = (commit) => deps.commits.submit(commit);
    this.#withLock = (jobId, work) => deps.locks.run(jobId, work);
    this.#leaseFor = (jobId, hold, now) => deps.leaseKeeper.claimFor(jobId, hold, now);
    this.#leaseLost = (jobId, fence) => deps.leaseKeeper.lost(jobId, fence);
  }

  /** Child machine definitions, for the step (a child job's machine is registered with its parent's). */
  readonly machines: StepInput['machines'] = (id, version) => this.registry.get(id, version);

  /** After a new job's commit: tell observers, run its initial actions, start its activities, apply its self-sends. */
  async started(record: JobRecord, def: RegisteredMachine, started: Started): Promise<Job> {
    const job = toJob(record, def);
    const { relations } = started;
    this.#emit({ type: 'job.started', jobId: job.id, job });
    this.#logEntry('info', 'job started', { jobId: record.id, machine: def.id, version: def.version, state: job.value });
    this.#afterCommit(record.id, record.revision, started.plan, started.clean);
    relations.touched.delete(record.id);
    if (relations.deliveries.some((d) => d.jobId === record.id)) this.#pendingDrains.add(record.id);
    this.#afterRelations(relations);
    if (this.#pendingDrains.delete(record.id) && this.#process) {
      await this.drain(record.id);
      return this.#get(record.id);
    }
    return job;
  }

  /** Apply every pending event of a job, oldest first. Returns how many were settled. */
  drain(jobId: string): Promise<number> {
    return this.#withLock(jobId, async () => {
      let settled = 0;
      let conflicts = 0;
      for (;;) {
        const loaded = await this.load(jobId);
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
  async load(jobId: string): Promise<Loaded | undefined> {
    for (let round = 0; round < 3; round += 1) {
      const record = await (round === 0 ? this.#readKnown(jobId) : this.store.getJob(jobId));
      if (!record) return undefined;
      if (TERMINAL.has(record.status)) return { kind: 'terminal', record };
      const ready = this.readyFrom(record);
      if (ready) return ready;
      const outcome = await this.check(jobId);
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
  async check(jobId: string, known?: JobRecord): Promise<CheckOutcome> {
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
        reason = damageOf(record);
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
        // A job held for damage (by doctor, or a read) keeps the reason it was held with.
        if (record.quarantine !== reason && !(isDamage(reason) && record.quarantine !== null && isDamage(record.quarantine))) {
          await this.store.setQuarantine(jobId, reason, this.clock.now());
          this.#emit({ type: 'job.quarantined', jobId, reason });
          this.#logEntry('warn', 'job quarantined', { jobId, reason });
        }
        return 'quarantined';
      }
      // A job the store refused to commit stays held until its history and revision agree again
      // (a repaired row): releasing it would only fail the next commit the same way.
      if (record.quarantine?.startsWith(STORE_REFUSED) && (await this.store.history(jobId)).at(-1)?.revision !== record.revision) return 'quarantined';
      // A damaged row of another table (history, inbox, effects, timers, assets) is recorded as the
      // job's quarantine by the store that read it: it stays until the row is repaired (doctor).
      if (record.quarantine?.startsWith(DAMAGED_RECORD)) return 'quarantined';
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
  async applyInline(accept: NewInboxEvent, visible: JobRecord): Promise<Applied | undefined> {
    const loaded = this.readyFrom(visible) ?? (await this.load(accept.jobId));
    // Found unfit just now (its snapshot, its version): the caller hears so at once, and nothing of the event is written.
    if (loaded?.kind === 'held' && loaded.record.quarantine !== null) throw quarantined(accept.jobId, loaded.record.quarantine);
    if (!loaded || loaded.kind !== 'ready') return undefined;
    const result = await this.#applyEvent(loaded, accept.payload, { accept });
    return typeof result === 'object' ? result : undefined;
  }

  /**
   * Apply an activity's outcome event with the attempt's finish in one commit (the executor's
   * `finishApplying`), as one counted operation under the job's lock. Events queued before it
   * come first: the store refuses this commit then (a conflict, nothing written), and the
   * executor records the outcome on its own, queued behind them.
   */
  applyOutcome(jobId: string, event: NewInboxEvent, outcome: OutcomeInCommit): Promise<void> {
    return this.#unit(() =>
      this.#withLock(jobId, async () => {
        // From the record this runtime last knew (or the one the attempt's batch claim read, when
        // not older), unread: the commit itself refuses it (a conflict) when the job moved on, was
        // suspended, quarantined or cancelled meanwhile; then from a fresh read.
        const known = newer(this.#snapshots.get(jobId)?.record, outcome.job);
        const unread = known && known.suspendedAt === null ? this.readyFrom(known) : undefined;
        if (unread) unread.unread = true; // readyFrom's answer is this call's own
        if (unread && (await this.#applyEvent(unread, event.payload, { accept: event, outcome })) !== 'conflict') return;
        const loaded = await this.load(jobId);
        if (loaded?.kind !== 'ready' || loaded.record.suspendedAt !== null) return;
        await this.#applyEvent(loaded, event.payload, { accept: event, outcome });
      }),
    );
  }

  /** A record that can transition as it is (no quarantine, migration or corruption), hydrated or from the cache. */
  readyFrom(record: JobRecord): Extract<Loaded, { kind: 'ready' }> | undefined {
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
    this.remember(record, route.target, hydrated.snapshot, hydrated.actor);
    return { kind: 'ready', record, def: route.target, snapshot: hydrated.snapshot, actor: hydrated.actor };
  }

  /**
   * Keep the record and snapshot a commit produced (or a read hydrated): the job's next event
   * skips hydration, and its send reads only the columns that change without a commit. Bounded.
   */
  remember(record: JobRecord, def: RegisteredMachine, snapshot: AnyMachineSnapshot, actor?: unknown): void {
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
    // Read only where there is something to read: the hot path (no children, no parent) awaits nothing here.
    const book = stale || !(needsChildren(def) || record.parent) ? undefined : await this.#relationBook(record, def);
    const s = step({
      job: record,
      def,
      snapshot: loaded.snapshot,
      // A child job's transition needs its parent marker in scope: the cached actor has none.
      actor: def.scopeReusable && !record.parent ? loaded.actor : undefined,
      event: payload,
      source,
      now: this.clock.now(),
      stale,
      timerId,
      children: book?.children,
      parentEffect: book?.parentEffect,
      machines: this.machines,
      runner: this.runnerId,
    });
    crashPoint('before-commit');
    // The step's commit is this call's own: completed in place, not copied.
    if (loaded.unread) (s.commit as TransitionCommit).unread = { createdAt: record.createdAt, progress: record.progress };
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
    for (const childJob of relations.stopChildren) this.#track(this.#unit(() => this.stopJob(childJob)));
    if (relations.children.some((c) => c.effects?.some((e) => e.kind !== 'child'))) this.#track(this.#activities.pump());
    if (!this.#process) return;
    for (const jobId of relations.touched) this.#track(this.#unit(() => this.drain(jobId)));
  }

  /** Stop a child job whose invoking state was left: status `stopped`, its effects and timers cancelled, its own children stopped. */
  stopJob(jobId: string): Promise<void> {
    return stopChildJob(this.#deps, jobId);
  }

  /**
   * Submit a step's commit under this runner's lease (and, for an outcome applied with its event,
   * the attempt's finish), and keep what it produced. `prepared` is the caller's own (a step's,
   * made for this call): its lease, finish and claims are added to it in place.
   */
  async #commitOne(
    record: JobRecord,
    def: RegisteredMachine,
    next: AnyMachineSnapshot,
    prepared: Step['commit'],
    plan?: ActionPlan,
    outcome?: OutcomeInCommit,
  ): Promise<{ record: JobRecord } | 'conflict' | 'duplicate' | 'leased' | 'refused' | 'outcome-not-current'> {
    const now = prepared.job.at;
    const commit = prepared as TransitionCommit;
    commit.lease = this.#leaseFor(record.id, next.status === 'active' && this.#holdsWork(record.id, plan, outcome?.finish.id), now);
    if (outcome) commit.finish = outcome.finish;
    const claims = plan && commit.lease?.until != null ? this.#activities.claimsFor(plan.effects.create, now, outcome?.slot) : [];
    if (claims.length > 0) commit.claims = claims;
    // A slot the outcome frees and the job does not take: a batch claim of the backlog joins this commit's transaction.
    if (outcome?.slot) this.#activities.refill(outcome.slot);
    let result: CommitResult | undefined;
    try {
      result = await this.#submit(commit);
    } finally {
      this.#activities.claimsCommitted(plan?.effects.create ?? [], claims, result?.ok ? result.fence : null, def);
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
    const progress = result.progress !== undefined ? result.progress : commit.job.progress === undefined ? record.progress : commit.job.progress;
    const updated = committedRecord(record, result.revision, commit.job, def.version, progress, now);
    // The attempt's end is told before the transition it caused, as when it is recorded on its own.
    outcome?.recorded();
    // The job view and the event are built only for someone listening (the hot path has no one).
    if (this.#listeners.size > 0) {
      const job = toJob(updated, def);
      const t = commit.transition; // spelled out, not spread: drafts come in several shapes, and a spread of them is slow
      const transition = { eventId: t.eventId, eventType: t.eventType, payload: t.payload, from: t.from, to: t.to, outcome: t.outcome, error: t.error, at: t.at, jobId: record.id, revision: result.revision, runner: this.runnerId, fence: result.fence };
      this.#emit({ type: 'job.committed', jobId: job.id, job, transition });
    }
    if (TERMINAL.has(updated.status) && !TERMINAL.has(record.status)) {
      this.#logEntry('info', 'job finished', { jobId: record.id, status: updated.status, state: updated.value });
    }
    if (TERMINAL.has(updated.status)) this.#snapshots.delete(record.id);
    else this.remember(updated, def, next);
    return { record: updated };
  }

  /** Whether this runtime keeps the job's lease after a commit: its activities run (or are about to run) here. */
  #holdsWork(jobId: string, plan: ActionPlan | undefined, finishing?: string): boolean {
    if (plan && this.#activities.runsAny(plan.effects.create)) return true;
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
    if (plan.effects.create.length > 0) this.#activities.startClaimed(plan.effects.create);
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

}

/**
 * The job's record after a commit of `job` at `revision`: every field named, in one literal (one
 * shape for every step). `Object.assign({}, record, { … })` took ~5 µs per step here, ~13 µs when
 * `record` was itself made that way (each step's record is the previous step's): docs/performance.md,
 * "Object spread on Node 20".
 */
function committedRecord(record: JobRecord, revision: number, job: TransitionCommit['job'], machineVersion: string, progress: number | null, at: number): JobRecord {
  const updated = {
    id: record.id,
    machineId: record.machineId,
    machineVersion,
    revision,
    status: job.status,
    value: job.value,
    context: job.context,
    snapshot: job.snapshot,
    input: record.input,
    inputHash: record.inputHash,
    idempotencyKey: record.idempotencyKey,
    owner: record.owner,
    quarantine: record.quarantine,
    progress,
    cancelRequestedAt: record.cancelRequestedAt,
    cancelReason: record.cancelReason,
    suspendedAt: record.suspendedAt,
    suspendReason: record.suspendReason,
    parent: record.parent,
    lease: record.lease,
    createdAt: record.createdAt,
    updatedAt: at,
    // Every field of a record is named (a field added to JobRecord fails to compile here until it is).
  } satisfies Record<Exclude<keyof JobRecord, 'corruption'>, unknown>;
  if (record.corruption === undefined) return updated;
  return Object.assign(updated, { corruption: record.corruption });
}
