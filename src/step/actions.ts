import { UNCOMPARED_HASH, type JsonValue, type NewEffect, type NewInboxEvent, type NewTimer } from '../ports/store.ts';
import { toJson, toJsonText } from '../base/json.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { maxAttemptsOf } from './attempts.ts';

/** An action XState returned from `transition()`: data, plus a working `exec` for custom actions. */
export interface XStateAction {
  type: string;
  params?: unknown;
  info?: { self?: { id?: string } } & Record<string, unknown>;
  exec?: (info: unknown, params: unknown) => void;
}

/** What a transition's actions mean for the store (written in its commit) and for after the commit. */
export interface ActionPlan {
  effects: { create: NewEffect[]; deactivate: string[] };
  timers: { schedule: NewTimer[]; cancel: string[] };
  deliveries: NewInboxEvent[];
  /** Custom actions and emits, carried out only after the commit. */
  afterCommit: XStateAction[];
  /** Child machines the transition invoked or spawned: each becomes a child job. */
  spawnMachines: { actorId: string; src: string; input: JsonValue }[];
  /** Events for child jobs, by invoke id (resolved to the child job by the runtime). */
  childSends: { actorId: string; event: JsonValue }[];
  /** Events a child job sends its parent (`sendParent`). */
  parentSends: JsonValue[];
  /** Actions Spool cannot carry out durably: the event fails with these reasons. */
  problems: string[];
}

/**
 * Turn the actions of one transition into durable records. Pure: the same inputs give the same
 * plan, so ids derived here (effect ids = idempotency keys, timer ids) are stable.
 */
export function planActions(
  def: RegisteredMachine,
  jobId: string,
  revision: number,
  actions: readonly unknown[],
  now: number,
  parentRef?: unknown,
): ActionPlan {
  const plan: ActionPlan = {
    effects: { create: [], deactivate: [] },
    timers: { schedule: [], cancel: [] },
    deliveries: [],
    afterCommit: [],
    spawnMachines: [],
    childSends: [],
    parentSends: [],
    problems: [],
  };
  const context: PlanContext = { def, jobId, revision, now, parentRef };
  actions.forEach((raw, index) => planAction(plan, context, raw as XStateAction, index));
  return plan;
}

/** What every action of one transition is planned against: the machine, the job, its revision, the time, the parent. */
interface PlanContext {
  def: RegisteredMachine;
  jobId: string;
  revision: number;
  now: number;
  parentRef: unknown;
}

/** Add one action (the `index`th of the transition) to the plan, by its kind. */
function planAction(plan: ActionPlan, context: PlanContext, action: XStateAction, index: number): void {
  const params = (action.params ?? {}) as Record<string, unknown>;
  switch (action.type) {
    case 'xstate.spawnChild':
      planSpawn(plan, context, params);
      break;
    case 'xstate.stopChild': {
      const ref = (params['actorRef'] ?? params) as { id?: unknown };
      if (typeof ref.id === 'string') plan.effects.deactivate.push(ref.id);
      break;
    }
    case 'xstate.raise':
      planRaise(plan, context, params, index);
      break;
    case 'xstate.sendTo':
      planSendTo(plan, context, action, params, index);
      break;
    case 'xstate.cancel': {
      if (typeof params['sendId'] === 'string') plan.timers.cancel.push(params['sendId']);
      break;
    }
    default:
      if (action.type === 'xstate.emit' || typeof action.exec === 'function') plan.afterCommit.push(action);
  }
}

/** An invoked or spawned actor: a child job for a machine, an effect for a fromPromise activity, else a problem. */
function planSpawn(plan: ActionPlan, { def, jobId, revision, now }: PlanContext, params: Record<string, unknown>): void {
  const actorId = String(params['id'] ?? '');
  const src = params['src'];
  if (typeof src !== 'string' || !(src in (def.machine.implementations.actors ?? {}))) {
    plan.problems.push(`actor "${actorId}" uses inline logic; declare it in setup({ actors: { name: logic } }) and invoke it by name`);
    return;
  }
  if (/^x:\d+$/.test(actorId)) {
    plan.problems.push(`actor of "${src}" has a generated id (${actorId}); give every spawned actor an explicit id (spawnChild(src, { id }))`);
    return;
  }
  const kind = activityKind(def.machine.implementations.actors[src]);
  if (kind === 'machine') {
    plan.spawnMachines.push({ actorId, src, input: toJson(params['input'] ?? null) });
    return;
  }
  if (kind !== 'promise') {
    plan.problems.push(`actor "${actorId}" (${src}) is not a fromPromise activity or a machine; Spool cannot persist it`);
    return;
  }
  const policy = def.activities[src] ?? {};
  // The input's copy and its text, made once: the store writes the text as it is.
  const input = toJsonText(params['input'] ?? null);
  plan.effects.create.push({
    id: `${jobId}~${actorId}~r${revision}`,
    jobId,
    actorId,
    src,
    input: input.value,
    inputJson: input.text,
    maxAttempts: maxAttemptsOf(policy),
    unsafe: policy.unsafeToRepeat === true,
    createdRevision: revision,
    at: now,
  });
}

