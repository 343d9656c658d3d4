import { createActor, createMachine, getNextTransitions, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { backoffDelay, eventSchemaFor, isStateMachine, type ActivityPolicy, type ErrorInfo, type JsonValue, type RegisteredMachine } from '../index.ts';
import { indexTransitions, type StaticTransition, type TransitionDefinitionLike } from './transitions.ts';

/**
 * A model of what Spool does with one job, used to generate and predict paths.
 *
 * XState's pure `transition()` knows the machine; it does not know what Spool does around it:
 * durable timers with absolute deadlines fired in due order, activities that are started after
 * the commit, retried with backoff, settled by token or interrupted by a crash, snapshots that
 * go through JSON between events, child machines run as child jobs. This model mirrors those
 * rules (from the public behaviour of the runtime), so that a path generated on it can be
 * replayed on the real runtime step by step and every step's state, context and history records
 * can be predicted and checked, for the job under test and for each of its child jobs.
 *
 * Child machines: an invoked child machine is a child job of its own (id
 * `<parent job id>~<invoke id>~r<parent revision>`), created in the parent's commit, with its own
 * inbox, timers and activities. The model keeps every child job next to the parent: events the
 * parent sends it (`sendTo`) go to its inbox, its `sendParent` events to the parent's, its final
 * state settles the parent's invocation (`xstate.done.actor.<invoke id>` with its output), and
 * the parent leaving the invoking state stops it (`xstate.stop`: its timers and activities
 * cancelled). Events of all jobs are applied in the order they reach the inboxes.
 *
 * The real runtime is the judge: a model that drifted from it shows up as a failing path test.
 */

/**
 * What a test does to the job in one step of a path. Plain JSON (it crosses process boundaries).
 * `child`, when present, names a child job by the invoke ids leading to it from the job under
 * test (`review`, or `review/lint` for a grandchild): the step acts on that child job.
 */
export type PathStep =
  /** `runtime.send(jobId, event)`. */
  | { via: 'send'; type: string; event: { type: string; [key: string]: JsonValue }; sample: number; child?: string }
  /** Move the clock to the runtime's next wake-up (`nextWakeAt()`) and `tick()`: due timers fire, due retries start. */
  | { via: 'time'; type: 'spool.time' }
  /** The waiting activity `actorId` finishes: `runtime.complete(token, output)`. */
  | { via: 'done'; type: string; actorId: string; output: JsonValue; sample: number; child?: string }
  /** The waiting activity `actorId` fails: `runtime.fail(token, error)`. */
  | { via: 'error'; type: string; actorId: string; error: JsonValue; sample: number; child?: string }
  /** The runtime dies while the attempt of `actorId` that started in the previous step is in flight; a new runtime recovers and ticks. */
  | { via: 'interrupt'; type: 'spool.interrupt'; actorId: string; child?: string };

/** One history record the runtime is expected to write. */
export interface PredictedRecord {
  eventType: string;
  /** `started`: the first record of a child job (`xstate.init`); the job under test's is implied. */
  outcome: 'applied' | 'ignored' | 'failed' | 'stale' | 'started';
  from: JsonValue;
  to: JsonValue;
}

/** A durable timer in the model (mirrors a `scheduled` row of the timers table). */
export interface ModelTimer {
  id: string;
  key: string;
  event: { type: string; [key: string]: JsonValue };
  dueAt: number;
}

/** An active invocation in the model (mirrors an `active` row of the effects table). */
export interface ModelEffect {
  id: string;
  actorId: string;
  src: string;
  /** `activity`: a fromPromise run by the runtime; `child`: a child job (its job id is this id). */
  kind: 'activity' | 'child';
  attempt: number;
  maxAttempts: number;
  unsafe: boolean;
  /** `waiting`: deferred, settled by a token (or, for a child, by its end); `backoff`: a retry is due at `nextRunAt`; `settled`: finished. */
  status: 'waiting' | 'backoff' | 'settled';
  nextRunAt: number | null;
  /** Its current attempt started during the step that produced this state. */
  fresh: boolean;
}

/** One job in the model: the job under test, or one of its child jobs. */
export interface ModelJob {
  /** Invoke ids from the job under test to this job, joined by `/`; `''` for the job under test. */
  path: string;
  jobId: string;
  /** Registered machine id: `<parent id>.<src>` for a child job. */
  machineId: string;
  /** For a child job: the parent job's id; else null. */
  parentJobId: string | null;
  /** For a child job: its invoke id in the parent; else null. */
  actorId: string | null;
  status: 'active' | 'done' | 'error' | 'stopped';
  machine: AnyMachineSnapshot;
  revision: number;
  timers: ModelTimer[];
  effects: ModelEffect[];
  /** History records written to this job by the step that produced this state. */
  records: PredictedRecord[];
  /** Static transitions of this job's machine taken (applied) during that step, always-transitions included. */
  taken: StaticTransition[];
}

/** An event that failed during a step, and why (an action threw, an unsupported action…). */
export interface ModelFailure {
  machineId: string;
  eventType: string;
  message: string;
}

/** The model's state: the job under test (these fields), and its child jobs. It is an XState-graph snapshot (status/output/error) too. */
export interface ModelState extends ModelJob {
  output: unknown;
  error: unknown;
  /** Milliseconds since the job started. */
  now: number;
  /**
   * Child jobs (and theirs), in creation order: running ones, ones that ended during the step
   * that produced this state, and ended ones with a timer left to fire.
   */
  children: ModelJob[];
  /** Events that failed during the step that produced this state. */
  failures: ModelFailure[];
  /** Event types applied (or recorded) during that step, in order, each with the path of its job. */
  trail: Array<{ path: string; eventType: string }>;
}

/** What sample functions see of a state. */
export interface StateView {
  value: JsonValue;
  context: JsonValue;
  status: ModelState['status'];
}

/** A sample payload, a list of them, or a function of the state giving them. */
export type Samples<T> = T | readonly T[] | ((state: StateView) => T | readonly T[]);

/** Samples and abstractions for the jobs of one machine. */
export interface JobOptions {
  /** Per event type: sample events (with or without `type`). */
  events: Record<string, Samples<Record<string, unknown>>>;
  /** Per invoke id or src: sample outputs of `done` steps. Default `[null]`. */
  outputs: Record<string, Samples<unknown>>;
  /** Per invoke id or src: sample errors of `error` steps. Default `[{ name: 'Error', message: 'sample failure' }]`. */
  errors: Record<string, Samples<unknown>>;
  /** Per src: how many attempts of every invocation fail (retryably) before one waits for its outcome. */
  failAttempts: Record<string, number>;
  /** Abstraction of the machine part of the state key. Default `{ value, context }`. */
  stateKey: ((state: StateView) => unknown) | undefined;
}

/** How the model was configured: the parts of path options it needs. */
export interface ModelConfig extends JobOptions {
  /** The definition as the runtime holds it (defaults resolved). */
  def: RegisteredMachine;
  jobId: string;
  /** Which activities may be interrupted by a crash mid-attempt: `unsafe` ones (default), `all`, or `none`. */
  interrupts: 'unsafe' | 'all' | 'none';
  /** Child machines by registered id (`<parent id>.<src>`, recursively): their definitions as registered, and their samples. */
  children?: Record<string, JobOptions & { def: RegisteredMachine }>;
}

type QueueItem =
  | { job: ModelJob; event: { type: string; [key: string]: JsonValue }; timer?: ModelTimer; effectId?: string }
  /** The runtime stops a child job after the commit of the parent transition that left the invoking state. */
  | { job: ModelJob; stop: true };

interface Traced {
  next: AnyMachineSnapshot;
  actions: ActionLike[];
  taken: TransitionDefinitionLike[];
}

interface ActionLike {
  type: string;
  params?: unknown;
  info?: { self?: unknown };
}

interface MachineInfo {
  def: RegisteredMachine;
  opts: JobOptions;
  index: Map<TransitionDefinitionLike, StaticTransition>;
  userTypes: string[];
  sampleCache: Map<string, Array<{ type: string; [key: string]: JsonValue }>>;
}

/**
 * The parent of a child job in the model: a child's `sendParent` resolves to it (the runtime
 * does the same with a marker of its own), and what is sent to it goes to the parent job's inbox.
 */
const PARENT_MARKER = createActor(createMachine({ id: 'spool.testing.parent' }));

/** Thrown when a sample is not usable. */
export class SampleError extends Error {
  override name = 'SampleError';
}

/** The model of one job of one machine definition, with its child jobs. */
export class JobModel {
  readonly config: ModelConfig;
  readonly machine: AnyStateMachine;
  readonly #machines = new Map<string, MachineInfo>();

  constructor(config: ModelConfig) {
    this.config = config;
    this.machine = config.def.machine;
    const add = (def: RegisteredMachine, opts: JobOptions) =>
      this.#machines.set(def.id, {
        def,
        opts,
        index: indexTransitions(def.machine),
        userTypes: [...def.eventTypes].filter((t) => !t.startsWith('xstate.') && !t.startsWith('spool.') && t !== '' && !t.includes('*')).sort(),
        sampleCache: new Map(),
      });
    add(config.def, config);
    for (const child of Object.values(config.children ?? {})) add(child.def, child);
  }

  /** `runtime.start(machineId, input)`: the initial state, its effects, timers and child jobs. */
  initial(input: unknown): ModelState {
    const root = this.#info(this.config.def.id);
    const parsed = this.#parseInput(input);
    const traced = trace(this.machine, (scope) => this.machine.getInitialSnapshot(scope as never, parsed) as AnyMachineSnapshot);
    if (traced.next.status === 'error') {
      throw new SampleError(`Machine ${this.config.def.id} cannot start with input ${JSON.stringify(parsed)}: ${errorText(traced.next.error)}`);
    }
    const state: ModelState = {
      path: '',
      jobId: this.config.jobId,
      machineId: this.config.def.id,
      parentJobId: null,
      actorId: null,
      status: traced.next.status as ModelState['status'],
      output: undefined,
      error: undefined,
      machine: rehydrate(this.machine, traced.next),
      revision: 1,
      now: 0,
      timers: [],
      effects: [],
      records: [],
      taken: traced.taken.flatMap((t) => staticOf(root, t)),
      children: [],
      failures: [],
      trail: [],
    };
    const plan = this.#plan(state, traced.actions, 1, 0);
    const relations = plan.problems.length === 0 ? this.#relations(state, state, plan, traced.next, 1) : undefined;
    if (plan.problems.length > 0 || !relations) throw new SampleError(`Machine ${this.config.def.id} cannot start durably: ${plan.problems.join('; ')}`);
    const queue: QueueItem[] = [];
    this.#applyPlan(state, state, plan, relations, queue);
    this.#pump(state, queue);
    this.#drain(state, queue);
    this.#sync(state);
    return state;
  }

  /** The state after one step. Pure: `state` is not changed. */
  step(state: ModelState, step: PathStep): ModelState {
    const clone = (job: ModelJob): ModelJob => ({
      ...job,
      timers: job.timers.map((t) => ({ ...t })),
      effects: job.effects.map((e) => ({ ...e, fresh: false })),
      records: [],
      taken: [],
    });
    // A child job that ended (and has no timer left to fire) never changes again: its last
    // prediction stands, and the model lets it go (keeps states small).
    const children = state.children.filter((c) => c.status === 'active' || c.timers.length > 0).map(clone);
    const next: ModelState = { ...state, ...clone(state), children, failures: [], trail: [] };
    const queue: QueueItem[] = [];
    switch (step.via) {
      case 'send':
        queue.push({ job: jobAt(next, step.child), event: step.event });
        this.#drain(next, queue);
        break;
      case 'time': {
        const wake = nextWake(next);
        if (wake === null) throw new Error('No timer or retry is scheduled: a time step is not possible here.');
        next.now = Math.max(next.now, wake);
        this.#tick(next, queue);
        break;
      }
      case 'done':
      case 'error': {
        const job = jobAt(next, step.child);
        const effect = job.effects.find((e) => e.kind === 'activity' && e.actorId === step.actorId && e.status === 'waiting');
        if (!effect) throw new Error(`No activity "${step.actorId}" is waiting for its outcome here.`);
        effect.status = 'settled';
        const event: { type: string; [key: string]: JsonValue } =
          step.via === 'done'
            ? { type: `xstate.done.actor.${effect.actorId}`, output: toJson(step.output), actorId: effect.actorId }
            : { type: `xstate.error.actor.${effect.actorId}`, error: failInfo(step.error) as unknown as JsonValue, actorId: effect.actorId };
        queue.push({ job, event, effectId: effect.id });
        this.#drain(next, queue);
        break;
      }
      case 'interrupt': {
        const before = jobAt(state, step.child);
        const effect = before.effects.find((e) => e.kind === 'activity' && e.actorId === step.actorId && e.fresh && e.status === 'waiting');
        const job = allJobs(next).find((j) => j.jobId === before.jobId);
        const mine = job?.effects.find((e) => e.id === effect?.id);
        if (!effect || !job || !mine) throw new Error(`No attempt of "${step.actorId}" started in the previous step: nothing to interrupt.`);
        // A new runtime opens and ticks: due timers fire first, then orphaned attempts are taken over.
        this.#fireDueTimers(next, queue);
        this.#drain(next, queue);
        if (job.status === 'active' && job.effects.includes(mine)) this.#interrupt(next, job, mine, queue);
        this.#pump(next, queue);
        this.#drain(next, queue);
        break;
      }
    }
    this.#sync(next);
    return next;
  }

  /**
   * The steps possible in a state: handled user events (each sample), time, outcomes of waiting
   * activities, interrupts; for the job under test, then for each running child job.
   */
  steps(state: ModelState): PathStep[] {
    if (state.status !== 'active') return [];
    const out: PathStep[] = [];
    this.#jobSteps(state, out, true);
    for (const child of state.children) if (child.status === 'active') this.#jobSteps(child, out, false);
    return out;
  }

  #jobSteps(job: ModelJob, out: PathStep[], root: boolean): void {
    const info = this.#info(job.machineId);
    const view = viewOf(job);
    const at = root ? {} : { child: job.path };
    for (const type of this.#handledTypes(info, job.machine)) {
      this.#eventSamples(info, type, view).forEach((event, i) => out.push({ via: 'send', type, event, sample: i + 1, ...at }));
    }
    if (root && nextWake(job as ModelState) !== null) out.push({ via: 'time', type: 'spool.time' });
    for (const effect of job.effects) {
      if (effect.kind !== 'activity' || effect.status !== 'waiting') continue;
      samplesOf(own(info.opts.outputs, effect.actorId) ?? own(info.opts.outputs, effect.src) ?? null, view).forEach((output, i) =>
        out.push({ via: 'done', type: `xstate.done.actor.${effect.actorId}`, actorId: effect.actorId, output: toJson(output), sample: i + 1, ...at }),
      );
      samplesOf(own(info.opts.errors, effect.actorId) ?? own(info.opts.errors, effect.src) ?? DEFAULT_ERROR, view).forEach((error, i) =>
        out.push({ via: 'error', type: `xstate.error.actor.${effect.actorId}`, actorId: effect.actorId, error: toJson(error), sample: i + 1, ...at }),
      );
      const interruptible = this.config.interrupts === 'all' || (this.config.interrupts === 'unsafe' && effect.unsafe);
      if (effect.fresh && interruptible) out.push({ via: 'interrupt', type: 'spool.interrupt', actorId: effect.actorId, ...at });
    }
  }

  /**
   * The graph key of a state: the (abstracted) machine state plus timers and activities relative
   * to now, of the job under test and of each child job that can still move.
   */
  key(state: ModelState): string {
    const part = (job: ModelJob) => {
      const info = this.#info(job.machineId);
      const view = viewOf(job);
      const machinePart = info.opts.stateKey ? info.opts.stateKey(view) : { value: view.value, context: view.context };
      return [
        machinePart,
        job.status,
        job.timers.map((t) => [t.key, t.event, t.dueAt - state.now]),
        job.effects.map((e) => [e.actorId, e.src, e.attempt, e.status, e.nextRunAt === null ? null : e.nextRunAt - state.now, e.fresh]),
      ];
    };
    const live = state.children.filter((c) => c.status === 'active' || c.timers.length > 0);
    return JSON.stringify(live.length === 0 ? part(state) : [...part(state), live.map((c) => [c.path, ...part(c)])]);
  }

  #info(machineId: string): MachineInfo {
    const info = this.#machines.get(machineId);
    if (!info) throw new Error(`spool/testing: machine ${machineId} is not part of this model.`);
    return info;
  }

  /** All sample events of a type, validated by the definition's schema as the runtime would. */
  #eventSamples(info: MachineInfo, type: string, view: StateView): Array<{ type: string; [key: string]: JsonValue }> {
    const described = own(info.opts.events, type);
    const stable = typeof described !== 'function';
    const cached = stable ? info.sampleCache.get(type) : undefined;
    if (cached) return cached;
    const raw = samplesOf(described ?? {}, view);
    const parsed = raw.map((sample, i) => this.#parseEvent(info, type, sample, i + 1));
    if (stable) info.sampleCache.set(type, parsed);
    return parsed;
  }

  #parseEvent(info: MachineInfo, type: string, sample: unknown, n: number): { type: string; [key: string]: JsonValue } {
    const where = info.def.id === this.config.def.id ? `machine ${info.def.id}` : `child machine ${info.def.id}`;
    if (sample === null || typeof sample !== 'object' || Array.isArray(sample)) {
      throw new SampleError(`Sample ${n} of event ${type} for ${where} is not an object.`);
    }
    const s = sample as Record<string, unknown>;
    if (s['type'] !== undefined && s['type'] !== type) {
      throw new SampleError(`Sample ${n} of event ${type} for ${where} has type "${String(s['type'])}".`);
    }
    const event = { ...s, type };
    const schema = eventSchemaFor(info.def, type);
    if (!schema) return toJson(event) as { type: string; [key: string]: JsonValue };
    const result = schema.safeParse(event);
    if (!result.success) {
      throw new SampleError(
        `Sample ${n} of event ${type} for ${where} is rejected by its schema (${issues(result.error)}): give a valid one in \`events: { ${type}: { … } }\`.`,
      );
    }
    return toJson(result.data) as { type: string; [key: string]: JsonValue };
  }

  #parseInput(input: unknown): JsonValue {
    const json = toJson(input ?? {});
    const schema = this.config.def.input;
    if (!schema) return json;
    const result = schema.safeParse(json);
    if (!result.success) {
      throw new SampleError(
        `Input ${JSON.stringify(json)} is rejected by the input schema of ${this.config.def.id} (${issues(result.error)}): ` +
          `give a valid one as \`input\` in the path-test options (for \`spool test\`: export \`pathTests = { '${this.config.def.id}': { input: … } }\` from the machines module).`,
      );
    }
    return toJson(result.data);
  }

  /** User event types the snapshot has a transition for (wildcards expanded to the machine's own types). */
  #handledTypes(info: MachineInfo, snapshot: AnyMachineSnapshot): string[] {
    const types = new Set<string>();
    for (const t of getNextTransitions(snapshot) as TransitionDefinitionLike[]) {
      const type = t.eventType;
      if (!type || type.startsWith('xstate.')) continue;
      if (type === '*') info.userTypes.forEach((u) => types.add(u));
      // As XState matches them: `user.*` takes `user` and every `user.…`.
      else if (type.endsWith('.*')) info.userTypes.filter((u) => u === type.slice(0, -2) || u.startsWith(type.slice(0, -1))).forEach((u) => types.add(u));
      else if (!type.startsWith('spool.')) types.add(type);
    }
    return [...types].sort();
  }

  /** Fire every timer due at `now`, drain, then start due retries: what `tick()` does. */
  #tick(state: ModelState, queue: QueueItem[]): void {
    this.#fireDueTimers(state, queue);
    this.#drain(state, queue);
    this.#pump(state, queue);
    this.#drain(state, queue);
  }

  /** Every due timer of every job, in (due time, id) order: the order `tick()` fires them into the inboxes. */
  #fireDueTimers(state: ModelState, queue: QueueItem[]): void {
    const due: Array<{ job: ModelJob; timer: ModelTimer }> = [];
    for (const job of allJobs(state)) {
      for (const timer of job.timers) if (timer.dueAt <= state.now) due.push({ job, timer });
      job.timers = job.timers.filter((t) => t.dueAt > state.now);
    }
    due.sort((a, b) => timerOrder(a.timer, b.timer));
    for (const { job, timer } of due) queue.push({ job, event: timer.event, timer });
  }

  /**
   * Apply queued events oldest first, as the runtime's drains do: each job applies its inbox in
   * order; an event for an ended job is rejected (no history); an outcome of an invocation that
   * is no longer current, or a cancelled timer's event, is recorded as stale.
   */
  #drain(state: ModelState, queue: QueueItem[]): void {
    const cancelled = new Set<string>();
    while (queue.length > 0) {
      const item = queue.shift()!;
      const job = item.job;
      if ('stop' in item) {
        this.#stopJob(state, job);
        continue;
      }
      if (job.status !== 'active') continue; // rejected: an ended job writes no history
      if (item.timer && cancelled.has(item.timer.id)) {
        this.#record(state, job, item.event.type, 'stale');
        continue;
      }
      if (item.effectId !== undefined && !job.effects.some((e) => e.id === item.effectId)) {
        this.#record(state, job, item.event.type, 'stale');
        continue;
      }
      const info = this.#info(job.machineId);
      const machine = info.def.machine;
      const from = toJson(job.machine.value);
      let traced: Traced | undefined;
      let failure: string | undefined;
      try {
        traced = trace(
          machine,
          (scope) => machine.transition(job.machine, structuredClone(item.event) as AnyEventObject, scope as never) as AnyMachineSnapshot,
          job.parentJobId === null ? undefined : PARENT_MARKER,
        );
      } catch (error) {
        failure = errorText(error);
      }
      const revision = job.revision + 1;
      let outcome: PredictedRecord['outcome'] = 'applied';
      let plan: Plan | undefined;
      let relations: Relations | undefined;
      if (!traced) outcome = 'failed';
      // XState hands back the very snapshot it was given, with no action, when nothing handled the event.
      else if (traced.next === job.machine && traced.actions.length === 0) outcome = 'ignored';
      else if (traced.next.status === 'error') {
        outcome = 'failed';
        failure = errorText(traced.next.error);
      } else {
        plan = this.#plan(job, traced.actions, revision, state.now);
        if (plan.problems.length === 0) relations = this.#relations(state, job, plan, traced.next, revision);
        if (plan.problems.length > 0) {
          outcome = 'failed';
          failure = plan.problems.join('; ');
        }
      }
      job.revision = revision;
      // A transition that changed nothing is still the one XState took: it counts as covered.
      if (outcome === 'ignored' && traced) job.taken.push(...traced.taken.flatMap((t) => staticOf(info, t)));
      if (outcome !== 'applied' || !traced || !plan || !relations) {
        job.records.push({ eventType: item.event.type, outcome, from, to: from });
        state.trail.push({ path: job.path, eventType: item.event.type });
        if (failure !== undefined) state.failures.push({ machineId: job.machineId, eventType: item.event.type, message: failure });
        continue;
      }
      job.machine = rehydrate(machine, traced.next);
      job.status = traced.next.status as ModelJob['status'];
      job.records.push({ eventType: item.event.type, outcome, from, to: toJson(job.machine.value) });
      state.trail.push({ path: job.path, eventType: item.event.type });
      job.taken.push(...traced.taken.flatMap((t) => staticOf(info, t)));
      for (const key of plan.timers.cancel) {
        for (const q of queue) if ('timer' in q && q.timer && q.job === job && q.timer.key === key) cancelled.add(q.timer.id);
      }
      this.#applyPlan(state, job, plan, relations, queue);
      if (plan.effects.create.length > 0 || relations.spawned.some((c) => c.effects.some((e) => e.kind === 'activity'))) this.#pump(state, queue);
    }
  }

  #record(state: ModelState, job: ModelJob, eventType: string, outcome: PredictedRecord['outcome']): void {
    job.revision += 1;
    const v = toJson(job.machine.value);
    job.records.push({ eventType, outcome, from: v, to: v });
    state.trail.push({ path: job.path, eventType });
  }

  /** What the runtime does to a child job whose parent left the invoking state: `xstate.stop`, everything of it cancelled, its own children stopped. */
  #stopJob(state: ModelState, job: ModelJob): void {
    if (job.status !== 'active') return;
    const v = toJson(job.machine.value);
    job.revision += 1;
    job.status = 'stopped';
    job.records.push({ eventType: 'xstate.stop', outcome: 'applied', from: v, to: v });
    const children = job.effects.filter((e) => e.kind === 'child').map((e) => e.id);
    job.effects = [];
    job.timers = [];
    for (const id of children) {
      const child = state.children.find((c) => c.jobId === id);
      if (child) this.#stopJob(state, child);
    }
  }

  /** Write what a committed transition asked for, in the order the runtime's commit writes it to the inboxes. */
  #applyPlan(state: ModelState, job: ModelJob, plan: Plan, relations: Relations, queue: QueueItem[]): void {
    for (const actorId of plan.effects.deactivate) job.effects = job.effects.filter((e) => e.actorId !== actorId);
    for (const key of plan.timers.cancel) job.timers = job.timers.filter((t) => t.key !== key);
    job.effects.push(...plan.effects.create, ...relations.childEffects);
    job.timers.push(...plan.timers.schedule);
    state.children.push(...relations.spawned);
    queue.push(...relations.initial);
    queue.push(...plan.deliveries.map((event) => ({ job, event })));
    queue.push(...relations.deliveries);
    if (relations.settle) {
      relations.settle.effect.status = 'settled';
      queue.push(relations.settle.item);
    }
    queue.push(...relations.stop.map((child) => ({ job: child, stop: true as const })));
  }

  /**
   * What a transition means for other jobs (as the runtime's relations): child machines it
   * invoked become child jobs, its `sendTo` a child and `sendParent` go to those jobs' inboxes, a
   * child that reached its final state settles its invocation in the parent, and children of
   * left states are stopped. Problems (a send to no running child…) go to `plan.problems`.
   */
  #relations(state: ModelState, job: ModelJob, plan: Plan, next: AnyMachineSnapshot, revision: number): Relations {
    const out: Relations = { spawned: [], childEffects: [], initial: [], deliveries: [], stop: [] };
    // Child jobs of current invocations, by invoke id; null: one that ended (what is sent to it is rejected).
    const live = new Map<string, ModelJob | null>();
    for (const e of job.effects) {
      if (e.kind === 'child') live.set(e.actorId, state.children.find((c) => c.jobId === e.id) ?? null);
    }
    for (const actorId of plan.effects.deactivate) {
      const child = live.get(actorId);
      if (child) out.stop.push(child);
      live.delete(actorId);
    }
    for (const spawn of plan.spawns) {
      const child = this.#spawn(state, job, spawn, revision, out, plan.problems);
      if (child) live.set(spawn.actorId, child);
    }
    for (const send of plan.childSends) {
      const child = live.get(send.actorId);
      if (child === undefined) {
        plan.problems.push(`sendTo ${send.actorId}: no running child machine with that id`);
        continue;
      }
      if (child) out.deliveries.push({ job: child, event: send.event });
    }
    if (job.parentJobId !== null) {
      const parent = allJobs(state).find((j) => j.jobId === job.parentJobId);
      if (parent) {
        for (const event of plan.parentSends) out.deliveries.push({ job: parent, event });
        const effect = parent.effects.find((e) => e.id === job.jobId);
        if (next.status === 'done' && effect && effect.status === 'waiting') {
          const event = { type: `xstate.done.actor.${effect.actorId}`, output: toJson(next.output ?? null), actorId: effect.actorId };
          out.settle = { effect, item: { job: parent, event, effectId: effect.id } };
        }
      }
    }
    return out;
  }

  /** A child job for an invoked child machine (with its own children), as the runtime creates it in the parent's commit. */
  #spawn(state: ModelState, parent: ModelJob, spawn: Plan['spawns'][number], revision: number, out: Relations, problems: string[]): ModelJob | undefined {
    const info = this.#machines.get(`${parent.machineId}.${spawn.src}`);
    if (!info) {
      problems.push(`child machine "${spawn.src}" is not registered with ${parent.machineId}`);
      return undefined;
    }
    const machine = info.def.machine;
    const jobId = `${parent.jobId}~${spawn.actorId}~r${revision}`;
    let traced: Traced;
    try {
      traced = trace(machine, (scope) => machine.getInitialSnapshot(scope as never, spawn.input) as AnyMachineSnapshot, PARENT_MARKER);
    } catch (error) {
      problems.push(`child machine "${spawn.src}" could not start: ${errorText(error)}`);
      return undefined;
    }
    const value = toJson(traced.next.value);
    const child: ModelJob = {
      path: parent.path === '' ? spawn.actorId : `${parent.path}/${spawn.actorId}`,
      jobId,
      machineId: info.def.id,
      parentJobId: parent.jobId,
      actorId: spawn.actorId,
      status: traced.next.status as ModelJob['status'],
      machine: rehydrate(machine, traced.next),
      revision: 1,
      timers: [],
      effects: [],
      records: [{ eventType: 'xstate.init', outcome: 'started', from: null, to: value }],
      taken: traced.taken.flatMap((t) => staticOf(info, t)),
    };
    const plan = this.#plan(child, traced.actions, 1, state.now);
    problems.push(...plan.problems);
    if (plan.childSends.length > 0) problems.push(`child machine "${spawn.src}" sends to its own children on entry; not supported`);
    child.effects.push(...plan.effects.create);
    child.timers.push(...plan.timers.schedule);
    out.childEffects.push({ id: jobId, actorId: spawn.actorId, src: spawn.src, kind: 'child', attempt: 1, maxAttempts: 1, unsafe: false, status: 'waiting', nextRunAt: null, fresh: false });
    out.spawned.push(child);
    out.initial.push(...plan.deliveries.map((event) => ({ job: child, event })));
    // Its own children, created in the same commit.
    const inner: Relations = { spawned: [], childEffects: [], initial: [], deliveries: [], stop: [] };
    for (const s of plan.spawns) this.#spawn(state, child, s, 1, inner, problems);
    child.effects.push(...inner.childEffects);
    out.spawned.push(...inner.spawned);
    out.initial.push(...inner.initial, ...inner.deliveries);
    for (const event of plan.parentSends) out.deliveries.push({ job: parent, event });
    return child;
  }

  /** Start every activity that is new (attempt 0) or due for a retry, of every running job: what the runtime's pump does. */
  #pump(state: ModelState, queue: QueueItem[]): void {
    for (let guard = 0; guard < 1000; guard += 1) {
      const due = allJobs(state)
        .filter((job) => job.status === 'active')
        .flatMap((job) =>
          job.effects
            .filter((e) => e.kind === 'activity' && (e.attempt === 0 || (e.status === 'backoff' && e.nextRunAt !== null && e.nextRunAt <= state.now)))
            .map((effect) => ({ job, effect })),
        )
        .sort((a, b) => (a.effect.nextRunAt ?? 0) - (b.effect.nextRunAt ?? 0));
      const first = due[0];
      if (!first) return;
      this.#startAttempt(state, first.job, first.effect, queue);
    }
  }

  /** One attempt of the scripted stand-in: fail retryably `failAttempts` times, then wait for the outcome. */
  #startAttempt(state: ModelState, job: ModelJob, effect: ModelEffect, queue: QueueItem[]): void {
    const info = this.#info(job.machineId);
    effect.attempt += 1;
    effect.nextRunAt = null;
    effect.fresh = true;
    const failures = info.opts.failAttempts[effect.src] ?? 0;
    if (effect.attempt > failures) {
      effect.status = 'waiting';
      return;
    }
    const error: ErrorInfo = { name: 'Error', message: scriptedFailureMessage(effect.src, effect.attempt) };
    const policy: ActivityPolicy = info.def.activities[effect.src] ?? {};
    const retry = effect.attempt < effect.maxAttempts && (policy.retryOn ? policy.retryOn(error) : true);
    if (retry) {
      effect.status = 'backoff';
      effect.nextRunAt = state.now + backoffDelay(policy, effect.attempt, effect.id);
      return;
    }
    effect.status = 'settled';
    const payload = { ...error, code: 'SPOOL_RETRIES_EXHAUSTED', attempts: effect.attempt };
    queue.push({ job, event: { type: `xstate.error.actor.${effect.actorId}`, error: payload, actorId: effect.actorId }, effectId: effect.id });
  }

  /** What recovery does with an attempt whose runner died. */
  #interrupt(state: ModelState, job: ModelJob, effect: ModelEffect, queue: QueueItem[]): void {
    let error: ErrorInfo | undefined;
    if (effect.unsafe) {
      error = {
        name: 'IndeterminateOutcomeError',
        message: `Attempt ${effect.attempt} of ${effect.src} was interrupted and it is unsafe to repeat; its outcome is unknown. Reconcile with the provider.`,
        code: 'SPOOL_INDETERMINATE',
      };
    } else if (effect.attempt >= effect.maxAttempts) {
      error = {
        name: 'RetriesExhausted',
        message: `Attempt ${effect.attempt} of ${effect.maxAttempts} of ${effect.src} was interrupted and no attempts are left.`,
        code: 'SPOOL_RETRIES_EXHAUSTED',
      };
    }
    if (error) {
      effect.status = 'settled';
      queue.push({ job, event: { type: `xstate.error.actor.${effect.actorId}`, error: error as unknown as JsonValue, actorId: effect.actorId }, effectId: effect.id });
      this.#drain(state, queue);
      return;
    }
    this.#startAttempt(state, job, effect, queue);
  }

  /** Turn one transition's actions into effects, timers, child jobs and deliveries, as the runtime plans them. */
  #plan(job: ModelJob, actions: readonly ActionLike[], revision: number, now: number): Plan {
    const info = this.#info(job.machineId);
    const jobId = job.jobId;
    const isChild = job.parentJobId !== null;
    const plan: Plan = {
      effects: { create: [], deactivate: [] },
      timers: { schedule: [], cancel: [] },
      deliveries: [],
      spawns: [],
      childSends: [],
      parentSends: [],
      problems: [],
    };
    const actors = (info.def.machine.implementations.actors ?? {}) as Record<string, unknown>;
    actions.forEach((action, index) => {
      const params = (action.params ?? {}) as Record<string, unknown>;
      switch (action.type) {
        case 'xstate.spawnChild': {
          const actorId = String(params['id'] ?? '');
          const src = params['src'];
          if (typeof src !== 'string' || !(src in actors)) {
            plan.problems.push(`actor "${actorId}" uses inline logic`);
            break;
          }
          if (/^x:\d+$/.test(actorId)) {
            plan.problems.push(`actor of "${src}" has a generated id (${actorId})`);
            break;
          }
          if (isStateMachine(actors[src])) {
            plan.spawns.push({ actorId, src, input: toJson(params['input'] ?? null) });
            break;
          }
          const policy = info.def.activities[src] ?? {};
          plan.effects.create.push({
            id: `${jobId}~${actorId}~r${revision}`,
            actorId,
            src,
            kind: 'activity',
            attempt: 0,
            maxAttempts: Math.max(1, policy.maxAttempts ?? 3),
            unsafe: policy.unsafeToRepeat === true,
            status: 'waiting',
            nextRunAt: null,
            fresh: false,
          });
          break;
        }
        case 'xstate.stopChild': {
          const ref = (params['actorRef'] ?? params) as { id?: unknown };
          if (typeof ref.id === 'string') plan.effects.deactivate.push(ref.id);
          break;
        }
        case 'xstate.raise': {
          const delay = params['delay'];
          if (typeof delay !== 'number') break;
          const key = typeof params['id'] === 'string' ? params['id'] : `anon~r${revision}~${index}`;
          plan.timers.schedule.push({ id: `${jobId}~${key}~r${revision}`, key, event: toJson(params['event']) as ModelTimer['event'], dueAt: now + delay });
          break;
        }
        case 'xstate.sendTo': {
          const to = params['to'] as { id?: unknown } | string | undefined;
          const self = action.info?.self as { id?: unknown } | undefined;
          const event = toJson(params['event']) as ModelTimer['event'];
          const delay = params['delay'];
          if (isChild && to === PARENT_MARKER) {
            if (typeof delay === 'number') plan.problems.push('a delayed sendParent is not durable; delay in the parent instead');
            else plan.parentSends.push(event);
            break;
          }
          // A string: an actor invoked in this same microstep, not yet among the snapshot's children.
          const target = typeof to === 'string' ? to : to && to !== self && to.id !== self?.id && typeof to.id === 'string' ? to.id : undefined;
          if (target !== undefined) {
            if (typeof delay === 'number') plan.problems.push(`a delayed sendTo ${target} is not durable; delay with after/raise and send on arrival`);
            else plan.childSends.push({ actorId: target, event });
            break;
          }
          if (!to) {
            plan.problems.push(`sendTo ${String(params['targetId'] ?? '?')}: no such actor`);
            break;
          }
          if (typeof delay === 'number') {
            const key = typeof params['id'] === 'string' ? params['id'] : `anon~r${revision}~${index}`;
            plan.timers.schedule.push({ id: `${jobId}~${key}~r${revision}`, key, event, dueAt: now + delay });
          } else {
            plan.deliveries.push(event);
          }
          break;
        }
        case 'xstate.cancel':
          if (typeof params['sendId'] === 'string') plan.timers.cancel.push(params['sendId']);
          break;
        default:
          break;
      }
    });
    return plan;
  }

  /** Keep the graph-snapshot fields in step with the machine snapshot. */
  #sync(state: ModelState): void {
    state.status = state.machine.status as ModelState['status'];
    state.output = state.machine.output;
    state.error = state.machine.error;
  }
}

