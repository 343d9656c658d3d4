import { createActor, getNextTransitions, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { ValidationError, type ErrorInfo, type JsonValue, type NewEffect, type NewInboxEvent, type NewJob, type NewTimer, type RegisteredMachine } from '../internal.ts';
import { eventThroughSchema, formatIssues } from '../runtime/intake.ts';
import { afterFailedAttempt, interruptedError, outcomePayload } from '../step/attempts.ts';
import type { Relations } from '../step/children.ts';
import { PARENT_REF } from '../step/childScope.ts';
import { startStep, step as spoolStep, stopStep, type Step } from '../step/step.ts';
import { indexTransitions, type StaticTransition, type TransitionDefinitionLike } from './transitions.ts';
import type { JobOptions, ModelConfig, ModelEffect, ModelJob, ModelState, ModelTimer, PathStep, PredictedRecord, Samples, StateView } from './modelState.ts';
import { allJobs, jobAt, nextWake, samplesOf } from './modelState.ts';
import { distinguishing } from './labels.ts';

/**
 * A model of what Spool does with one job, used to generate and predict paths.
 *
 * XState's pure `transition()` knows the machine; it does not know what Spool does around it:
 * durable timers with absolute deadlines fired in due order, activities that are started after
 * the commit, retried with backoff, settled by token or interrupted by a crash, snapshots that
 * go through JSON between events, child machines run as child jobs. This model runs every
 * transition and start through Spool's own step (`src/step`: the runtime's commit path calls the
 * same function) and the same attempt rules, and mirrors the rest (the order inboxes drain,
 * timers fire and activities start, from the public behaviour of the runtime), so that a path generated on it can be
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

export type { PathStep, PredictedRecord, ModelTimer, ModelEffect, ModelJob, ModelFailure, ModelState, StateView, Samples, JobOptions, ModelConfig } from './modelState.ts';

type QueueItem =
  | { job: ModelJob; event: { type: string; [key: string]: JsonValue }; timer?: ModelTimer; effectId?: string }
  /** The runtime stops a child job after the commit of the parent transition that left the invoking state. */
  | { job: ModelJob; stop: true };

interface MachineInfo {
  def: RegisteredMachine;
  opts: JobOptions;
  index: Map<TransitionDefinitionLike, StaticTransition>;
  userTypes: string[];
  sampleCache: Map<string, Array<{ type: string; [key: string]: JsonValue }>>;
}

/** The runner a model's step names (the model writes nothing). */
const MODEL_RUNNER = 'spool.testing.model';

/** A transition definition's microsteps, by the actor whose scope took them. */
type Taken = Map<unknown, TransitionDefinitionLike[]>;

/** Thrown when a sample is not usable. */
export class SampleError extends Error {
  override name = 'SampleError';
}

/** The model of one job of one machine definition, with its child jobs. */
export class JobModel {
  readonly config: ModelConfig;
  readonly machine: AnyStateMachine;
  readonly #machines = new Map<string, MachineInfo>();
  /** Child machine definitions for the step, by registered id. */
  readonly #lookup = (machineId: string) => this.#machines.get(machineId)?.def;

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

  /** `runtime.start(machineId, input)`: the initial state, its effects, timers and child jobs (Spool's start step). */
  initial(input: unknown): ModelState {
    const root = this.#info(this.config.def.id);
    const parsed = this.#parseInput(input);
    let traced: { value: ReturnType<typeof startStep>; taken: Taken; actor: unknown };
    try {
      traced = this.#traced(this.machine, false, (actor) =>
        startStep({ def: this.config.def, input: parsed, jobId: this.config.jobId, idempotencyKey: null, inputHash: '', owner: null, now: 0, actor, machines: this.#lookup, runner: MODEL_RUNNER }),
      );
    } catch (error) {
      if (error instanceof ValidationError) throw new SampleError(`${error.message} (input ${JSON.stringify(parsed)})`);
      throw error;
    }
    const { job, relations } = traced.value;
    const state: ModelState = {
      path: '',
      jobId: this.config.jobId,
      machineId: this.config.def.id,
      parentJobId: null,
      actorId: null,
      status: job.status as ModelState['status'],
      output: undefined,
      error: undefined,
      machine: rehydrate(this.machine, job.snapshot),
      revision: 1,
      now: 0,
      timers: [],
      effects: [],
      records: [],
      taken: staticOf(root, traced.taken.get(traced.actor)),
      children: [],
      failures: [],
      trail: [],
      commits: [],
    };
    const queue: QueueItem[] = [];
    const writes = { create: job.effects ?? [], deactivate: [], schedule: job.timers ?? [], cancel: [], deliveries: job.deliveries ?? [] };
    this.#absorb(state, state, writes, relations, traced.taken, queue);
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
    const next: ModelState = { ...state, ...clone(state), children, failures: [], trail: [], commits: [] };
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
        const event = outcomePayload(effect.actorId, step.via === 'done' ? { output: toJson(step.output) } : { error: failInfo(step.error) });
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
    // Samples keyed by a wildcard the state handles (`'note.*'`): each with its own type.
    const wildcards = new Set((getNextTransitions(job.machine) as TransitionDefinitionLike[]).map((t) => t.eventType).filter((t) => t.includes('*')));
    for (const key of Object.keys(info.opts.events).filter((k) => wildcards.has(k))) {
      this.#eventSamples(info, key, view).forEach((event, i) => out.push({ via: 'send', type: event.type, event, sample: i + 1, ...at }));
    }
    if (root && nextWake(job as ModelState) !== null) out.push({ via: 'time', type: 'spool.time' });
    for (const effect of job.effects) {
      if (effect.kind !== 'activity' || effect.status !== 'waiting') continue;
      samplesOf(own(info.opts.outputs, effect.actorId) ?? own(info.opts.outputs, effect.src) ?? null, view).forEach((output, i) =>
        out.push({ via: 'done', type: outcomePayload(effect.actorId, { output: null }).type, actorId: effect.actorId, output: toJson(output), sample: i + 1, ...at }),
      );
      samplesOf(own(info.opts.errors, effect.actorId) ?? own(info.opts.errors, effect.src) ?? DEFAULT_ERROR, view).forEach((error, i) =>
        out.push({ via: 'error', type: outcomePayload(effect.actorId, { error: null }).type, actorId: effect.actorId, error: toJson(error), sample: i + 1, ...at }),
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
      // What a history state would restore is part of the state: leaving from two substates is two states.
      const history = Object.entries((job.machine as { historyValue?: Record<string, Array<{ id: string }>> }).historyValue ?? {});
      return [
        history.length === 0 ? machinePart : [machinePart, history.map(([id, nodes]) => [id, nodes.map((n) => n.id)])],
        job.status,
        job.timers.map((t) => [t.key, t.event, t.dueAt - state.now]),
        job.effects.map((e) => [e.actorId, e.src, e.attempt, e.status, e.nextRunAt === null ? null : e.nextRunAt - state.now, e.fresh]),
      ];
    };
    const live = state.children.filter((c) => c.status === 'active' || c.timers.length > 0);
    return JSON.stringify(live.length === 0 ? part(state) : [...part(state), live.map((c) => [c.path, ...part(c)])]);
  }

  /**
   * What tells a step's sample from the other samples of its kind, for its label: the payload
   * fields whose values differ (`{role:manager}`), '' when it is the only sample.
   */
  sampleDetail(before: ModelState, step: PathStep): string {
    if (step.via !== 'send' && step.via !== 'done' && step.via !== 'error') return '';
    const job = allJobs(before).find((j) => j.path === (step.child ?? ''));
    if (!job) return '';
    const info = this.#info(job.machineId);
    const view = viewOf(job);
    let all: unknown[];
    let mine: unknown;
    try {
      if (step.via === 'send') {
        const wildcard = Object.keys(info.opts.events).find((k) => k.includes('*') && !Object.hasOwn(info.opts.events, step.type) && this.#eventSamples(info, k, view).some((e) => e.type === step.type));
        all = this.#eventSamples(info, wildcard ?? step.type, view).filter((e) => e.type === step.type);
        mine = step.event;
      } else {
        const effect = job.effects.find((e) => e.actorId === step.actorId);
        const table = step.via === 'done' ? info.opts.outputs : info.opts.errors;
        all = samplesOf(own(table, step.actorId) ?? own(table, effect?.src ?? '') ?? null, view).map(toJson);
        mine = step.via === 'done' ? step.output : step.error;
      }
    } catch {
      return '';
    }
    return distinguishing(all, mine);
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
    if (type.includes('*')) {
      // A wildcard's sample names its own type, one the wildcard matches as XState does.
      const own = s['type'];
      const prefix = type.slice(0, -1);
      if (typeof own !== 'string' || own.includes('*') || !(type === '*' || own === type.slice(0, -2) || own.startsWith(prefix))) {
        throw new SampleError(`Sample ${n} of event ${type} for ${where} needs its own \`type\`, one that ${type} matches (e.g. { type: '${type === '*' ? 'SOME_EVENT' : `${prefix}something`}', … }).`);
      }
      type = own;
    }
    if (s['type'] !== undefined && s['type'] !== type) {
      throw new SampleError(`Sample ${n} of event ${type} for ${where} has type "${String(s['type'])}".`);
    }
    const result = eventThroughSchema(info.def, type, toJson({ ...s, type }));
    if (!result.ok) {
      throw new SampleError(
        `Sample ${n} of event ${type} for ${where} is rejected by its schema (${formatIssues(result.error)}): give a valid one in \`events: { ${type}: { … } }\`.`,
      );
    }
    return result.event as { type: string; [key: string]: JsonValue };
  }

  #parseInput(input: unknown): JsonValue {
    const json = toJson(input ?? {});
    const schema = this.config.def.input;
    if (!schema) return json;
    const result = schema.safeParse(json);
    if (!result.success) {
      throw new SampleError(
        `Input ${JSON.stringify(json)} is rejected by the input schema of ${this.config.def.id} (${formatIssues(result.error)}): ` +
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
      const stale =
        item.timer && cancelled.has(item.timer.id)
          ? `timer ${item.timer.id} was cancelled`
          : item.effectId !== undefined && !job.effects.some((e) => e.id === item.effectId)
            ? `invocation ${item.effectId} is no longer current`
            : null;
      const info = this.#info(job.machineId);
      const { value: result, taken, actor } = this.#step(state, job, item.event, stale);
      job.revision += 1;
      const { from, to } = result.commit.transition;
      const jobTaken = staticOf(info, taken.get(actor));
      state.trail.push({ path: job.path, eventType: item.event.type });
      // A transition that changed nothing is still the one XState took: it counts as covered.
      if (result.status === 'ignored') job.taken.push(...jobTaken);
      if (result.status !== 'applied' || !result.plan) {
        job.records.push({ eventType: item.event.type, outcome: result.status, from, to: from });
        if (result.status === 'failed') state.failures.push({ machineId: job.machineId, eventType: item.event.type, message: result.error?.message ?? '' });
        if (result.relations) {
          // A child job's transition whose action throws is how its parent's onError path is taken: it was taken.
          if (result.status === 'failed') job.taken.push(...staticOf(info, selected(info.def.machine, job.machine, item.event)));
          // A child job that failed ends in error, stopped, and its parent's invocation fails with it (the step's childFailure).
          job.status = result.commit.job.status as ModelJob['status'];
          job.effects = [];
          job.timers = [];
          this.#absorb(state, job, { create: [], deactivate: [], schedule: [], cancel: [], deliveries: [] }, result.relations, taken, queue);
        }
        continue;
      }
      const plan = result.plan;
      job.machine = rehydrate(info.def.machine, result.commit.job.snapshot);
      job.status = result.next.status as ModelJob['status'];
      job.records.push({ eventType: item.event.type, outcome: 'applied', from, to });
      state.commits.push({ path: job.path, eventType: item.event.type, machine: job.machine, status: job.status });
      job.taken.push(...jobTaken);
      for (const key of plan.timers.cancel) {
        for (const q of queue) if ('timer' in q && q.timer && q.job === job && q.timer.key === key) cancelled.add(q.timer.id);
      }
      const writes = { create: result.commit.effects?.create ?? [], deactivate: plan.effects.deactivate, schedule: plan.timers.schedule, cancel: plan.timers.cancel, deliveries: plan.deliveries };
      this.#absorb(state, job, writes, result.relations, taken, queue);
    }
  }

  /** One event for one job through Spool's step, with the transitions each actor took. */
  #step(state: ModelState, job: ModelJob, event: ModelTimer['event'], stale: string | null): { value: Step; taken: Taken; actor: unknown } {
    const info = this.#info(job.machineId);
    const parent = job.parentJobId === null ? undefined : allJobs(state).find((j) => j.jobId === job.parentJobId);
    const invocation = parent?.effects.find((e) => e.id === job.jobId && e.status === 'waiting');
    return this.#traced(info.def.machine, job.parentJobId !== null, (actor) =>
      spoolStep({
        // The step reads the snapshot hydrated, in the actor's scope: the stored text is not needed.
        job: { id: job.jobId, revision: job.revision, status: job.status, value: toJson(job.machine.value), context: toJson(job.machine.context), snapshot: '', owner: null, parent: parent ? { jobId: parent.jobId, effectId: job.jobId } : null },
        def: info.def,
        snapshot: job.machine,
        actor,
        event,
        source: { seq: 0, eventId: '' },
        now: state.now,
        stale,
        children: new Map(job.effects.filter((e) => e.kind === 'child').map((e) => [e.actorId, e.id])),
        parentEffect: parent && invocation ? { id: invocation.id, jobId: parent.jobId, actorId: invocation.actorId } : undefined,
        machines: this.#lookup,
        runner: MODEL_RUNNER,
      }),
    );
  }

  /**
   * Run `run` with a fresh unstarted actor of the machine (a child's with the parent marker as its
   * parent), recording which transition definitions each microstep took, by the actor that took
   * it (XState reports them on its `@xstate.microstep` inspection events): so always-transitions
   * and guard branches are known exactly, for the job and for each child job its step started.
   */
  #traced<T>(machine: AnyStateMachine, asChild: boolean, run: (actor: unknown) => T): { value: T; taken: Taken; actor: unknown } {
    const taken: Taken = new Map();
    let recording = false;
    const inspect = (event: { type: string; actorRef?: unknown }) => {
      if (!recording || event.type !== '@xstate.microstep') return;
      const transitions = (event as { _transitions?: TransitionDefinitionLike[] })._transitions;
      if (!Array.isArray(transitions)) throw new Error('xstate no longer reports the transitions of a microstep (`_transitions`); spool/testing needs an update.');
      const list = taken.get(event.actorRef) ?? [];
      list.push(...transitions);
      taken.set(event.actorRef, list);
    };
    // An actor with a parent joins the parent's system, and XState inspects at the system level only.
    const actor = createActor(machine, (asChild ? { parent: PARENT_REF } : { inspect }) as never);
    const system = (PARENT_REF as unknown as { system: { inspect: (observer: unknown) => { unsubscribe: () => void } } }).system;
    const inspection = system.inspect(inspect);
    recording = true;
    try {
      return { value: run(actor), taken, actor };
    } finally {
      recording = false;
      inspection.unsubscribe();
    }
  }

  /** What the runtime does to a child job whose parent left the invoking state: `xstate.stop`, everything of it cancelled, its own children stopped. */
  #stopJob(state: ModelState, job: ModelJob): void {
    if (job.status !== 'active') return;
    const value = toJson(job.machine.value);
    // The model keeps no snapshot text: the stop step's record is all it reads.
    const { transition } = stopStep({ id: job.jobId, revision: job.revision, value, context: toJson(job.machine.context), snapshot: '', machineVersion: '' }, state.now);
    job.revision += 1;
    job.status = 'stopped';
    job.records.push({ eventType: transition.eventType, outcome: transition.outcome as PredictedRecord['outcome'], from: transition.from, to: transition.to });
    const children = job.effects.filter((e) => e.kind === 'child').map((e) => e.id);
    job.effects = [];
    job.timers = [];
    for (const id of children) {
      const child = state.children.find((c) => c.jobId === id);
      if (child) this.#stopJob(state, child);
    }
  }

  /**
   * Write what a committed step asked for into the model: effects, timers, new child jobs, and
   * events queued in the order the runtime's commit writes them to the inboxes (new child jobs'
   * own first events, then the job's self-sends, then events to its children and parent, then the
   * settled invocation); children of left states are stopped after.
   */
  #absorb(
    state: ModelState,
    job: ModelJob,
    writes: { create: readonly NewEffect[]; deactivate: readonly string[]; schedule: readonly NewTimer[]; cancel: readonly string[]; deliveries: readonly NewInboxEvent[] },
    relations: Relations | undefined,
    taken: Taken,
    queue: QueueItem[],
  ): void {
    for (const actorId of writes.deactivate) job.effects = job.effects.filter((e) => e.actorId !== actorId);
    for (const key of writes.cancel) job.timers = job.timers.filter((t) => t.key !== key);
    job.effects.push(...writes.create.map(modelEffect));
    job.timers.push(...writes.schedule.map(modelTimer));
    const spawned = (relations?.children ?? []).map((c) => this.#childJob(state, c, relations?.childActors.get(c.id), taken));
    const isNew = new Set(spawned.map((c) => c.jobId));
    const deliver = (d: NewInboxEvent) => {
      const target = allJobs(state).find((j) => j.jobId === d.jobId);
      if (target) queue.push({ job: target, event: d.payload as ModelTimer['event'] });
    };
    for (const c of relations?.children ?? []) (c.deliveries ?? []).forEach(deliver);
    const related = relations?.deliveries ?? [];
    related.filter((d) => isNew.has(d.jobId)).forEach(deliver);
    writes.deliveries.forEach(deliver);
    related.filter((d) => !isNew.has(d.jobId)).forEach(deliver);
    const settle = relations?.settleParent;
    const parent = settle ? allJobs(state).find((j) => j.jobId === settle.event.jobId) : undefined;
    const invocation = parent?.effects.find((e) => e.id === settle?.effectId);
    if (settle && parent && invocation) {
      invocation.status = 'settled';
      queue.push({ job: parent, event: settle.event.payload as ModelTimer['event'], effectId: invocation.id });
    }
    for (const id of relations?.stopChildren ?? []) {
      const child = state.children.find((c) => c.jobId === id);
      if (child) queue.push({ job: child, stop: true });
    }
    if (writes.create.some((e) => e.kind !== 'child') || spawned.some((c) => c.effects.some((e) => e.kind === 'activity'))) this.#pump(state, queue);
  }

  /** A child job the step created (in the parent's commit), added to the model after its parent. */
  #childJob(state: ModelState, created: NewJob, actor: unknown, taken: Taken): ModelJob {
    const info = this.#info(created.machineId);
    const parent = allJobs(state).find((j) => j.jobId === created.parent?.jobId);
    const actorId = parent?.effects.find((e) => e.id === created.id)?.actorId ?? created.id;
    const child: ModelJob = {
      path: !parent || parent.path === '' ? actorId : `${parent.path}/${actorId}`,
      jobId: created.id,
      machineId: info.def.id,
      parentJobId: parent?.jobId ?? null,
      actorId,
      status: created.status as ModelJob['status'],
      machine: rehydrate(info.def.machine, created.snapshot),
      revision: 1,
      timers: (created.timers ?? []).map(modelTimer),
      effects: (created.effects ?? []).map(modelEffect),
      records: [{ eventType: created.transition.eventType, outcome: 'started', from: created.transition.from, to: created.transition.to }],
      taken: staticOf(info, taken.get(actor)),
    };
    state.children.push(child);
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
    const policy = info.def.activities[effect.src] ?? {};
    const next = afterFailedAttempt({ policy, effectId: effect.id, attempt: effect.attempt, maxAttempts: effect.maxAttempts, error, terminal: false, retryAfterMs: undefined, now: state.now });
    if (next.retry) {
      effect.status = 'backoff';
      effect.nextRunAt = next.retryAt;
      return;
    }
    effect.status = 'settled';
    queue.push({ job, event: outcomePayload(effect.actorId, { error: next.eventError }), effectId: effect.id });
  }

  /** What recovery does with an attempt whose runner died. */
  #interrupt(state: ModelState, job: ModelJob, effect: ModelEffect, queue: QueueItem[]): void {
    const error = interruptedError(effect);
    if (error) {
      effect.status = 'settled';
      queue.push({ job, event: outcomePayload(effect.actorId, { error }), effectId: effect.id });
      this.#drain(state, queue);
      return;
    }
    this.#startAttempt(state, job, effect, queue);
  }

  /** Keep the graph-snapshot fields in step with the machine snapshot. */
  #sync(state: ModelState): void {
    state.status = state.machine.status as ModelState['status'];
    state.output = state.machine.output;
    state.error = state.machine.error;
  }
}

