/**
 * The way in: `start` and `send` from validation (intake.ts) to the commit path (jobCommits.ts).
 * A new job is made by the pure `startStep` and created in one write, claiming its first
 * activities; an event is applied in the commit that accepts it (inline) when nothing waits
 * before it, else accepted into the job's inbox and drained in order. Backpressure refuses both
 * before anything is written; a repeat (an idempotency key, an event id) returns the first outcome.
 */
import type { Clock } from '../ports/clock.ts';
import type { JobRecord, JobStore, JsonValue, NewInboxEvent, Outcome } from '../ports/store.ts';
import { IdempotencyConflictError, JobNotFoundError, JobTerminalError, SpoolError, ValidationError } from '../base/errors.ts';
import { hashJson, inputHash } from '../base/json.ts';
import { sensitivePaths } from '../base/redaction.ts';
import type { MachineRegistry } from './registry.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { crashPoint } from './crashPoints.ts';
import { startStep, type Started } from '../step/step.ts';
import type { Job, SendOptions, SendResult, StartOptions, StartOrSendOptions, StartOrSendResult } from './api.ts';
import { redelivery, redeliveryId, type RedeliverOptions } from './redelivery.ts';
import type { RuntimeEvents } from './events.ts';
import { quarantined } from './quarantine.ts';
import { describeEnd, TERMINAL, type JobReader } from './jobView.ts';
import { checkId, checkSendOptions, requireOptions, type Intake } from './intake.ts';
import type { CommitBatcher } from './commits.ts';
import type { JobLocks } from './jobLocks.ts';
import type { BackgroundWork } from './background.ts';
import type { BacklogGauge } from './limits.ts';
import type { PreparedStart } from './schedules.ts';
import type { JobCommits } from './jobCommits.ts';
import type { ActivityExecutor } from './executor.ts';
import type { RuntimeParts } from './parts.ts';

/** A job id a caller chose: a valid id without "~" (Spool derives the ids of child and scheduled jobs with it). */
function checkJobId(jobId: string): void {
  checkId('job id', jobId);
  if (jobId.includes('~')) throw new ValidationError(`A job id must not contain "~": Spool derives the ids of child and scheduled jobs with it (got "${jobId}").`);
}

/** Items one `startMany` takes at most: one transaction's worth. */
export const MAX_START_MANY = 1000;

/** A start checked and ready: its machine, input as validated, job id (made here unless `requestedId`), key and input hash. */
interface StartRequest {
  def: RegisteredMachine;
  parsed: JsonValue;
  jobId: string;
  requestedId: string | undefined;
  key: string | null;
  inputHash: string;
}

/** `work` for item `index` of a `startMany`: a refusal names the item (same class and code, `details.item`). */
function ofItem<T>(index: number, work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof SpoolError && error.details['item'] === undefined) {
      error.message = `startMany item ${index}: ${error.message}`;
      Object.assign(error.details, { item: index });
    }
    throw error;
  }
}

/** A `startMany` item's options (its input aside), checked by name like `start`'s. */
function itemOptions(item: unknown): StartOptions {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) throw new ValidationError('A startMany item must be an object: { input, jobId?, idempotencyKey? }.');
  const { input: _input, ...options } = requireOptions(item as StartOptions & { input?: unknown }, 'startMany item', ['input', 'jobId', 'idempotencyKey']);
  return options;
}

/** What an earlier item of the same `startMany` will create, as the record a repeat is checked against. */
function requestRecord(r: StartRequest, owner: string | null): Pick<JobRecord, 'id' | 'owner' | 'idempotencyKey' | 'machineId' | 'inputHash'> {
  return { id: r.jobId, owner, idempotencyKey: r.key, machineId: r.def.id, inputHash: r.inputHash };
}

/** A write's outcome as its result, or its error thrown. */
function settled<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw outcome.error;
  return outcome.result;
}

/** What the way in is built with besides the shared parts. */
export interface EntryDeps extends RuntimeParts {
  owner: string | null;
  newId: () => string;
  intake: Intake;
  reader: JobReader;
  backlog: BacklogGauge;
  jobs: JobCommits;
  activities: Pick<ActivityExecutor, 'claimsFor' | 'claimsCommitted'>;
}