interface Plan {
  effects: { create: ModelEffect[]; deactivate: string[] };
  timers: { schedule: ModelTimer[]; cancel: string[] };
  deliveries: Array<ModelTimer['event']>;
  /** Child machines invoked: each becomes a child job. */
  spawns: Array<{ actorId: string; src: string; input: JsonValue }>;
  /** Events for child jobs, by invoke id. */
  childSends: Array<{ actorId: string; event: ModelTimer['event'] }>;
  /** Events for the parent job (`sendParent`). */
  parentSends: Array<ModelTimer['event']>;
  problems: string[];
}

/** What a transition does to other jobs. */
interface Relations {
  /** New child jobs (and theirs), in creation order. */
  spawned: ModelJob[];
  /** The parent's `child` effects for them. */
  childEffects: ModelEffect[];
  /** The new child jobs' own first deliveries (self-sends of their initial state, their children's first messages). */
  initial: QueueItem[];
  /** Events to children (`sendTo`) and to the parent (`sendParent`), in commit order. */
  deliveries: QueueItem[];
  /** The parent's invocation this (child) job settles by reaching its final state. */
  settle?: { effect: ModelEffect; item: QueueItem };
  /** Child jobs to stop after the commit. */
  stop: ModelJob[];
}

const DEFAULT_ERROR = [{ name: 'Error', message: 'sample failure' }];

