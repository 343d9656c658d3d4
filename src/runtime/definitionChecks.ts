/**
 * A definition's options checked against its machine when it is registered: a misspelt name
 * (an activity, a policy key, the cancel state or event, an event schema, a sensitive field)
 * would otherwise be accepted and silently do nothing. Each is a {@link MachineDefinitionError}
 * naming the problem and the near name.
 */
import type { AnyStateMachine } from 'xstate';
import { z, type ZodType } from 'zod';
import { activityKind } from '../step/actions.ts';
import { MachineDefinitionError } from '../base/errors.ts';
import { didYouMean } from '../base/names.ts';
import type { JobDefinition } from '../base/definition.ts';

/** The names a definition object may have. */
export const DEFINITION_KEYS: readonly string[] = ['machine', 'id', 'version', 'input', 'events', 'migrations', 'sensitive', 'activities', 'cancel', 'description'];
/** The keys of an activity's policy (`ActivityPolicy`), and of its `backoff`. */
export const POLICY_KEYS: readonly string[] = ['maxAttempts', 'backoff', 'retryOn', 'unsafeToRepeat'];
const BACKOFF_KEYS: readonly string[] = ['initialMs', 'factor', 'maxMs', 'jitter'];
const CANCEL_KEYS: readonly string[] = ['event', 'state'];

/**
 * Whether an event type matches a descriptor as XState matches them: the same type, `*` (any),
 * or `user.*` (`user` and any type that starts with `user.`).
 */
export function matchesDescriptor(type: string, descriptor: string): boolean {
  if (descriptor === type || descriptor === '*') return true;
  if (!descriptor.endsWith('.*')) return false;
  const prefix = descriptor.slice(0, -2);
  return !prefix.includes('*') && (type === prefix || type.startsWith(`${prefix}.`));
}

/**
 * Throw a {@link MachineDefinitionError} for the first option of `def` its machine cannot use.
 * `inherited`: a child machine's registration, whose activities and sensitive names are its
 * parent's (checked there, against the whole tree).
 */
export function checkDefinition(id: string, def: JobDefinition, inherited = false): void {
  const where = `Machine "${id}"`;
  checkKeys(where, 'definition key', def, DEFINITION_KEYS);
  if (inherited) return;
  checkActivities(where, def.machine, def.activities);
  if (def.cancel !== undefined) checkCancel(where, def.machine, def.cancel);
  checkEventSchemas(where, def.machine, def.events, def.cancel?.event);
  if (def.sensitive !== undefined) checkSensitive(where, def);
}

function checkKeys(where: string, what: string, value: unknown, known: readonly string[]): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new MachineDefinitionError(`${where}: the ${what.replace(/ key$/, '')} must be an object.`);
  }
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new MachineDefinitionError(`${where}: unknown ${what} "${key}"${didYouMean(key, known)}; known: ${known.join(', ')}.`, { key });
    }
  }
}

/** Every actor src of a machine and of the child machines it can invoke (they share the definition's `activities`). */
function actorNames(machine: AnyStateMachine, into = new Set<string>()): Set<string> {
  for (const [src, logic] of Object.entries(machine.implementations.actors ?? {})) {
    if (into.has(src)) continue;
    into.add(src);
    if (activityKind(logic) === 'machine') actorNames(logic as AnyStateMachine, into);
  }
  return into;
}

function checkActivities(where: string, machine: AnyStateMachine, activities: JobDefinition['activities']): void {
  if (activities === undefined) return;
  if (activities === null || typeof activities !== 'object') throw new MachineDefinitionError(`${where}: \`activities\` must be an object: { <actor src>: policy }.`);
  const actors = actorNames(machine);
  for (const [name, policy] of Object.entries(activities)) {
    if (!actors.has(name)) {
      const known = [...actors].sort().join(', ') || 'none';
      throw new MachineDefinitionError(`${where}: activities names "${name}", which is not one of the machine's actors${didYouMean(name, actors)}; its actors: ${known}.`, { activity: name });
    }
    checkKeys(`${where}, activity "${name}"`, 'policy key', policy, POLICY_KEYS);
    if (policy.backoff !== undefined) checkKeys(`${where}, activity "${name}"`, 'backoff key', policy.backoff, BACKOFF_KEYS);
  }
}