/** Start and send (see the file's comment). */
export class JobEntry {
  readonly store: JobStore;
  readonly clock: Clock;
  readonly registry: MachineRegistry;
  readonly runnerId: string;
  readonly #owner: string | null;
  readonly #newId: () => string;
  readonly #process: boolean;
  readonly #intake: Intake;
  readonly #reader: JobReader;
  readonly #backlog: BacklogGauge;
  readonly #events: RuntimeEvents;
  readonly #commits: CommitBatcher;
  readonly #locks: JobLocks;
  readonly #background: BackgroundWork;
  readonly #jobs: JobCommits;
  readonly #activities: EntryDeps['activities'];
  readonly #leases: Map<string, number>;
  readonly #pendingDrains: Set<string>;

  constructor(deps: EntryDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.registry = deps.registry;
    this.runnerId = deps.runnerId;
    this.#owner = deps.owner;
    this.#newId = deps.newId;
    this.#process = deps.process;
    this.#intake = deps.intake;
    this.#reader = deps.reader;
    this.#backlog = deps.backlog;
    this.#events = deps.events;
    this.#commits = deps.commits;
    this.#locks = deps.locks;
    this.#background = deps.background;
    this.#jobs = deps.jobs;
    this.#activities = deps.activities;
    this.#leases = deps.leases;
    this.#pendingDrains = deps.pendingDrains;
  }

  /** `start` (Runtime.start): a new job, or the one a repeated start names. */
  async start(machineId: string, input: unknown, options: StartOptions): Promise<Job> {
    const def = this.#machine(machineId);
    const request = this.#request(def, input, requireOptions(options, 'start', ['jobId', 'idempotencyKey']));
    const finding = this.#existing(request);
    const existing = finding === undefined ? undefined : await finding; // no lookup, no wait
    if (existing) return this.#sameStart(existing, request);
    const started = this.#startStep(request);
    await this.#backlog.admit(false); // backpressure (limits.ts): refused before anything is written; a repeated start returned above
    const [outcome] = await this.#create([started], def);
    const { record, created } = settled(outcome!);
    if (!created) return this.#sameStart(record, request);
    return this.#jobs.started(record, def, started);
  }

