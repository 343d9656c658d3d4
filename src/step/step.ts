import { initialTransition, transition, type AnyMachineSnapshot } from 'xstate';
import type { ErrorInfo, JobRecord, JsonValue, NewInboxEvent, NewJob, TransitionCommit } from '../ports/store.ts';
import { toErrorInfo, ValidationError } from '../base/errors.ts';
import { parseSnapshot } from '../base/hydrate.ts';
import { redact, statePaths, toJson } from '../base/json.ts';
import { redactText, textCleaner } from '../base/redaction.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { planActions, type ActionPlan } from './actions.ts';
import { childFailure, noRelations, relationsOf, spawnChildren, touchesRelations, type RelationBook, type Relations } from './children.ts';
import { initialInScope, initialWithScope, PARENT_REF, transitionAsChild, transitionInScope } from './childScope.ts';
import { initialColumns, jobColumns, keptColumns, persistedJson } from './columns.ts';

/**
 * The step: what one event means for one job, decided in one place and returned as data. Pure:
 * no I/O, no await, no clock (the time is a parameter), no store. The runtime commits what it
 * returns and then carries out its after-commit part; the path-test model and the bench call it too.
 */

/** A job as stored, as far as its step reads it. */
export type StepJob = Pick<JobRecord, 'id' | 'revision' | 'status' | 'value' | 'context' | 'snapshot' | 'owner' | 'parent'>;

/** Where the event comes from: accepted with this commit (the inline path), or pending in the inbox. */
export type StepSource = { accept: NewInboxEvent } | { seq: number; eventId: string };

/** One event for one job. */
export interface StepInput extends RelationBook {
  job: StepJob;
  /** The job's registered definition (its version is the one the job runs). */
  def: RegisteredMachine;
  /** The job's snapshot, hydrated from `job.snapshot` (the caller may keep it cached). */
  snapshot: AnyMachineSnapshot;
  /**
   * An unstarted actor of the machine whose scope the transition runs in (the one that restored
   * the snapshot, kept by the caller): no actor is built per event. Without it, a child job's
   * transition restores one with its parent marker, and any other runs in XState's `transition()`.
   */
  actor?: unknown;
  /** The event, validated JSON with a `type`. */
  event: JsonValue;
  source: StepSource;
  now: number;
  /** Why the event no longer belongs to the current state (an outcome of a left invocation, a cancelled timer): recorded `stale`. */
  stale?: string | null;
  /** The timer whose event this is: marked delivered by an applied transition. */
  timerId?: string | null;
}

/** What one event means: everything its commit writes, and what follows the commit. */
export interface Step {
  status: 'applied' | 'ignored' | 'failed' | 'stale';
  /** Why it failed or is stale, with sensitive values of the event and the context redacted. */
  error: ErrorInfo | null;
  /** The event as history keeps it (sensitive fields redacted). */
  payload: JsonValue;
  /** The new snapshot (the one it found unless applied). */
  next: AnyMachineSnapshot;
  /** The commit, all but the lease and an attempt's finish (the runtime's to add). */
  commit: Omit<TransitionCommit, 'lease' | 'finish'>;
  /** The applied transition's plan: its after-commit part is `afterCommit` (custom actions, emits), `effects.deactivate` (aborts) and new effects to start. */
  plan: ActionPlan | undefined;
  /** What the applied transition does to other jobs (undefined: nothing). */
  relations: Relations | undefined;
  /** Redacts a message of an after-commit action's failure. */
  clean: (message: string) => string;
}

/** Whether the step needs the job's current child invocations (`RelationBook.children`): only a machine with child machines can have any. */
export function needsChildren(def: RegisteredMachine): boolean {
  return def.hasChildMachines;
}

