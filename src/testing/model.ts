import { createActor, getNextTransitions, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { backoffDelay, type ActivityPolicy, type ErrorInfo, type JsonValue, type RegisteredMachine } from '../index.ts';
import { indexTransitions, type StaticTransition, type TransitionDefinitionLike } from './transitions.ts';

/**
 * A model of what Spool does with one job, used to generate and predict paths.
 *
 * XState's pure `transition()` knows the machine; it does not know what Spool does around it:
 * durable timers with absolute deadlines fired in due order, activities that are started after
 * the commit, retried with backoff, settled by token or interrupted by a crash, snapshots that
 * go through JSON between events. This model mirrors those rules (from the public behaviour of
 * the runtime), so that a path generated on it can be replayed on the real runtime step by step
 * and every step's state, context and history records can be predicted and checked.
 *
 * The real runtime is the judge: a model that drifted from it shows up as a failing path test.
 */

/** What a test does to the job in one step of a path. Plain JSON (it crosses process boundaries). */
export type PathStep =
  /** `runtime.send(jobId, event)`. */
  | { via: 'send'; type: string; event: { type: string; [key: string]: JsonValue }; sample: number }
  /** Move the clock to the runtime's next wake-up (`nextWakeAt()`) and `tick()`: due timers fire, due retries start. */
  | { via: 'time'; type: 'spool.time' }
  /** The waiting activity `actorId` finishes: `runtime.complete(token, output)`. */
  | { via: 'done'; type: string; actorId: string; output: JsonValue; sample: number }
  /** The waiting activity `actorId` fails: `runtime.fail(token, error)`. */
  | { via: 'error'; type: string; actorId: string; error: JsonValue; sample: number }
  /** The runtime dies while the attempt of `actorId` that started in the previous step is in flight; a new runtime recovers and ticks. */
  | { via: 'interrupt'; type: 'spool.interrupt'; actorId: string };

/** One history record the runtime is expected to write. */
export interface PredictedRecord {
  eventType: string;
  outcome: 'applied' | 'ignored' | 'failed' | 'stale';
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
  attempt: number;
  maxAttempts: number;
  unsafe: boolean;
  /** `waiting`: deferred, settled by a token; `backoff`: a retry is due at `nextRunAt`; `settled`: finished. */
  status: 'waiting' | 'backoff' | 'settled';
  nextRunAt: number | null;
  /** Its current attempt started during the step that produced this state. */
  fresh: boolean;
}

/** The model's state of one job. It is an XState-graph snapshot (status/output/error) too. */
export interface ModelState {
  status: 'active' | 'done' | 'error' | 'stopped';
  output: unknown;
  error: unknown;
  machine: AnyMachineSnapshot;
  revision: number;
  /** Milliseconds since the job started. */
  now: number;
  timers: ModelTimer[];
  effects: ModelEffect[];
  /** History records written by the step that produced this state. */
  records: PredictedRecord[];
  /** Static transitions taken (applied) during that step, always-transitions included. */
  taken: StaticTransition[];
  /** Messages of events that failed during that step (an action threw, an unsupported action…). */
  failures: string[];
}

/** What sample functions see of a state. */
export interface StateView {
  value: JsonValue;
  context: JsonValue;
  status: ModelState['status'];
}

/** A sample payload, a list of them, or a function of the state giving them. */
export type Samples<T> = T | readonly T[] | ((state: StateView) => T | readonly T[]);

/** How the model was configured: the parts of path options it needs. */
export interface ModelConfig {
  /** The definition as the runtime holds it (defaults resolved). */
  def: RegisteredMachine;
  jobId: string;
  /** Per event type: sample events (with or without `type`). */
  events: Record<string, Samples<Record<string, unknown>>>;
  /** Per invoke id or src: sample outputs of `done` steps. Default `[null]`. */
  outputs: Record<string, Samples<unknown>>;
  /** Per invoke id or src: sample errors of `error` steps. Default `[{ name: 'Error', message: 'sample failure' }]`. */
  errors: Record<string, Samples<unknown>>;
  /** Per src: how many attempts of every invocation fail (retryably) before one waits for its outcome. */
  failAttempts: Record<string, number>;
  /** Which activities may be interrupted by a crash mid-attempt: `unsafe` ones (default), `all`, or `none`. */
  interrupts: 'unsafe' | 'all' | 'none';
  /** Abstraction of the machine part of the state key. Default `{ value, context }`. */
  stateKey: ((state: StateView) => unknown) | undefined;
}

type QueueItem = { event: { type: string; [key: string]: JsonValue }; timer?: ModelTimer; effectId?: string };

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

/** Thrown when a sample is not usable. */
export class SampleError extends Error {
  override name = 'SampleError';
}

/** The model of one job of one machine definition. */
export class JobModel {
  readonly config: ModelConfig;
  readonly machine: AnyStateMachine;
  readonly #index: Map<TransitionDefinitionLike, StaticTransition>;
  readonly #userTypes: string[];
  readonly #sampleCache = new Map<string, Array<{ type: string; [key: string]: JsonValue }>>();

  constructor(config: ModelConfig) {
    this.config = config;
    this.machine = config.def.machine;
    this.#index = indexTransitions(this.machine);
    this.#userTypes = [...config.def.eventTypes].filter((t) => !t.startsWith('xstate.') && !t.startsWith('spool.') && t !== '' && !t.includes('*')).sort();
  }

  /** `runtime.start(machineId, input)`: the initial state, its effects and timers. */
  initial(input: unknown): ModelState {
    const parsed = this.#parseInput(input);
    const traced = trace(this.machine, (scope) => this.machine.getInitialSnapshot(scope as never, parsed) as AnyMachineSnapshot);
    if (traced.next.status === 'error') {
      throw new SampleError(`Machine ${this.config.def.id} cannot start with input ${JSON.stringify(parsed)}: ${errorText(traced.next.error)}`);
    }
    const state: ModelState = {
      status: traced.next.status as ModelState['status'],
      output: undefined,
      error: undefined,
      machine: rehydrate(this.machine, traced.next),
      revision: 1,
      now: 0,
      timers: [],
      effects: [],
      records: [],
      taken: traced.taken.flatMap((t) => this.#static(t)),
      failures: [],
    };
    const plan = this.#plan(traced.actions, 1, 0);
    if (plan.problems.length > 0) throw new SampleError(`Machine ${this.config.def.id} cannot start durably: ${plan.problems.join('; ')}`);
    const queue: QueueItem[] = [];
    this.#applyPlan(state, plan, queue);
    this.#pump(state, queue);
    this.#drain(state, queue);
    this.#sync(state);
    return state;
  }

  /** The state after one step. Pure: `state` is not changed. */
  step(state: ModelState, step: PathStep): ModelState {
    const next: ModelState = {
      ...state,
      timers: state.timers.map((t) => ({ ...t })),
      effects: state.effects.map((e) => ({ ...e, fresh: false })),
      records: [],
      taken: [],
      failures: [],
    };
    const queue: QueueItem[] = [];
    switch (step.via) {
      case 'send':
        queue.push({ event: step.event });
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
        const effect = next.effects.find((e) => e.actorId === step.actorId && e.status === 'waiting');
        if (!effect) throw new Error(`No activity "${step.actorId}" is waiting for its outcome here.`);
        effect.status = 'settled';
        const event =
          step.via === 'done'
            ? { type: `xstate.done.actor.${effect.actorId}`, output: toJson(step.output), actorId: effect.actorId }
            : { type: `xstate.error.actor.${effect.actorId}`, error: failInfo(step.error) as unknown as JsonValue, actorId: effect.actorId };
        queue.push({ event, effectId: effect.id });
        this.#drain(next, queue);
        break;
      }
      case 'interrupt': {
        const effect = state.effects.find((e) => e.actorId === step.actorId && e.fresh && e.status === 'waiting');
        const mine = next.effects.find((e) => e.id === effect?.id);
        if (!effect || !mine) throw new Error(`No attempt of "${step.actorId}" started in the previous step: nothing to interrupt.`);
        // A new runtime opens and ticks: due timers fire first, then orphaned attempts are taken over.
        this.#fireDueTimers(next, queue);
        this.#drain(next, queue);
        if (next.effects.includes(mine)) this.#interrupt(next, mine, queue);
        this.#pump(next, queue);
        this.#drain(next, queue);
        break;
      }
    }
    this.#sync(next);
    return next;
  }

  /** The steps possible in a state: handled user events (each sample), time, outcomes of waiting activities, interrupts. */
  steps(state: ModelState): PathStep[] {
    if (state.status !== 'active') return [];
    const out: PathStep[] = [];
    const view = viewOf(state);
    const handled = this.#handledTypes(state.machine);
    for (const type of handled) {
      this.#eventSamples(type, view).forEach((event, i) => out.push({ via: 'send', type, event, sample: i + 1 }));
    }
    if (nextWake(state) !== null) out.push({ via: 'time', type: 'spool.time' });
    for (const effect of state.effects) {
      if (effect.status !== 'waiting') continue;
      samplesOf(this.config.outputs[effect.actorId] ?? this.config.outputs[effect.src] ?? null, view).forEach((output, i) =>
        out.push({ via: 'done', type: `xstate.done.actor.${effect.actorId}`, actorId: effect.actorId, output: toJson(output), sample: i + 1 }),
      );
      samplesOf(this.config.errors[effect.actorId] ?? this.config.errors[effect.src] ?? DEFAULT_ERROR, view).forEach((error, i) =>
        out.push({ via: 'error', type: `xstate.error.actor.${effect.actorId}`, actorId: effect.actorId, error: toJson(error), sample: i + 1 }),
      );
      const interruptible = this.config.interrupts === 'all' || (this.config.interrupts === 'unsafe' && effect.unsafe);
      if (effect.fresh && interruptible) out.push({ via: 'interrupt', type: 'spool.interrupt', actorId: effect.actorId });
    }
    return out;
  }

  /** The graph key of a state: the (abstracted) machine state plus timers and activities relative to now. */
  key(state: ModelState): string {
    const view = viewOf(state);
    const machinePart = this.config.stateKey ? this.config.stateKey(view) : { value: view.value, context: view.context };
    return JSON.stringify([
      machinePart,
      state.status,
      state.timers.map((t) => [t.key, t.event, t.dueAt - state.now]),
      state.effects.map((e) => [e.actorId, e.src, e.attempt, e.status, e.nextRunAt === null ? null : e.nextRunAt - state.now, e.fresh]),
    ]);
  }

  /** All sample events of a type, validated by the definition's schema as the runtime would. */
  #eventSamples(type: string, view: StateView): Array<{ type: string; [key: string]: JsonValue }> {
    const described = this.config.events[type];
    const stable = typeof described !== 'function';
    const cached = stable ? this.#sampleCache.get(type) : undefined;
    if (cached) return cached;
    const raw = samplesOf(described ?? {}, view);
    const parsed = raw.map((sample, i) => this.#parseEvent(type, sample, i + 1));
    if (stable) this.#sampleCache.set(type, parsed);
    return parsed;
  }

  #parseEvent(type: string, sample: unknown, n: number): { type: string; [key: string]: JsonValue } {
    if (sample === null || typeof sample !== 'object' || Array.isArray(sample)) {
      throw new SampleError(`Sample ${n} of event ${type} for machine ${this.config.def.id} is not an object.`);
    }
    const s = sample as Record<string, unknown>;
    if (s['type'] !== undefined && s['type'] !== type) {
      throw new SampleError(`Sample ${n} of event ${type} for machine ${this.config.def.id} has type "${String(s['type'])}".`);
    }
    const event = { ...s, type };
    const schema = this.config.def.events[type];
    if (!schema) return toJson(event) as { type: string; [key: string]: JsonValue };
    const result = schema.safeParse(event);
    if (!result.success) {
      throw new SampleError(
        `Sample ${n} of event ${type} for machine ${this.config.def.id} is rejected by its schema (${issues(result.error)}): give a valid one in \`events: { ${type}: { … } }\`.`,
      );
    }
    return toJson(result.data) as { type: string; [key: string]: JsonValue };
  }

  #parseInput(input: unknown): JsonValue {
    const json = toJson(input ?? {});
    const schema = this.config.def.input;
    if (!schema) return json;
    const result = schema.safeParse(json);
    if (!result.success) throw new SampleError(`Input ${JSON.stringify(json)} is rejected by the input schema of ${this.config.def.id} (${issues(result.error)}).`);
    return toJson(result.data);
  }

  /** Event types with a candidate transition in the current configuration (wildcards expanded). */
  #handledTypes(snapshot: AnyMachineSnapshot): string[] {
    const types = new Set<string>();
    for (const t of getNextTransitions(snapshot) as TransitionDefinitionLike[]) {
      const type = t.eventType;
      if (!type || type.startsWith('xstate.')) continue;
      if (type === '*') this.#userTypes.forEach((u) => types.add(u));
      else if (type.endsWith('.*')) this.#userTypes.filter((u) => u.startsWith(type.slice(0, -1))).forEach((u) => types.add(u));
      else if (!type.startsWith('spool.')) types.add(type);
    }
    return [...types].sort();
  }

  #static(t: TransitionDefinitionLike): StaticTransition[] {
    const s = this.#index.get(t);
    return s ? [s] : [];
  }

  /** Fire every timer due at `now`, drain, then start due retries: what `tick()` does. */
  #tick(state: ModelState, queue: QueueItem[]): void {
    this.#fireDueTimers(state, queue);
    this.#drain(state, queue);
    this.#pump(state, queue);
    this.#drain(state, queue);
  }

  #fireDueTimers(state: ModelState, queue: QueueItem[]): void {
    const due = state.timers.filter((t) => t.dueAt <= state.now).sort(timerOrder);
    state.timers = state.timers.filter((t) => t.dueAt > state.now);
    for (const timer of due) queue.push({ event: timer.event, timer });
  }

  /** Apply queued events oldest first, as the runtime's drain does. */
  #drain(state: ModelState, queue: QueueItem[]): void {
    const cancelled = new Set<string>();
    while (queue.length > 0) {
      const item = queue.shift()!;
      if (state.status !== 'active') continue; // rejected: a terminal job writes no history
      if (item.timer && cancelled.has(item.timer.id)) {
        this.#record(state, item.event.type, 'stale', state.machine.value);
        continue;
      }
      const from = toJson(state.machine.value);
      let traced: Traced | undefined;
      let failure: string | undefined;
      try {
        traced = trace(this.machine, (scope) => this.machine.transition(state.machine, structuredClone(item.event) as AnyEventObject, scope as never) as AnyMachineSnapshot);
      } catch (error) {
        failure = errorText(error);
      }
      const revision = state.revision + 1;
      let outcome: PredictedRecord['outcome'] = 'applied';
      let plan: Plan | undefined;
      if (!traced) outcome = 'failed';
      else if (traced.next === state.machine) outcome = 'ignored';
      else if (traced.next.status === 'error') {
        outcome = 'failed';
        failure = errorText(traced.next.error);
      } else {
        plan = this.#plan(traced.actions, revision, state.now);
        if (plan.problems.length > 0) {
          outcome = 'failed';
          failure = plan.problems.join('; ');
        }
      }
      state.revision = revision;
      if (outcome !== 'applied' || !traced || !plan) {
        state.records.push({ eventType: item.event.type, outcome, from, to: from });
        if (failure !== undefined) state.failures.push(`${item.event.type}: ${failure}`);
        continue;
      }
      state.machine = rehydrate(this.machine, traced.next);
      state.status = traced.next.status as ModelState['status'];
      state.records.push({ eventType: item.event.type, outcome, from, to: toJson(state.machine.value) });
      state.taken.push(...traced.taken.flatMap((t) => this.#static(t)));
      for (const key of plan.timers.cancel) {
        for (const q of queue) if (q.timer && q.timer.key === key) cancelled.add(q.timer.id);
      }
      this.#applyPlan(state, plan, queue);
      if (plan.effects.create.length > 0) this.#pump(state, queue);
    }
  }

  #record(state: ModelState, eventType: string, outcome: PredictedRecord['outcome'], value: unknown): void {
    state.revision += 1;
    const v = toJson(value);
    state.records.push({ eventType, outcome, from: v, to: v });
  }

  #applyPlan(state: ModelState, plan: Plan, queue: QueueItem[]): void {
    for (const actorId of plan.effects.deactivate) state.effects = state.effects.filter((e) => e.actorId !== actorId);
    for (const key of plan.timers.cancel) state.timers = state.timers.filter((t) => t.key !== key);
    state.effects.push(...plan.effects.create);
    state.timers.push(...plan.timers.schedule);
    queue.push(...plan.deliveries.map((event) => ({ event })));
  }

  /** Start every effect that is new (attempt 0) or due for a retry: what the runtime's pump does. */
  #pump(state: ModelState, queue: QueueItem[]): void {
    for (let guard = 0; guard < 1000; guard += 1) {
      const due = state.effects
        .filter((e) => e.attempt === 0 || (e.status === 'backoff' && e.nextRunAt !== null && e.nextRunAt <= state.now))
        .sort((a, b) => (a.nextRunAt ?? 0) - (b.nextRunAt ?? 0));
      const effect = due[0];
      if (!effect) return;
      this.#startAttempt(state, effect, queue);
    }
  }

  /** One attempt of the scripted stand-in: fail retryably `failAttempts` times, then wait for the outcome. */
  #startAttempt(state: ModelState, effect: ModelEffect, queue: QueueItem[]): void {
    effect.attempt += 1;
    effect.nextRunAt = null;
    effect.fresh = true;
    const failures = this.config.failAttempts[effect.src] ?? 0;
    if (effect.attempt > failures) {
      effect.status = 'waiting';
      return;
    }
    const info: ErrorInfo = { name: 'Error', message: scriptedFailureMessage(effect.src, effect.attempt) };
    const policy: ActivityPolicy = this.config.def.activities[effect.src] ?? {};
    const retry = effect.attempt < effect.maxAttempts && (policy.retryOn ? policy.retryOn(info) : true);
    if (retry) {
      effect.status = 'backoff';
      effect.nextRunAt = state.now + backoffDelay(policy, effect.attempt, effect.id);
      return;
    }
    effect.status = 'settled';
    const error = { ...info, code: 'SPOOL_RETRIES_EXHAUSTED', attempts: effect.attempt };
    queue.push({ event: { type: `xstate.error.actor.${effect.actorId}`, error, actorId: effect.actorId }, effectId: effect.id });
  }

  /** What recovery does with an attempt whose runner died. */
  #interrupt(state: ModelState, effect: ModelEffect, queue: QueueItem[]): void {
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
      queue.push({ event: { type: `xstate.error.actor.${effect.actorId}`, error: error as unknown as JsonValue, actorId: effect.actorId }, effectId: effect.id });
      this.#drain(state, queue);
      return;
    }
    this.#startAttempt(state, effect, queue);
  }

  /** Turn one transition's actions into effects, timers and self-deliveries, as the runtime plans them. */
  #plan(actions: readonly ActionLike[], revision: number, now: number): Plan {
    const jobId = this.config.jobId;
    const plan: Plan = { effects: { create: [], deactivate: [] }, timers: { schedule: [], cancel: [] }, deliveries: [], problems: [] };
    const actors = (this.machine.implementations.actors ?? {}) as Record<string, unknown>;
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
          const policy = this.config.def.activities[src] ?? {};
          plan.effects.create.push({
            id: `${jobId}~${actorId}~r${revision}`,
            actorId,
            src,
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
          const to = params['to'] as { id?: unknown } | undefined;
          const self = action.info?.self as { id?: unknown } | undefined;
          const event = toJson(params['event']) as ModelTimer['event'];
          if (!to || (to !== self && to.id !== self?.id)) {
            plan.problems.push(`sendTo ${String(params['targetId'] ?? to?.id ?? '?')}: Spool delivers sendTo only to the job itself`);
            break;
          }
          const delay = params['delay'];
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
  problems: string[];
}

const DEFAULT_ERROR = [{ name: 'Error', message: 'sample failure' }];

/** The message of the scripted stand-in's retryable failures. */
export function scriptedFailureMessage(src: string, attempt: number): string {
  return `scripted failure of ${src} (attempt ${attempt})`;
}

/** When the runtime next wakes up for this job: the earliest timer or retry. */
export function nextWake(state: ModelState): number | null {
  let wake: number | null = null;
  for (const t of state.timers) wake = wake === null ? t.dueAt : Math.min(wake, t.dueAt);
  for (const e of state.effects) if (e.status === 'backoff' && e.nextRunAt !== null) wake = wake === null ? e.nextRunAt : Math.min(wake, e.nextRunAt);
  return wake;
}

/** What `runtime.fail(token, error)` turns an error payload into. */
export function failInfo(payload: unknown): ErrorInfo {
  const p = toJson(payload);
  return p !== null && typeof p === 'object' && !Array.isArray(p)
    ? { name: typeof p['name'] === 'string' ? p['name'] : 'Error', message: typeof p['message'] === 'string' ? p['message'] : JSON.stringify(p) }
    : { name: 'Error', message: String(p) };
}

export function viewOf(state: ModelState): StateView {
  return { value: toJson(state.machine.value), context: toJson(state.machine.context), status: state.status };
}

export function samplesOf<T>(samples: Samples<T>, view: StateView): T[] {
  const resolved = typeof samples === 'function' ? (samples as (s: StateView) => T | readonly T[])(view) : samples;
  return Array.isArray(resolved) ? [...(resolved as readonly T[])] : [resolved as T];
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
 * events), so always-transitions and guard branches are known exactly.
 */
function trace(machine: AnyStateMachine, run: (scope: unknown) => AnyMachineSnapshot): Traced {
  const taken: TransitionDefinitionLike[] = [];
  const actions: ActionLike[] = [];
  let recording = false;
  const self = createActor(machine, {
    inspect: (event) => {
      if (!recording || event.type !== '@xstate.microstep') return;
      const transitions = (event as { _transitions?: TransitionDefinitionLike[] })._transitions;
      if (!Array.isArray(transitions)) throw new Error('xstate no longer reports the transitions of a microstep (`_transitions`); spool/testing needs an update.');
      taken.push(...transitions);
    },
  });
  const system = (self as unknown as { system: unknown }).system;
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
