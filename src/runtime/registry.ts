import type { AnyStateMachine } from 'xstate';
import type { ZodType } from 'zod';
import { activityKind } from '../step/actions.ts';
import { checkDefinition, matchesDescriptor } from './definitionChecks.ts';
import { MachineDefinitionError, UnknownMachineError } from '../base/errors.ts';
import type { JobDefinition, RegisteredMachine } from '../base/definition.ts';

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** True for a value that looks like an XState v5 machine. */
export function isStateMachine(value: unknown): value is AnyStateMachine {
  return (
    typeof value === 'object' &&
    value !== null &&
    'root' in value &&
    typeof (value as { transition?: unknown }).transition === 'function' &&
    typeof (value as { getInitialSnapshot?: unknown }).getInitialSnapshot === 'function'
  );
}

/** True for a value shaped like a {@link JobDefinition}. */
export function isJobDefinition(value: unknown): value is JobDefinition {
  return typeof value === 'object' && value !== null && isStateMachine((value as { machine?: unknown }).machine);
}

/** What a machines module may export as a machine: a job definition or a bare XState machine. */
export type Definition = JobDefinition | AnyStateMachine;

/**
 * The machines a module exports: every export that is a job definition or a bare XState machine,
 * arrays of those, and a default export that is either, an array, or an object of those.
 * A bare machine that a definition in the same module wraps is left out (the definition,
 * with its version and schemas, stands for it). Each value is taken once.
 *
 * @example
 * collectDefinitions(await import('./machines/index.ts')) // [jobLifecycle]
 */
export function collectDefinitions(moduleNamespace: Record<string, unknown>): Definition[] {
  const found: Definition[] = [];
  const seen = new Set<unknown>();
  const take = (value: unknown): boolean => {
    if (!isJobDefinition(value) && !isStateMachine(value)) return false;
    if (!seen.has(value)) {
      seen.add(value);
      found.push(value);
    }
    return true;
  };
  const takeMany = (value: unknown): void => {
    if (take(value)) return;
    if (Array.isArray(value)) for (const item of value) take(item);
  };
  for (const [name, value] of Object.entries(moduleNamespace)) {
    if (take(value)) continue;
    if (Array.isArray(value)) takeMany(value);
    else if (name === 'default' && value !== null && typeof value === 'object') for (const inner of Object.values(value)) takeMany(inner);
  }
  const wrapped = new Set(found.filter(isJobDefinition).map((d) => d.machine));
  return found.filter((d) => isJobDefinition(d) || !wrapped.has(d));
}