const DEFAULT_ERROR = [{ name: 'Error', message: 'sample failure' }];

/** The message of the scripted stand-in's retryable failures. */
export function scriptedFailureMessage(src: string, attempt: number): string {
  return `scripted failure of ${src} (attempt ${attempt})`;
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

/** The transitions XState selects for an event in a snapshot (guards evaluated); none when selecting throws. */
function selected(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: { type: string }): TransitionDefinitionLike[] {
  try {
    return (machine as unknown as { getTransitionData: (s: unknown, e: unknown) => TransitionDefinitionLike[] }).getTransitionData(snapshot, event) ?? [];
  } catch {
    return [];
  }
}

/** The static transitions of this machine among those taken. */
function staticOf(info: MachineInfo, taken: readonly TransitionDefinitionLike[] | undefined): StaticTransition[] {
  return (taken ?? []).flatMap((t) => {
    const s = info.index.get(t);
    return s ? [s] : [];
  });
}

/** An effect the step wrote, as the model tracks it: an activity not started yet, or a child job's invocation. */
function modelEffect(e: NewEffect): ModelEffect {
  const child = e.kind === 'child';
  return { id: e.id, actorId: e.actorId, src: e.src, kind: child ? 'child' : 'activity', attempt: child ? 1 : 0, maxAttempts: e.maxAttempts, unsafe: e.unsafe, status: 'waiting', nextRunAt: null, fresh: false };
}

/** A timer the step wrote, as the model tracks it. */
function modelTimer(t: NewTimer): ModelTimer {
  return { id: t.id, key: t.key, event: t.event as ModelTimer['event'], dueAt: t.dueAt };
}

function timerOrder(a: ModelTimer, b: ModelTimer): number {
  return a.dueAt - b.dueAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** JSON round trip: what the runtime stores. */
export function toJson(value: unknown): JsonValue {
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

/** A snapshot as the runtime sees it on the next event: its stored JSON, restored. */
function rehydrate(machine: AnyStateMachine, text: string): AnyMachineSnapshot {
  return createActor(machine, { snapshot: JSON.parse(text) }).getSnapshot() as AnyMachineSnapshot;
}

/** An option keyed by an event type or actor id: own keys only (`toString` is a type, not Object.prototype's). */
function own<T>(options: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(options, key) ? options[key] : undefined;
}