/** The message of the scripted stand-in's retryable failures. */
export function scriptedFailureMessage(src: string, attempt: number): string {
  return `scripted failure of ${src} (attempt ${attempt})`;
}

/** The job under test and every child job. */
export function allJobs(state: ModelState): ModelJob[] {
  return [state, ...state.children];
}

/** The job a step acts on: the job under test, or the running child job at `child` (invoke ids joined by `/`). */
export function jobAt(state: ModelState, child: string | undefined): ModelJob {
  if (child === undefined || child === '') return state;
  const job = state.children.filter((c) => c.path === child && c.status === 'active').at(-1);
  if (!job) throw new Error(`No child job "${child}" is running here.`);
  return job;
}

/** When the runtime next wakes up: the earliest timer or retry of any job (a stopped child's are cancelled). */
export function nextWake(state: ModelState): number | null {
  let wake: number | null = null;
  for (const job of allJobs(state)) {
    for (const t of job.timers) wake = wake === null ? t.dueAt : Math.min(wake, t.dueAt);
    for (const e of job.effects) if (e.status === 'backoff' && e.nextRunAt !== null) wake = wake === null ? e.nextRunAt : Math.min(wake, e.nextRunAt);
  }
  return wake;
}

/** What `runtime.fail(token, error)` turns an error payload into. */
export function failInfo(payload: unknown): ErrorInfo {
  const p = toJson(payload);
  return p !== null && typeof p === 'object' && !Array.isArray(p)
    ? { name: typeof p['name'] === 'string' ? p['name'] : 'Error', message: typeof p['message'] === 'string' ? p['message'] : JSON.stringify(p) }
    : { name: 'Error', message: String(p) };
}

