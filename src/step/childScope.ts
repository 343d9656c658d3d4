import { createActor, createMachine, type AnyMachineSnapshot, type AnyStateMachine, type EventObject } from 'xstate';

/**
 * A child job runs its machine as XState would inside its parent, except that the parent lives
 * in another job. The marker below stands in for the parent: a child's `sendParent` resolves to
 * it, and the runtime turns every event sent to it into an inbox event of the parent job.
 */
export const PARENT_REF = createActor(createMachine({ id: 'spool.parent' }));

interface ScopedActor {
  _actorScope: Record<string, unknown>;
}

/** Shared no-ops of the collecting scope: built once, not per transition. */
const ignore = (): undefined => undefined;

function collectingScope(actor: unknown, actions: unknown[]): Record<string, unknown> {
  // Object.assign, not `{ ...scope, more }`: see docs/performance.md, "Object spread on Node 20".
  return Object.assign({}, (actor as ScopedActor)._actorScope, {
    actionExecutor: actions.push.bind(actions),
    defer: ignore,
    stopChild: ignore,
    emit: ignore,
  });
}

/**
 * `transition()` for a child job: pure, with `sendParent` pointing at {@link PARENT_REF}. Also
 * returns the snapshot it started from: the same object back, with no actions, means unhandled.
 */
export function transitionAsChild(machine: AnyStateMachine, json: unknown, event: EventObject): [AnyMachineSnapshot, unknown[], AnyMachineSnapshot] {
  const actor = createActor(machine, { snapshot: json as never, parent: PARENT_REF } as never);
  const snapshot = actor.getSnapshot() as AnyMachineSnapshot;
  const actions: unknown[] = [];
  const next = machine.transition(snapshot, event, collectingScope(actor, actions) as never) as AnyMachineSnapshot;
  return [next, actions, snapshot];
}

/** The snapshot a scope actor holds: never read (see {@link scopeActor}). */
const EMPTY_SNAPSHOT = Object.freeze({ status: 'active', value: {}, context: undefined, children: {}, historyValue: {} });

/** Per machine, the logic a scope actor is built on: the machine, its `restoreSnapshot` keeping a snapshot as given. */
const scopeLogics = new WeakMap<AnyStateMachine, AnyStateMachine>();

function scopeLogic(machine: AnyStateMachine): AnyStateMachine {
  let logic = scopeLogics.get(machine);
  if (!logic) scopeLogics.set(machine, (logic = Object.create(machine, { restoreSnapshot: { value: (snapshot: unknown) => snapshot } }) as AnyStateMachine));
  return logic;
}

/**
 * A never-started actor of the machine that only lends its scope (to the initial transition and
 * the job's later ones), made with its input. XState's constructor computes an actor's initial
 * state, which the step computes again in a collecting scope: given a snapshot instead, it runs
 * no context factory, no entry actions and spawns nothing. Its own snapshot is never read (the
 * actor is never started), so it holds an empty one as given, not restored ({@link scopeLogic}:
 * a restore costs about as much as the actor); its `src` is the machine.
 */
function scopeActor(machine: AnyStateMachine, input: unknown, parent?: unknown): unknown {
  return createActor(scopeLogic(machine), { input, snapshot: EMPTY_SNAPSHOT, src: machine, parent } as never);
}

/** `initialTransition()` for a child job, with `sendParent` pointing at {@link PARENT_REF}; also returns the actor that lent its scope. */
export function initialAsChild(machine: AnyStateMachine, input: unknown): [AnyMachineSnapshot, unknown[], unknown] {
  const actor = scopeActor(machine, input, PARENT_REF);
  return [...initialWithScope(machine, actor, input), actor];
}

/** `initialTransition()` in the scope of a given unstarted actor of the machine (made with this input). Pure: actions are collected. */
export function initialWithScope(machine: AnyStateMachine, actor: unknown, input: unknown): [AnyMachineSnapshot, unknown[]] {
  const actions: unknown[] = [];
  const snapshot = machine.getInitialSnapshot(collectingScope(actor, actions) as never, input) as AnyMachineSnapshot;
  return [snapshot, actions];
}

/**
 * `initialTransition()` without XState's throwaway actor, whose construction runs the context
 * factory with no input (it throws in most machines, and XState builds the error's stack only to
 * drop it): the job's own never-started actor ({@link scopeActor}) lends its scope, and is
 * returned so the job's next event can transition in it too. Pure: actions are collected.
 */
export function initialInScope(machine: AnyStateMachine, input: unknown): [AnyMachineSnapshot, unknown[], unknown] {
  const actor = scopeActor(machine, input);
  return [...initialWithScope(machine, actor, input), actor];
}

/**
 * `transition()` without XState's throwaway actor: the job's own restored (never started) actor
 * lends its scope, so a transition costs no actor construction and runs no context factory.
 * Pure like `transition()`: actions are collected, none runs.
 */
export function transitionInScope(machine: AnyStateMachine, actor: unknown, snapshot: AnyMachineSnapshot, event: EventObject): [AnyMachineSnapshot, unknown[]] {
  const actions: unknown[] = [];
  const next = machine.transition(snapshot, event, collectingScope(actor, actions) as never) as AnyMachineSnapshot;
  return [next, actions];
}
