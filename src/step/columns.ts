import type { AnyMachineSnapshot } from 'xstate';
import type { JobRecord, JobStatus, JsonValue, NewJob, TransitionCommit } from '../ports/store.ts';
import { toErrorInfo } from '../base/errors.ts';
import { redact, statePaths, toJson, toJsonText } from '../base/json.ts';
import type { RegisteredMachine } from '../base/definition.ts';

/** A transition left a context JSON cannot hold: the event's error, recorded as `failed`. */
export class UnserializableSnapshotError extends Error {
  override name = 'UnserializableSnapshot';
}

/**
 * A snapshot's persisted form as JSON text (made once per snapshot). A context that JSON cannot
 * hold (a BigInt, an object that refers to itself, a `toJSON` that throws) is the machine's
 * error, named as such.
 */
export function persistedJson(def: RegisteredMachine, next: AnyMachineSnapshot): string {
  try {
    return JSON.stringify(def.machine.getPersistedSnapshot(next));
  } catch (error) {
    throw new UnserializableSnapshotError(
      `The new state of ${def.id} cannot be stored as JSON (${toErrorInfo(error).message}); keep context to JSON values: no BigInt, functions, class instances or cycles.`,
    );
  }
}

/** `context.progress` when the machine keeps one (a number 0-100). */
export function contextProgress(context: JsonValue): number | undefined {
  const p = context !== null && typeof context === 'object' && !Array.isArray(context) ? context['progress'] : undefined;
  return typeof p === 'number' && Number.isFinite(p) ? Math.min(100, Math.max(0, p)) : undefined;
}

/**
 * The job's columns after a transition to `next` (its persisted JSON `snapshot` already made).
 * Progress follows `context.progress` when the machine changes it; activities may set it in between.
 */
export function jobColumns(job: Pick<JobRecord, 'context'>, def: RegisteredMachine, next: AnyMachineSnapshot, snapshot: string, at: number): TransitionCommit['job'] {
  // The context's copy and its text, made once: the store writes the text as it is.
  const { value: context, text: contextJson } = toJsonText(next.context);
  const progress = contextProgress(context);
  const columns: TransitionCommit['job'] = {
    status: next.status as JobStatus,
    value: toJson(next.value),
    statePaths: statePaths(next.value),
    context,
    contextJson,
    snapshot,
    machineVersion: def.version,
    at,
  };
  if (progress !== undefined && progress !== contextProgress(job.context)) columns.progress = progress;
  return columns;
}

/** The job's columns unchanged (an event ignored, failed or stale keeps the state it found): nothing serialised again. */
export function keptColumns(job: Pick<JobRecord, 'status' | 'value' | 'context' | 'snapshot'>, def: RegisteredMachine, at: number): TransitionCommit['job'] {
  return { status: job.status, value: job.value, statePaths: statePaths(job.value), context: job.context, snapshot: job.snapshot, machineVersion: def.version, at };
}

/** A new job's columns at revision 1 (a started job or a child job): its initial state, its input redacted, its `xstate.init` history record. */
export function initialColumns(
  def: RegisteredMachine,
  jobId: string,
  snapshot: AnyMachineSnapshot,
  input: JsonValue,
  now: number,
): Pick<NewJob, 'id' | 'machineId' | 'machineVersion' | 'status' | 'value' | 'statePaths' | 'context' | 'contextJson' | 'snapshot' | 'input' | 'progress' | 'at' | 'transition'> {
  const value = toJson(snapshot.value);
  const { value: context, text: contextJson } = toJsonText(snapshot.context);
  const redacted = redact(input, def.sensitive);
  return {
    id: jobId,
    machineId: def.id,
    machineVersion: def.version,
    status: snapshot.status as JobStatus,
    value,
    statePaths: statePaths(snapshot.value),
    context,
    contextJson,
    snapshot: JSON.stringify(def.machine.getPersistedSnapshot(snapshot)),
    input: redacted,
    progress: contextProgress(context) ?? null,
    at: now,
    transition: { eventId: null, eventType: 'xstate.init', payload: redacted, from: null, to: value, outcome: 'started', error: null, at: now },
  };
}