/** Every state path of a machine (`a`, `a.b`), as `list --state` and the cancel state name them. */
export function statePathsOf(machine: AnyStateMachine): string[] {
  const out: string[] = [];
  const visit = (states: Record<string, { states: Record<string, unknown> }>, prefix: string): void => {
    for (const [key, node] of Object.entries(states)) {
      const path = prefix ? `${prefix}.${key}` : key;
      out.push(path);
      visit(node.states as Record<string, { states: Record<string, unknown> }>, path);
    }
  };
  visit(machine.root.states as unknown as Record<string, { states: Record<string, unknown> }>, '');
  return out;
}

function checkCancel(where: string, machine: AnyStateMachine, cancel: NonNullable<JobDefinition['cancel']>): void {
  checkKeys(where, 'cancel key', cancel, CANCEL_KEYS);
  if (cancel.state !== undefined) {
    const states = statePathsOf(machine);
    if (!states.includes(cancel.state)) {
      throw new MachineDefinitionError(
        `${where}: cancel.state "${cancel.state}" is not a state of the machine${didYouMean(cancel.state, states)}; cancel requests would never complete. Its states: ${states.join(', ')}.`,
        { state: cancel.state },
      );
    }
  }
  if (cancel.event !== undefined && !handles(machine, cancel.event)) {
    throw new MachineDefinitionError(
      `${where}: cancel.event "${cancel.event}" is not an event the machine handles${didYouMean(cancel.event, machine.events)}; its events: ${machine.events.join(', ') || 'none'}.`,
      { event: cancel.event },
    );
  }
}

/** Whether some transition of the machine takes events of this type (a schema key may be a wildcard itself). */
function handles(machine: AnyStateMachine, type: string): boolean {
  return machine.events.some((d) => matchesDescriptor(type, d) || (type.includes('*') && matchesDescriptor(d, type)));
}

function checkEventSchemas(where: string, machine: AnyStateMachine, events: JobDefinition['events'], cancelEvent: string | undefined): void {
  for (const type of Object.keys(events ?? {})) {
    if (handles(machine, type) || type === (cancelEvent ?? 'CANCEL')) continue;
    throw new MachineDefinitionError(
      `${where}: events has a schema for "${type}", which the machine never handles${didYouMean(type, machine.events)}; its events: ${machine.events.join(', ') || 'none'}.`,
      { event: type },
    );
  }
}

/** Every property name a zod schema describes, at any depth. */
function propertyNames(schema: ZodType, into: Set<string>): void {
  let json: unknown;
  try {
    json = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' });
  } catch {
    return; // a schema JSON Schema cannot describe names nothing we could check
  }
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node !== null && typeof node === 'object') {
      for (const [key, child] of Object.entries(node)) {
        if (key === 'properties' && child !== null && typeof child === 'object') for (const name of Object.keys(child)) into.add(name);
        walk(child);
      }
    }
  };
  walk(json);
}

/**
 * Each sensitive name must be a property some schema (input or event) describes. Checked only
 * when the definition has schemas: without any, a name can only be checked against payloads
 * and contexts, which registration does not see.
 */
function checkSensitive(where: string, def: JobDefinition): void {
  const schemas = [...(def.input ? [def.input] : []), ...Object.values(def.events ?? {})];
  if (!Array.isArray(def.sensitive) || schemas.length === 0) return;
  const names = new Set<string>();
  for (const schema of schemas) propertyNames(schema, names);
  for (const name of def.sensitive as readonly string[]) {
    if (!names.has(name)) {
      throw new MachineDefinitionError(
        `${where}: sensitive name "${name}" matches no property of its input or event schemas${didYouMean(name, names)}, so nothing would be redacted by it.`,
        { sensitive: name },
      );
    }
  }
}