/** A raise: a delayed one becomes a timer (`after` for XState's delayed transitions); a non-delayed one is already applied. */
function planRaise(plan: ActionPlan, { jobId, revision, now }: PlanContext, params: Record<string, unknown>, index: number): void {
  const event = toJson(params['event']) as { type: string };
  const delay = params['delay'];
  if (typeof delay !== 'number') return; // non-delayed raises are already applied by transition()
  const key = typeof params['id'] === 'string' ? params['id'] : `anon~r${revision}~${index}`;
  plan.timers.schedule.push(timer(jobId, key, event.type.startsWith('xstate.after.') ? 'after' : 'raise', event, now + delay, revision, now));
}

/** A sendTo: to the parent, to a child job, or to the job itself (a delivery, or a timer when delayed). */
function planSendTo(plan: ActionPlan, { jobId, revision, now, parentRef }: PlanContext, action: XStateAction, params: Record<string, unknown>, index: number): void {
  const to = params['to'] as { id?: unknown } | undefined;
  const self = action.info?.self;
  const event = toJson(params['event']) as { type: string };
  const delay = params['delay'];
  if (to !== undefined && parentRef !== undefined && to === parentRef) {
    if (typeof delay === 'number') plan.problems.push('a delayed sendParent is not durable; delay in the parent instead');
    else plan.parentSends.push(event);
    return;
  }
  if (to && to !== self && to.id !== self?.id && typeof to.id === 'string') {
    if (typeof delay === 'number') plan.problems.push(`a delayed sendTo ${to.id} is not durable; delay with after/raise and send on arrival`);
    else plan.childSends.push({ actorId: to.id, event });
    return;
  }
  if (!to) {
    plan.problems.push(`sendTo ${String(params['targetId'] ?? '?')}: no such actor`);
    return;
  }
  if (typeof delay === 'number') {
    const key = typeof params['id'] === 'string' ? params['id'] : `anon~r${revision}~${index}`;
    plan.timers.schedule.push(timer(jobId, key, 'sendTo', event, now + delay, revision, now));
  } else {
    plan.deliveries.push({
      jobId,
      eventId: `self~r${revision}~${index}`,
      type: event.type,
      payload: event,
      payloadHash: UNCOMPARED_HASH,
      at: now,
      source: 'self',
    });
  }
}

function timer(jobId: string, key: string, kind: NewTimer['kind'], event: JsonValue, dueAt: number, revision: number, now: number): NewTimer {
  return { id: `${jobId}~${key}~r${revision}`, jobId, key, kind, event, dueAt, createdRevision: revision, createdAt: now };
}

/** What kind of actor logic this is. XState 5 marks none of them, so look at behaviour (once per logic: a spawn asks). */
export function activityKind(logic: unknown): 'promise' | 'machine' | 'other' {
  if (logic === null || typeof logic !== 'object') return 'other';
  let kind = kinds.get(logic);
  if (kind === undefined) kinds.set(logic, (kind = kindOf(logic)));
  return kind;
}

const kinds = new WeakMap<object, 'promise' | 'machine' | 'other'>();

function kindOf(logic: object): 'promise' | 'machine' | 'other' {
  if ('root' in logic && 'implementations' in logic) return 'machine';
  const transition = (logic as { transition?: unknown }).transition;
  const config = (logic as { config?: unknown }).config;
  if (typeof config === 'function' && typeof transition === 'function' && /xstate\.promise\.resolve|XSTATE_PROMISE_RESOLVE/.test(String(transition))) return 'promise';
  return 'other';
}
