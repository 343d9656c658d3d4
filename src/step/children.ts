import type { AnyMachineSnapshot } from 'xstate';
import { UNCOMPARED_HASH, type ErrorInfo, type JobRecord, type JsonValue, type NewEffect, type NewInboxEvent, type NewJob } from '../ports/store.ts';
import { toErrorInfo } from '../base/errors.ts';
import { parseSnapshot } from '../base/hydrate.ts';
import { inputHash, toJson } from '../base/json.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { planActions, type ActionPlan } from './actions.ts';
import { outcomeEvent } from './attempts.ts';
import { initialAsChild, PARENT_REF } from './childScope.ts';
import { initialColumns } from './columns.ts';

/** What a transition does to other jobs (children, parent): written in its commit, or done after it. */
export interface Relations {
  /** New child jobs (and theirs), in creation order: created in the same commit. */
  children: NewJob[];
  /** The parent's `child` effects for its new child jobs. */
  effects: NewEffect[];
  /** Events for other jobs (children, the parent): accepted in the same commit. */
  deliveries: NewInboxEvent[];
  /** A child job that ended: its invocation in the parent succeeds (or fails, with `error`), with its outcome event. */
  settleParent?: { effectId: string; output: JsonValue; error?: ErrorInfo; event: NewInboxEvent };
  /** Child jobs of left states: stopped after the commit. */
  stopChildren: string[];
  /** Jobs (other than this one) that received something: drained after the commit. */
  touched: Set<string>;
  /** Each new child job's unstarted actor, whose scope its initial state ran in (the path-test model reads coverage by it). */
  childActors: Map<string, unknown>;
}

/** Child machine definitions by registered id (`<parent id>.<src>`) and version. */
export type MachineLookup = (machineId: string, version: string) => RegisteredMachine | undefined;

/** Where a transition's relations come from: the job's bookkeeping the caller loaded for the step. */
export interface RelationBook {
  /** The job's current child-job invocations: invoke id -> child job id. Needed only when `def.hasChildMachines`. */
  children?: ReadonlyMap<string, string> | undefined;
  /** For a child job: the parent's invocation it settles on reaching its final state (absent: nothing to settle). */
  parentEffect?: { id: string; jobId: string; actorId: string } | undefined;
  machines: MachineLookup;
  runner: string;
}

/** No relations yet: what the step fills in. */
export function noRelations(): Relations {
  return { children: [], effects: [], deliveries: [], stopChildren: [], touched: new Set(), childActors: new Map() };
}

/** An event to another job (`parent`: from a parent to its child; `child`: from a child to its parent). */
export function relatedEvent(jobId: string, eventId: string, event: JsonValue, at: number, source: 'parent' | 'child'): NewInboxEvent {
  return { jobId, eventId, type: (event as { type: string }).type, payload: event, payloadHash: UNCOMPARED_HASH, at, source };
}

/** Whether a transition's plan concerns child or parent jobs (else there are no relations to work out). */
export function touchesRelations(job: Pick<JobRecord, 'parent'>, def: RegisteredMachine, plan: ActionPlan): boolean {
  return (
    plan.spawnMachines.length > 0 ||
    plan.childSends.length > 0 ||
    plan.parentSends.length > 0 ||
    Boolean(job.parent) ||
    // A left invocation may have been a child job only where the machine can have any.
    (plan.effects.deactivate.length > 0 && def.hasChildMachines)
  );
}

/**
 * What a transition means for other jobs: child machines it invoked become child jobs (created
 * in the same commit), events it sends to children or its parent go to their inboxes in the
 * same commit, a child that ended settles its invocation in the parent, and children of states
 * it left are stopped after the commit. Problems go to `plan.problems`.
 */
export function relationsOf(
  job: Pick<JobRecord, 'id' | 'owner' | 'parent'>,
  def: RegisteredMachine,
  plan: ActionPlan,
  next: AnyMachineSnapshot,
  revision: number,
  now: number,
  book: RelationBook,
): Relations {
  const out = noRelations();
  const liveChildren = new Map(book.children ?? []);
  for (const actorId of plan.effects.deactivate) {
    const childJob = liveChildren.get(actorId);
    if (childJob !== undefined) {
      out.stopChildren.push(childJob);
      liveChildren.delete(actorId);
    }
  }
  spawnChildren(job.id, job.owner, def, plan.spawnMachines, revision, now, out, plan.problems, book);
  for (const spawn of plan.spawnMachines) liveChildren.set(spawn.actorId, childJobId(job.id, spawn.actorId, revision));
  plan.childSends.forEach((send, i) => {
    const childJob = liveChildren.get(send.actorId);
    if (childJob === undefined) {
      plan.problems.push(`sendTo ${send.actorId}: no running child machine with that id`);
      return;
    }
    out.deliveries.push(relatedEvent(childJob, `parent~${job.id}~r${revision}~${i}`, send.event, now, 'parent'));
    out.touched.add(childJob);
  });
  if (job.parent) {
    const parent = job.parent;
    plan.parentSends.forEach((event, i) => {
      out.deliveries.push(relatedEvent(parent.jobId, `child~${job.id}~r${revision}~${i}`, event, now, 'child'));
      out.touched.add(parent.jobId);
    });
    if (next.status === 'done' && book.parentEffect) {
      const effect = book.parentEffect;
      const output = toJson(next.output ?? null);
      out.settleParent = { effectId: effect.id, output, event: outcomeEvent(effect, 1, { output }, now) };
      out.touched.add(parent.jobId);
    }
  }
  return out;
}

