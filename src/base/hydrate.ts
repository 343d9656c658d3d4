import { createActor, type AnyMachineSnapshot } from 'xstate';
import type { JobRecord } from '../ports/store.ts';
import type { PersistedSnapshotJson, RegisteredMachine } from './definition.ts';

/** `actor`: the unstarted actor that restored it; its scope serves later pure transitions of the job. */
export type Hydrated = { ok: true; snapshot: AnyMachineSnapshot; actor: unknown } | { ok: false; reason: string };

/** Parse stored snapshot text afresh (XState mutates what it restores from). */
export function parseSnapshot(text: string): PersistedSnapshotJson | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return 'the stored snapshot is not valid JSON';
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json) || !('value' in json)) {
    return 'the stored snapshot is not an XState snapshot object';
  }
  return json as PersistedSnapshotJson;
}

/**
 * Turn a persisted snapshot into one `transition()` accepts, without starting anything:
 * no entry action re-runs, no invoked work starts. A snapshot that no longer fits its machine
 * comes back as a reason, never as a half-restored actor.
 */
export function hydrate(def: RegisteredMachine, json: PersistedSnapshotJson, storedStatus: JobRecord['status']): Hydrated {
  try {
    return hydrateOrThrow(def, json, storedStatus);
  } catch (error) {
    // A damaged snapshot can make even the checks throw (a `status` that is not a string…).
    return misfit(def, String((error as Error)?.message ?? 'unreadable'));
  }
}

function hydrateOrThrow(def: RegisteredMachine, json: PersistedSnapshotJson, storedStatus: JobRecord['status']): Hydrated {
  if (typeof json['status'] !== 'string') return { ok: false, reason: 'the stored snapshot has no readable status' };
  // XState restores a snapshot without a context object, or with children that are not an object,
  // and fails only on the next event ("Cannot assign to undefined context"): refuse it here.
  if (!isObject(json['context'])) return misfit(def, 'its context is not an object');
  if (json['children'] !== undefined && !isObject(json['children'])) return misfit(def, 'its children are not an object');
  let snapshot: AnyMachineSnapshot;
  let actor: unknown;
  try {
    const restored = createActor(def.machine, { snapshot: json as never });
    actor = restored;
    snapshot = restored.getSnapshot() as AnyMachineSnapshot;
  } catch (error) {
    return misfit(def, (error as Error).message);
  }
  if (snapshot.status === 'error' && storedStatus !== 'error') {
    return misfit(def, snapshot.error instanceof Error ? snapshot.error.message : String(snapshot.error));
  }
  if (snapshot.status !== storedStatus) {
    return { ok: false, reason: `stored status "${storedStatus}" disagrees with the snapshot's "${snapshot.status}"` };
  }
  return { ok: true, snapshot, actor };
}

function isObject(v: unknown): boolean {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function misfit(def: RegisteredMachine, why: string): Hydrated {
  return { ok: false, reason: `snapshot does not fit machine ${def.id}@${def.version}: ${why}` };
}