export function viewOf(job: ModelJob): StateView {
  return { value: toJson(job.machine.value), context: toJson(job.machine.context), status: job.status };
}

export function samplesOf<T>(samples: Samples<T>, view: StateView): T[] {
  const resolved = typeof samples === 'function' ? (samples as (s: StateView) => T | readonly T[])(view) : samples;
  return Array.isArray(resolved) ? [...(resolved as readonly T[])] : [resolved as T];
}

function staticOf(info: MachineInfo, t: TransitionDefinitionLike): StaticTransition[] {
  const s = info.index.get(t);
  return s ? [s] : [];
}

function timerOrder(a: ModelTimer, b: ModelTimer): number {
  return a.dueAt - b.dueAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** JSON round trip: what the runtime stores. */
export function toJson(value: unknown): JsonValue {
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

/** A snapshot as the runtime sees it on the next event: persisted, stored as JSON, restored. */
function rehydrate(machine: AnyStateMachine, snapshot: AnyMachineSnapshot): AnyMachineSnapshot {
  const json = JSON.parse(JSON.stringify(machine.getPersistedSnapshot(snapshot)));
  return createActor(machine, { snapshot: json }).getSnapshot() as AnyMachineSnapshot;
}

/**
 * Run one macrostep like XState's pure `transition()`, and also record which transition
 * definitions each microstep took (XState reports them on its `@xstate.microstep` inspection
 * events), so always-transitions and guard branches are known exactly. A child job's machine
 * runs with the parent marker as its parent, so its `sendParent` can be recognised.
 */
function trace(machine: AnyStateMachine, run: (scope: unknown) => AnyMachineSnapshot, parent?: unknown): Traced {
  const taken: TransitionDefinitionLike[] = [];
  const actions: ActionLike[] = [];
  let recording = false;
  const inspect = (event: { type: string }) => {
    if (!recording || event.type !== '@xstate.microstep') return;
    const transitions = (event as { _transitions?: TransitionDefinitionLike[] })._transitions;
    if (!Array.isArray(transitions)) throw new Error('xstate no longer reports the transitions of a microstep (`_transitions`); spool/testing needs an update.');
    taken.push(...transitions);
  };
  // An actor with a parent joins the parent's system, and XState inspects at the system level only.
  const self = createActor(machine, (parent === undefined ? { inspect } : { parent }) as never);
  const system = (self as unknown as { system: { inspect: (observer: unknown) => { unsubscribe: () => void } } }).system;
  const inspection = parent === undefined ? undefined : system.inspect(inspect);
  const scope = {
    self,
    defer: () => undefined,
    id: '',
    logger: () => undefined,
    sessionId: '',
    stopChild: () => undefined,
    system,
    emit: () => undefined,
    actionExecutor: (action: ActionLike) => {
      actions.push(action);
    },
  };
  recording = true;
  try {
    const next = run(scope);
    return { next, actions, taken };
  } finally {
    recording = false;
    inspection?.unsubscribe();
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
}

function issues(error: unknown): string {
  const list = (error as { issues?: Array<{ path: PropertyKey[]; message: string }> }).issues ?? [];
  if (list.length === 0) return String(error);
  return list
    .slice(0, 3)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}

/** An option keyed by an event type or actor id: own keys only (`toString` is a type, not Object.prototype's). */
function own<T>(options: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(options, key) ? options[key] : undefined;
}