/** Versions sort numerically when both are numbers, else as text. */
export function compareVersions(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

/** Whether a machine names this event type: as it is, or through a wildcard transition. */
export function namesEventType(def: Pick<RegisteredMachine, 'eventTypes'>, type: string): boolean {
  if (def.eventTypes.has(type)) return true;
  for (const t of def.eventTypes) if (matchesDescriptor(type, t)) return true;
  return false;
}

/**
 * The schema an event of this type is validated with: the one registered under its type, else
 * the most specific wildcard key that matches it (`user.login.*` before `user.*` before `*`).
 *
 * @example
 * const schema = eventSchemaFor(runtime.registry.get('invoice', '2')!, 'PAY');
 */
export function eventSchemaFor(def: Pick<RegisteredMachine, 'events'>, type: string): ZodType | undefined {
  if (Object.hasOwn(def.events, type)) return def.events[type];
  let best: string | undefined;
  for (const key of Object.keys(def.events)) {
    if (key.includes('*') && matchesDescriptor(type, key) && (best === undefined || key.length > best.length)) best = key;
  }
  return best === undefined ? undefined : def.events[best];
}

/** Where a job of a machine version runs: `target`, reached through the migrations of `chain` (empty: its own version). Shared: never changed by a caller. */
export type Route = { readonly target: RegisteredMachine; readonly chain: readonly RegisteredMachine[] };

/** The machines a runtime knows, by id and version. */
export class MachineRegistry {
  readonly #byId = new Map<string, Map<string, RegisteredMachine>>();
  /** `keys()`, made on first use after a registration. */
  #keys: readonly string[] | undefined;
  /** `latest(id)` by id, found on first use after a registration (a start asks for it each time). */
  readonly #latest = new Map<string, RegisteredMachine>();
  /** `srcs()`, made on first use after a registration. */
  #srcs: readonly string[] | undefined;
  /** `route(id, version)` by `id@version`, found on first use after a registration (every step of a job asks for it). */
  readonly #routes = new Map<string, Route | undefined>();

  constructor(definitions: Iterable<JobDefinition | AnyStateMachine> = []) {
    for (const def of definitions) this.register(def);
  }

  /**
   * Register a definition (or a bare machine) and the child machines it can invoke. A definition
   * whose options its machine cannot use is a {@link MachineDefinitionError} (definitionChecks.ts).
   */
  register(input: JobDefinition | AnyStateMachine): RegisteredMachine {
    return this.#register(input, false);
  }

  #register(input: JobDefinition | AnyStateMachine, inherited: boolean): RegisteredMachine {
    const def: JobDefinition = isStateMachine(input) ? { machine: input } : input;
    if (!isJobDefinition(def)) {
      throw new MachineDefinitionError('A machine definition needs `machine`: an XState v5 machine from createMachine() or setup().createMachine().');
    }
    const machine = def.machine;
    const id = def.id ?? machine.id;
    if (!id || id === '(machine)' || !ID_PATTERN.test(id)) {
      throw new MachineDefinitionError(
        `Machine id "${id}" is not usable: give the machine an \`id\` (letters, digits, _ . : -), e.g. createMachine({ id: 'invoice', ... }).`,
      );
    }
    const version = String(def.version ?? machine.version ?? 1);
    if (!ID_PATTERN.test(version)) throw new MachineDefinitionError(`Machine "${id}": version "${version}" is not usable.`);
    const versions = this.#byId.get(id) ?? new Map<string, RegisteredMachine>();
    const existing = versions.get(version);
    const bare = def.input === undefined && def.events === undefined && def.migrations === undefined && def.sensitive === undefined && def.activities === undefined && def.cancel === undefined;
    if (existing) {
      if (existing.machine !== machine) {
        throw new MachineDefinitionError(`Machine "${id}" version ${version} is registered twice with different machines: bump the version of the changed one.`);
      }
      if (bare || existing.source === input) return existing;
      if (!existing.bare) {
        throw new MachineDefinitionError(`Machine "${id}" version ${version} is registered twice with different options; register one definition per version.`);
      }
      // A definition that wraps a machine registered bare replaces it: its schemas and policies count.
    }
    for (const [type, schema] of Object.entries(def.events ?? {})) {
      if (typeof (schema as { safeParse?: unknown })?.safeParse !== 'function') {
        throw new MachineDefinitionError(`Machine "${id}": the schema for event ${type} is not a zod schema.`);
      }
    }
    if (def.input !== undefined && typeof (def.input as { safeParse?: unknown }).safeParse !== 'function') {
      throw new MachineDefinitionError(`Machine "${id}": \`input\` is not a zod schema.`);
    }
    checkDefinition(id, def, inherited);
    checkChildren(id, machine);
    limitMicrosteps(machine);
    const registered: RegisteredMachine = {
      id,
      version,
      machine,
      input: def.input,
      events: Object.assign(Object.create(null) as Record<string, ZodType>, def.events ?? {}),
      eventTypes: new Set([...machine.events, ...Object.keys(def.events ?? {})]),
      migrations: { ...(def.migrations ?? {}) },
      sensitive: new Set(def.sensitive ?? []),
      activities: { ...(def.activities ?? {}) },
      cancel: { event: def.cancel?.event ?? 'CANCEL', state: def.cancel?.state ?? 'cancelled' },
      description: def.description,
      bare,
      scopeReusable: !usesSystemIds(machine),
      hasChildMachines: Object.values(machine.implementations.actors ?? {}).some((logic) => activityKind(logic) === 'machine'),
      source: input,
    };
    versions.set(version, registered);
    this.#byId.set(id, versions);
    this.#keys = undefined;
    this.#latest.delete(id);
    this.#srcs = undefined;
    this.#routes.clear();
    // Child machines it can invoke run as child jobs: registered under `<parent id>.<src>`, same version.
    for (const [src, logic] of Object.entries(machine.implementations.actors ?? {})) {
      if (activityKind(logic) !== 'machine') continue;
      this.#register({
        machine: logic as AnyStateMachine,
        id: `${id}.${src}`,
        version,
        ...(def.activities ? { activities: def.activities } : {}),
        ...(def.sensitive ? { sensitive: def.sensitive } : {}),
        description: `child machine "${src}" of ${id}`,
      }, true);
    }
    return registered;
  }

  /** The newest version of a machine: what `start` uses. */
  latest(id: string): RegisteredMachine {
    const found = this.#latest.get(id);
    if (found) return found;
    const versions = this.#byId.get(id);
    if (!versions || versions.size === 0) {
      const known = [...this.#byId.keys()].sort().join(', ') || 'none';
      throw new UnknownMachineError(`No machine "${id}" is registered (registered: ${known}).`, { machineId: id });
    }
    const newest = [...versions.values()].sort((a, b) => compareVersions(b.version, a.version))[0]!;
    this.#latest.set(id, newest);
    return newest;
  }

  get(id: string, version: string): RegisteredMachine | undefined {
    return this.#byId.get(id)?.get(version);
  }

  /**
   * Where a job of (id, version) should run: its own version, unless a migration chain leads
   * from it to a newer registered version (then the newest reachable one).
   */
  route(id: string, version: string): Route | undefined {
    const key = `${id}@${version}`;
    if (this.#routes.has(key)) return this.#routes.get(key);
    const found = this.#route(id, version);
    // Kept only for a registered id: a stored job of an unknown machine adds nothing here.
    if (this.#byId.has(id)) this.#routes.set(key, found);
    return found;
  }

  #route(id: string, version: string): Route | undefined {
    const versions = this.#byId.get(id);
    if (!versions) return undefined;
    const chain: RegisteredMachine[] = [];
    let current = version;
    const seen = new Set<string>([version]);
    for (;;) {
      const next = [...versions.values()]
        .filter((m) => m.migrations[current] !== undefined && !seen.has(m.version))
        .sort((a, b) => compareVersions(b.version, a.version))[0];
      if (!next) break;
      chain.push(next);
      seen.add(next.version);
      current = next.version;
    }
    const target = chain.at(-1) ?? versions.get(version);
    return target ? { target, chain } : undefined;
  }

  /** Every registered machine version as `id@version` (ids and versions never hold an `@`): what a batch claim may take (`DueClaim.machines`). */
  keys(): readonly string[] {
    return (this.#keys ??= this.all().map((m) => `${m.id}@${m.version}`));
  }

  /** Every activity name (src) the registered machines declare in setup({ actors }), sorted: what a batch claim reads (`DueClaim.srcs`). */
  srcs(): readonly string[] {
    return (this.#srcs ??= [...new Set(this.all().flatMap((m) => Object.keys(m.machine.implementations.actors ?? {})))].sort());
  }

  all(): RegisteredMachine[] {
    return [...this.#byId.values()]
      .flatMap((v) => [...v.values()])
      .sort((a, b) => a.id.localeCompare(b.id) || compareVersions(a.version, b.version));
  }
}

interface StateNodeLike {
  id: string;
  invoke: { id: string; src: unknown }[];
  states: Record<string, StateNodeLike>;
}

/**
 * Microsteps one transition may take (XState's `maxIterations`) when the machine sets no limit
 * of its own. XState's default is none: a loop of eventless transitions whose guards never stop
 * it would spin forever inside the transition, and the job's event, queued, would hang every
 * runtime that opens the file. Past the limit XState throws, and the event is recorded failed
 * (a start is refused).
 */
export const MAX_MICROSTEPS = 10_000;

/** Set {@link MAX_MICROSTEPS} on a machine that has no limit (XState reads it on every path: start, event, child, systemId). */
function limitMicrosteps(machine: AnyStateMachine): void {
  const options = machine.options as { maxIterations?: number } | undefined;
  if (options && !Number.isFinite(options.maxIterations ?? Infinity)) options.maxIterations = MAX_MICROSTEPS;
}

/**
 * Refuse machines whose children Spool could not persist and restore: invoked actors need a named
 * src (a key of `setup({ actors })`) and must be fromPromise activities or child machines. An
 * invoke without an id keeps XState's own, `<index>.<state id>` (e.g. `0.order.charging`): it is
 * derived from the machine's definition, not from a counter, so it is the same in every process
 * and after every restart, and Spool keys the invocation's effect and events by it as by any id.
 * (A spawned child's generated id, `x:N`, is a process-wide counter: a transition that spawns one
 * is refused, src/step/actions.ts.)
 */
function checkChildren(machineId: string, machine: AnyStateMachine): void {
  const actors = (machine.implementations.actors ?? {}) as Record<string, unknown>;
  const visit = (node: StateNodeLike): void => {
    node.invoke.forEach((inv) => {
      const where = `Machine "${machineId}", state "${node.id}"`;
      if (typeof inv.src !== 'string' || !(inv.src in actors)) {
        throw new MachineDefinitionError(
          `${where}: invoke "${inv.id}" uses inline logic, which cannot be persisted. Declare it by name: setup({ actors: { ${inv.id}: fromPromise(...) } }) and invoke: { id: '${inv.id}', src: '${inv.id}' }.`,
        );
      }
      const kind = activityKind(actors[inv.src]);
      if (kind === 'machine') {
        checkChildren(`${machineId}.${inv.src}`, actors[inv.src] as AnyStateMachine);
        return;
      }
      if (kind !== 'promise') {
        throw new MachineDefinitionError(
          `${where}: invoke "${inv.id}" (src "${inv.src}") is callback/observable logic, which cannot be persisted; Spool runs fromPromise activities and child machines durably.`,
        );
      }
    });
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(machine.root as unknown as StateNodeLike);
}

function usesSystemIds(machine: AnyStateMachine): boolean {
  const visit = (node: StateNodeLike): boolean =>
    node.invoke.some((inv) => (inv as { systemId?: unknown }).systemId !== undefined) || Object.values(node.states).some(visit);
  return visit(machine.root as unknown as StateNodeLike);
}