/** Compute the transition for one event: the outcome, the new snapshot and its JSON, and every record the commit writes. */
export function step(input: StepInput): Step {
  const { job, def, snapshot, now } = input;
  const event = input.event as { type: string };
  const revision = job.revision + 1;
  let next: AnyMachineSnapshot = snapshot;
  let status: Step['status'] = input.stale ? 'stale' : 'applied';
  let error: ErrorInfo | null = input.stale ? { name: 'StaleOutcome', message: input.stale } : null;
  let plan: ActionPlan | undefined;
  let relations: Relations | undefined;
  // The new snapshot's JSON, made while a failure can still be recorded as the event's.
  let persisted: string | undefined;
  if (!input.stale) {
    try {
      let actions: unknown[];
      let base: AnyMachineSnapshot;
      [next, actions, base] = compute(input, event);
      // XState hands back the very same snapshot, with no actions, when nothing handled the event.
      if (next === base && actions.length === 0) status = 'ignored';
      else if (next.status === 'error') {
        status = 'failed';
        error = toErrorInfo(next.error);
      } else {
        plan = planActions(def, job.id, revision, actions, now, job.parent ? PARENT_REF : undefined);
        if (plan.problems.length === 0 && touchesRelations(job, def, plan)) relations = relationsOf(job, def, plan, next, revision, now, input);
        if (plan.problems.length > 0) {
          status = 'failed';
          error = { name: 'UnsupportedAction', message: plan.problems.join('; ') };
        } else {
          persisted = persistedJson(def, next);
        }
      }
    } catch (thrown) {
      status = 'failed';
      error = toErrorInfo(thrown);
    }
  }
  if (status !== 'applied' || persisted === undefined) {
    next = snapshot;
    plan = undefined;
    relations = undefined;
  }
  // A message may quote a sensitive value of the event or of the job's context (which keeps them).
  if (error) error = { ...error, message: redactText(error.message, [input.event, job.context], def.sensitive) };
  // A child job whose event failed ends in error, and its parent's invocation fails with it.
  const ended = status === 'failed' && error ? childFailure(job, error, input, now) : undefined;
  if (ended) relations = ended.relations;
  // Nothing to redact: the validated payload is already a private JSON copy, stored as it is.
  const payload = def.sensitive.size === 0 ? input.event : redact(input.event, def.sensitive);
  const columns = ended
    ? { ...keptColumns(job, def, now), status: 'error' as const, snapshot: ended.snapshot }
    : persisted === undefined
      ? keptColumns(job, def, now)
      : jobColumns(job, def, next, persisted, now);
  const source = input.source;
  const accepted = 'accept' in source;
  // Built field by field (no spread of partial objects): one shape for every step's commit.
  const commit: Step['commit'] = {
    jobId: job.id,
    expectedRevision: job.revision,
    job: columns,
    transition: { eventId: accepted ? source.accept.eventId : source.eventId, eventType: event.type, payload, from: job.value, to: columns.value, outcome: status, error, at: now },
    event: accepted ? { accept: source.accept, status, error, payload } : { seq: source.seq, status, error, payload },
  };
  if (plan) addPlanWrites(commit, plan, relations);
  if (ended) {
    commit.stopAll = true;
    commit.settleParent = ended.relations.settleParent!;
  }
  if (status === 'applied' && input.timerId != null) commit.consumedTimer = input.timerId;
  const sensitive = def.sensitive;
  // Nothing sensitive: no message changes, and no closure is made per step.
  const clean = textCleaner([input.event, job.context, columns.context], sensitive);
  return { status, error, payload, next, commit, plan, relations, clean };
}

/** The transition itself: the next snapshot, its actions, and the snapshot it started from (the same one back means unhandled). */
function compute(input: StepInput, event: { type: string }): [AnyMachineSnapshot, unknown[], AnyMachineSnapshot] {
  const { def, snapshot, job } = input;
  if (input.actor !== undefined) {
    // The event is JSON: a JSON round trip copies it for XState in half structuredClone's time.
    return [...transitionInScope(def.machine, input.actor, snapshot, toJson(event) as typeof event), snapshot];
  }
  if (job.parent) {
    const json = parseSnapshot(job.snapshot);
    if (typeof json === 'string') throw new Error(json);
    return transitionAsChild(def.machine, json, structuredClone(event));
  }
  return [...(transition(def.machine, snapshot, structuredClone(event)) as [AnyMachineSnapshot, unknown[]]), snapshot];
}

/** The effects, timers, deliveries and child-job operations a plan (and its relations) writes in the commit. */
function addPlanWrites(commit: Step['commit'], plan: ActionPlan, relations: Relations | undefined): void {
  commit.effects = relations?.effects.length ? { create: [...plan.effects.create, ...relations.effects], deactivate: plan.effects.deactivate } : plan.effects;
  commit.timers = plan.timers;
  commit.deliveries = relations?.deliveries.length ? [...plan.deliveries, ...relations.deliveries] : plan.deliveries;
  if (relations?.children.length) commit.children = relations.children;
  if (relations?.settleParent) commit.settleParent = relations.settleParent;
}

/** A new job: its definition, validated input and identity. */
export interface StartInput extends Pick<RelationBook, 'machines' | 'runner'> {
  def: RegisteredMachine;
  input: JsonValue;
  jobId: string;
  idempotencyKey: string | null;
  inputHash: string;
  owner: string | null;
  now: number;
  /** An unstarted actor of the machine (made with this input) whose scope the initial state runs in; default: a new one where the machine allows it. */
  actor?: unknown;
}