/**
 * A child job whose event failed (a guard or action threw, or XState ended it in error) ends as
 * XState ends a failed child: status `error` (the snapshot keeps the error), its effects, timers
 * and own children stopped, and its parent's invocation fails: the parent receives
 * `xstate.error.actor.<id>` with the error, so its `onError` runs. Undefined for a job that is
 * not a child with an invocation to settle (a root job's failed event is a poison event: it stays).
 */
export function childFailure(job: Pick<JobRecord, 'snapshot' | 'parent'>, error: ErrorInfo, book: Pick<RelationBook, 'children' | 'parentEffect'>, now: number): { snapshot: string; relations: Relations } | undefined {
  const effect = book.parentEffect;
  if (!job.parent || !effect) return undefined;
  const out = noRelations();
  out.settleParent = { effectId: effect.id, output: null, error, event: outcomeEvent(effect, 1, { error }, now) };
  out.touched.add(job.parent.jobId);
  out.stopChildren.push(...(book.children?.values() ?? []));
  const json = parseSnapshot(job.snapshot);
  const snapshot = typeof json === 'string' ? job.snapshot : JSON.stringify({ ...json, status: 'error', error });
  return { snapshot, relations: out };
}

/** The id of the child job a job's invocation `actorId` at `revision` creates (its effect's id too). */
export function childJobId(parentId: string, actorId: string, revision: number): string {
  return `${parentId}~${actorId}~r${revision}`;
}

/** Child jobs (and their own children) for the child machines a transition invoked. */
export function spawnChildren(
  parentId: string,
  owner: string | null,
  def: RegisteredMachine,
  spawns: ActionPlan['spawnMachines'],
  revision: number,
  now: number,
  out: Relations,
  problems: string[],
  book: Pick<RelationBook, 'machines' | 'runner'>,
): void {
  for (const spawn of spawns) {
    const childDef = book.machines(`${def.id}.${spawn.src}`, def.version);
    if (!childDef) {
      problems.push(`child machine "${spawn.src}" is not registered with ${def.id}@${def.version}`);
      continue;
    }
    const childId = childJobId(parentId, spawn.actorId, revision);
    const started = startChild(childDef, spawn, childId, now, problems);
    if (!started) continue;
    const { snapshot, plan: childPlan } = started;
    out.childActors.set(childId, started.actor);
    out.effects.push({ id: childId, jobId: parentId, actorId: spawn.actorId, src: spawn.src, kind: 'child', input: spawn.input, maxAttempts: 1, unsafe: false, createdRevision: revision, at: now });
    const job: NewJob = Object.assign(initialColumns(childDef, childId, snapshot, spawn.input, now), {
      inputHash: inputHash(childDef.id, spawn.input),
      idempotencyKey: null,
      owner,
      parent: { jobId: parentId, effectId: childId },
      runner: book.runner,
      effects: childPlan.effects.create,
      timers: childPlan.timers.schedule,
      deliveries: childPlan.deliveries,
    });
    out.children.push(job);
    out.touched.add(childId);
    const grandchildren = noRelations();
    spawnChildren(childId, owner, childDef, childPlan.spawnMachines, 1, now, grandchildren, problems, book);
    job.effects = [...(job.effects ?? []), ...grandchildren.effects];
    out.children.push(...grandchildren.children);
    out.deliveries.push(...grandchildren.deliveries);
    for (const id of grandchildren.touched) out.touched.add(id);
    for (const [id, actor] of grandchildren.childActors) out.childActors.set(id, actor);
    childPlan.parentSends.forEach((event, i) => out.deliveries.push(relatedEvent(parentId, `child~${childId}~r1~${i}`, event, now, 'child')));
    if (childPlan.parentSends.length > 0) out.touched.add(parentId);
  }
}

/** A child machine's initial state and plan, or undefined (with the reason in `problems`) when it cannot start. */
function startChild(
  childDef: RegisteredMachine,
  spawn: ActionPlan['spawnMachines'][number],
  childId: string,
  now: number,
  problems: string[],
): { snapshot: AnyMachineSnapshot; plan: ActionPlan; actor: unknown } | undefined {
  let snapshot: AnyMachineSnapshot;
  let actions: unknown[];
  let actor: unknown;
  try {
    [snapshot, actions, actor] = initialAsChild(childDef.machine, spawn.input);
  } catch (error) {
    problems.push(`child machine "${spawn.src}" could not start: ${toErrorInfo(error).message}`);
    return undefined;
  }
  // XState keeps a start that threw (a context factory, an eventless loop) as an errored snapshot:
  // a child job born ended would leave its parent waiting for an outcome that never comes.
  if (snapshot.status === 'error') {
    problems.push(`child machine "${spawn.src}" could not start: ${toErrorInfo(snapshot.error).message}`);
    return undefined;
  }
  const plan = planActions(childDef, childId, 1, actions, now, PARENT_REF);
  problems.push(...plan.problems);
  if (plan.childSends.length > 0) problems.push(`child machine "${spawn.src}" sends to its own children on entry; not supported`);
  return { snapshot, plan, actor };
}