  /**
   * `startMany` (Runtime.startMany): the jobs of `items`, new ones created in one commit, in
   * order. Every item is checked first (its input, its options, a repeat against the job it
   * repeats, in the store or earlier in `items`): a refusal names the item and writes nothing.
   */
  async startMany(machineId: string, items: readonly unknown[]): Promise<Job[]> {
    const def = this.#machine(machineId);
    if (!Array.isArray(items)) throw new ValidationError('startMany takes an array of items, each { input, jobId?, idempotencyKey? }.');
    if (items.length > MAX_START_MANY) throw new ValidationError(`startMany takes at most ${MAX_START_MANY} items (got ${items.length}); split them into several calls.`, { items: items.length, limit: MAX_START_MANY });
    const requests = items.map((item, i) => ofItem(i, () => {
      const options = itemOptions(item);
      const input = (item as { input?: unknown }).input;
      return this.#request(def, input === undefined ? {} : input, options); // no input: `{}`, as `start` takes it
    }));
    const found = await Promise.all(requests.map((r) => this.#existing(r)));
    const jobs: (Job | undefined)[] = [];
    const first = new Map<string, number>(); // an earlier item's job id and key, to the item
    const news: number[] = [];
    const earlierOf = (r: StartRequest) => first.get(`id:${r.jobId}`) ?? (r.key === null ? undefined : first.get(`key:${r.key}`));
    requests.forEach((r, i) => {
      const stored = found[i];
      if (stored) return void (jobs[i] = ofItem(i, () => this.#sameStart(stored, r)));
      const earlier = earlierOf(r);
      // A repeat of an earlier item: checked as a repeated start is, against what that item creates.
      if (earlier !== undefined) return ofItem(i, () => this.#intake.checkSameStart(requestRecord(requests[earlier]!, this.#owner), r.def.id, r.inputHash, r.jobId, r.key, r.requestedId));
      first.set(`id:${r.jobId}`, i);
      if (r.key !== null) first.set(`key:${r.key}`, i);
      news.push(i);
    });
    const starts = news.map((i) => ofItem(i, () => this.#startStep(requests[i]!)));
    if (starts.length > 0) await this.#backlog.admit(false); // backpressure: refused before anything is written
    const outcomes = await this.#create(starts, def);
    const made = await Promise.all(outcomes.map(async (outcome, n) => {
      const i = news[n]!;
      const { record, created } = settled(outcome); // a store's refusal or fault: the write's, thrown as it is
      return created ? this.#jobs.started(record, def, starts[n]!) : ofItem(i, () => this.#sameStart(record, requests[i]!));
    }));
    news.forEach((i, n) => (jobs[i] = made[n]));
    // An item that repeated an earlier one of this call: that item's job.
    return requests.map((r, i) => jobs[i] ?? jobs[earlierOf(r)!]!);
  }

  /** The newest version of `machineId`, for a start. */
  #machine(machineId: string): RegisteredMachine {
    if (typeof machineId !== 'string') throw new ValidationError('A machine id must be a string.');
    return this.registry.latest(machineId);
  }

  /** A start's input validated and its options checked: what it creates, or repeats. */
  #request(def: RegisteredMachine, input: unknown, options: StartOptions): StartRequest {
    const parsed = this.#intake.validateInput(def, input);
    const jobId = options.jobId ?? this.#newId();
    if (options.jobId !== undefined) checkJobId(jobId);
    if (options.idempotencyKey !== undefined) checkId('idempotency key', options.idempotencyKey);
    return { def, parsed, jobId, requestedId: options.jobId, key: options.idempotencyKey ?? null, inputHash: inputHash(def.id, parsed) };
  }

  /** The job a start repeats, by its id or key. A job id this runtime just made (UUID v7) and no key: nothing can exist yet (createJob's own key check catches a race). */
  #existing(r: StartRequest): Promise<JobRecord | undefined> | undefined {
    return r.requestedId === undefined && r.key === null ? undefined : this.#intake.findExisting(r.jobId, r.key);
  }

  /** A new job's first transition (the pure step). */
  #startStep(r: StartRequest): Started {
    return startStep({ def: r.def, input: r.parsed, jobId: r.jobId, idempotencyKey: r.key, inputHash: r.inputHash, owner: this.#owner, runner: this.runnerId, now: this.clock.now(), machines: this.#jobs.machines });
  }

  /**
   * Create started jobs in one commit (group-committed with whatever else is queued), each with
   * its first activities claimed here; each outcome is the job made, or the one that exists.
   */
  async #create(starts: readonly Started[], def: RegisteredMachine): Promise<Outcome<{ record: JobRecord; created: boolean }>[]> {
    if (starts.length === 0) return [];
    const claims = starts.map((started) => {
      const c = this.#activities.claimsFor(started.job.effects ?? [], started.job.at);
      if (c.length > 0) started.job.claims = c;
      return c;
    });
    const results = await Promise.allSettled(this.#commits.submitCreates(starts.map((s) => s.job)));
    return starts.map((started, n) => {
      const result = results[n]!;
      const created = result.status === 'fulfilled' && result.value.created;
      this.#activities.claimsCommitted(started.job.effects ?? [], claims[n]!, created ? 1 : null, def);
      if (result.status === 'rejected') return { ok: false, error: result.reason };
      const record = result.value.job;
      if (created && claims[n]!.length > 0) this.#leases.set(started.job.id, 1);
      // The start's scope and snapshot are kept: the job's first event neither reads nor hydrates
      // it again. Not for a job whose first activities wait unclaimed in the backlog (its next
      // event is a backlog away; a cache of them only costs the collector).
      const waits = claims[n]!.length === 0 && (started.job.effects ?? []).some((e) => e.kind !== 'child');
      if (created && started.actor !== undefined && this.#process && !waits) this.#jobs.remember(record, def, started.snapshot, started.actor);
      return { ok: true, result: { record, created } };
    });
  }

  /** `send` (Runtime.send): the event applied inline, or accepted into the inbox and applied in order. */
  async send(jobId: string, event: unknown, options: SendOptions): Promise<SendResult> {
    options = checkSendOptions(options);
    const record = await this.#reader.visible(jobId, true);
    // An id made up here names the revision the event is about to be applied at: applied there
    // as it is accepted, the store finds it by that history row's key (no index entry to write).
    const eventId = options.eventId ?? `r${record.revision + 1}.${this.#newId()}`;

    const prior = options.eventId === undefined ? undefined : await this.store.getEvent(jobId, eventId);
    if (prior) {
      const def = this.registry.get(record.machineId, record.machineVersion);
      const payload = this.#intake.validateEvent(def, event);
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
    if (record.quarantine !== null && route && (await this.#locks.run(jobId, () => this.#jobs.check(jobId))) !== 'quarantined') {
      return this.send(jobId, event, options); // another runtime held it back; this one can run it
    }
    if (record.quarantine !== null || !route) {
      throw quarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
    }
    const payload = this.#intake.validateEvent(route.target, event);
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
      const inline = await this.#locks.run(jobId, () => this.#jobs.applyInline(accept, record));
      if (inline) {
        if (this.#pendingDrains.delete(jobId)) {
          await this.#jobs.drain(jobId);
          return this.#outcome(jobId, eventId, false, true);
        }
        return { jobId, eventId, status: inline.status, revision: inline.record.revision, error: inline.error, duplicate: false, job: this.#reader.view(inline.record) };
      }
    }
    const { event: stored, duplicate } = await this.store.acceptEvent(accept);
    if (!queues && !duplicate) this.#backlog.queued(); // the inline path could not take it: it waits in the inbox
    if (duplicate && stored.payloadHash !== accept.payloadHash) {
      throw new IdempotencyConflictError(`Event id "${eventId}" was already used for job ${jobId} with a different event.`, { jobId, eventId });
    }
    crashPoint('after-accept');
    this.#events.emit({ type: 'event.accepted', jobId, eventId, eventType: type });
    return this.#outcome(jobId, eventId, duplicate, options.wait ?? true);
  }

  /**
   * `startOrSend` (Runtime.startOrSend): the job created with the event in its inbox, in one
   * commit, or (it exists, or a concurrent caller created it first) the event sent to it. Either
   * way the event id is recorded once for the job, so concurrent callers converge. The input is
   * validated only when the job is created: an existing job keeps its own.
   */
  async startOrSend(machineId: string, jobId: string, input: unknown, event: unknown, options: StartOrSendOptions): Promise<StartOrSendResult> {
    if (typeof machineId !== 'string') throw new ValidationError('A machine id must be a string.');
    options = requireOptions(options, 'startOrSend', ['eventId', 'wait']);
    const sendOptions = checkSendOptions(options);
    checkJobId(jobId);
    const def = this.registry.latest(machineId);
    const payload = this.#intake.validateEvent(def, event);
    const eventId = sendOptions.eventId ?? this.#newId();
    const send = async (record: JobRecord): Promise<StartOrSendResult> => {
      if (record.owner !== this.#owner) throw new IdempotencyConflictError(`Job id "${jobId}" is taken; choose another id.`, { jobId });
      if (record.machineId !== def.id) {
        throw new IdempotencyConflictError(`Job ${jobId} is a job of machine ${record.machineId}, not ${def.id}.`, { jobId, machineId: record.machineId });
      }
      return { ...(await this.send(jobId, event, { ...sendOptions, eventId })), created: false };
    };
    const existing = await this.store.getJob(jobId);
    if (existing) return send(existing);
    const parsed = this.#intake.validateInput(def, input);
    const at = this.clock.now();
    const started = startStep({ def, input: parsed, jobId, idempotencyKey: null, inputHash: inputHash(def.id, parsed), owner: this.#owner, runner: this.runnerId, now: at, machines: this.#jobs.machines });
    await this.#backlog.admit(true);
    const accept: NewInboxEvent = { jobId, eventId, type: (payload as { type: string }).type, payload, payloadHash: hashJson(payload), at };
    started.job.deliveries = [...(started.job.deliveries ?? []), accept];
    const [outcome] = await this.#create([started], def);
    const { record, created } = settled(outcome!);
    if (!created) return send(record);
    crashPoint('after-accept');
    this.#events.emit({ type: 'event.accepted', jobId, eventId, eventType: accept.type });
    // Its first transitions (the event included) are drained by `started` (the inbox holds the event).
    if (this.#process) this.#pendingDrains.add(jobId);
    if (this.#process && (sendOptions.wait ?? true)) await this.#jobs.started(record, def, started);
    else this.#background.track(this.#jobs.started(record, def, started));
    return { ...(await this.#outcome(jobId, eventId, false, sendOptions.wait ?? true)), created: true };
  }

  /**
   * `redeliver` (Runtime.redeliver): a failed event accepted again as a new event,
   * `redeliver~<id>`, and applied on the job's current state (redelivery.ts). Asking again returns
   * the first redelivery's outcome.
   */
  async redeliver(jobId: string, eventId: string, options: RedeliverOptions): Promise<SendResult> {
    options = requireOptions(options, 'redeliver', ['force']);
    if (options.force !== undefined && typeof options.force !== 'boolean') throw new ValidationError('redeliver: force must be true or false.');
    checkId('event id', eventId);
    const record = await this.#reader.visible(jobId);
    const again = redeliveryId(eventId);
    if (await this.store.getEvent(jobId, again)) return this.#outcome(jobId, again, true, true);
    const route = this.registry.route(record.machineId, record.machineVersion);
    if (!TERMINAL.has(record.status) && (record.quarantine !== null || !route)) {
      throw quarantined(jobId, record.quarantine ?? `machine ${record.machineId}@${record.machineVersion} is not registered`);
    }
    const def = route?.target ?? this.registry.latest(record.machineId);
    const accept = redelivery(record, await this.store.getEvent(jobId, eventId), eventId, def, options.force === true, this.clock.now());
    if (accept.source === 'external') this.#intake.validateEvent(def, accept.payload); // the machine it runs on now still takes it
    const { duplicate } = await this.store.acceptEvent(accept);
    crashPoint('after-accept');
    if (!duplicate) {
      this.#events.emit({ type: 'event.accepted', jobId, eventId: accept.eventId, eventType: accept.type });
      this.#events.log('info', 'event redelivered', { jobId, eventId, redelivery: accept.eventId, force: options.force === true });
    }
    return this.#outcome(jobId, accept.eventId, duplicate, true);
  }

  /** The job a repeated `start` returns, once it is the same request (intake.ts). */
  #sameStart(record: JobRecord, r: StartRequest): Job {
    this.#intake.checkSameStart(record, r.def.id, r.inputHash, r.jobId, r.key, r.requestedId);
    return this.#reader.view(record);
  }

  /** What `send` resolves with: the event's record (applied first when it waits and `wait` is set). */
  async #outcome(jobId: string, eventId: string, duplicate: boolean, wait: boolean): Promise<SendResult> {
    let event = await this.store.getEvent(jobId, eventId);
    if (event && event.status === 'pending' && this.#process) {
      if (wait) await this.#jobs.drain(jobId);
      else this.#background.track(this.#jobs.drain(jobId));
      if (wait) event = await this.store.getEvent(jobId, eventId);
    }
    if (!event) throw new JobNotFoundError(jobId);
    const record = await this.#reader.visible(jobId);
    return {
      jobId,
      eventId,
      status: event.status,
      revision: event.revision,
      error: event.error,
      duplicate,
      job: this.#reader.view(record),
    };
  }

  /** A scheduled occurrence's new job (schedules.ts writes it with the occurrence): validated, its first transition made. */
  prepareStart(machineId: string, input: unknown, jobId: string, at: number): PreparedStart {
    const def = this.registry.latest(machineId);
    const parsed = this.#intake.validateInput(def, input);
    checkId('job id', jobId);
    const started = startStep({ def, input: parsed, jobId, idempotencyKey: null, inputHash: inputHash(def.id, parsed), owner: this.#owner, runner: this.runnerId, now: at, machines: this.#jobs.machines });
    return { job: started.job, sensitivePaths: sensitivePaths(parsed, def.sensitive), started: async (record: JobRecord) => void (await this.#jobs.started(record, def, started)) };
  }
}