/** What starting a job means: the job to create (revision 1, its first history record, what its initial state asks for). */
export interface Started {
  job: NewJob;
  plan: ActionPlan;
  relations: Relations;
  snapshot: AnyMachineSnapshot;
  /** The actor whose scope served the initial state (undefined when the machine cannot lend one). */
  actor: unknown;
  clean: (message: string) => string;
}

/** The start of a job: the initial transition. Throws a {@link ValidationError} when the machine cannot start (durably) with this input. */
export function startStep(input: StartInput): Started {
  const { def, now, jobId } = input;
  const [snapshot, actions, actor] = initialState(input);
  const plan = planActions(def, jobId, 1, actions, now);
  const relations = noRelations();
  spawnChildren(jobId, input.owner, def, plan.spawnMachines, 1, now, relations, plan.problems, input);
  if (plan.childSends.length > 0) plan.problems.push('an initial state that sends to its children on entry is not supported; send on a later transition');
  if (plan.problems.length > 0) {
    throw new ValidationError(`Machine ${def.id} cannot start durably: ${plan.problems.join('; ')}`, { machineId: def.id });
  }
  const job: NewJob = Object.assign(initialColumns(def, jobId, snapshot, input.input, now), {
    effects: [...plan.effects.create, ...relations.effects],
    timers: plan.timers.schedule,
    deliveries: plan.deliveries,
    children: relations.children,
    relatedDeliveries: relations.deliveries,
    inputHash: input.inputHash,
    idempotencyKey: input.idempotencyKey,
    owner: input.owner,
    runner: input.runner,
  });
  return { job, plan, relations, snapshot, actor, clean: textCleaner([input.input, job.context], def.sensitive) };
}

/** The initial snapshot and actions, and the actor that lent its scope; a start that throws or errors is the input's fault. */
function initialState(input: StartInput): [AnyMachineSnapshot, unknown[], unknown] {
  const { def } = input;
  let result: [AnyMachineSnapshot, unknown[], unknown];
  try {
    if (input.actor !== undefined) result = [...initialWithScope(def.machine, input.actor, input.input), input.actor];
    else if (def.scopeReusable) result = initialInScope(def.machine, input.input);
    else result = [...(initialTransition(def.machine, input.input) as [AnyMachineSnapshot, unknown[]]), undefined];
  } catch (error) {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${redactText(toErrorInfo(error).message, input.input, def.sensitive)}`, { machineId: def.id });
  }
  if (result[0].status === 'error') {
    throw new ValidationError(`Machine ${def.id} could not start with this input: ${redactText(toErrorInfo(result[0].error).message, input.input, def.sensitive)}`, { machineId: def.id });
  }
  return result;
}

/** A child job whose parent left the invoking state: `xstate.stop`, every effect and timer of it cancelled (the commit's `stopAll`). */
export function stopStep(job: Pick<JobRecord, 'id' | 'revision' | 'value' | 'context' | 'snapshot' | 'machineVersion'>, now: number): Omit<TransitionCommit, 'lease'> {
  const json = parseSnapshot(job.snapshot);
  const snapshot = typeof json === 'string' ? job.snapshot : JSON.stringify({ ...json, status: 'stopped' });
  return {
    jobId: job.id,
    expectedRevision: job.revision,
    job: { status: 'stopped', value: job.value, statePaths: statePaths(job.value), context: job.context, snapshot, machineVersion: job.machineVersion, at: now },
    transition: { eventId: null, eventType: 'xstate.stop', payload: { type: 'xstate.stop' }, from: job.value, to: job.value, outcome: 'applied', error: null, at: now },
    stopAll: true,
  };
}

/** A job moved to a newer version of its machine by its registered migrations: `spool.migrate`, the state kept. */
export function migrateStep(job: Pick<JobRecord, 'id' | 'revision' | 'value' | 'context' | 'machineVersion'>, def: RegisteredMachine, next: AnyMachineSnapshot, now: number): Omit<TransitionCommit, 'lease'> {
  const columns = jobColumns(job, def, next, persistedJson(def, next), now);
  return {
    jobId: job.id,
    expectedRevision: job.revision,
    job: columns,
    transition: { eventId: null, eventType: 'spool.migrate', payload: { from: job.machineVersion, to: def.version }, from: job.value, to: columns.value, outcome: 'migrated', error: null, at: now },
  };
}
