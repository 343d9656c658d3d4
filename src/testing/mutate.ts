import { createMachine, not, type AnyStateMachine } from 'xstate';
import { isStateMachine, type JobDefinition } from '../index.ts';
import { diffGolden, goldenOf, readGolden, type GoldenFile } from './golden.ts';
import { generatePaths, type GeneratedPaths } from './paths.ts';
import type { PathTestOptions } from './runPathTests.ts';
import { runWalks } from './walks.ts';

/**
 * Statechart mutation testing: small changes to a machine's config (a bug someone could write),
 * each run through the machine's path tests (coverage, invariants and expectations, golden file,
 * walks). A mutant that passes them all survives: the checks do not tell it from the machine.
 */
export interface Mutant {
  /** What changed: `retarget APPROVE to rejected`, `negate guard enough`, `history deep → shallow`. */
  mutation: string;
  /** Where: the state node, and the part of it (`approval.pending on.APPROVE[0]`). */
  location: string;
  machine: AnyStateMachine;
}

export interface MutationResult {
  machine: string;
  total: number;
  killed: number;
  survived: Array<{ machine: string; mutation: string; location: string }>;
  /** Per killed mutant: what killed it (`coverage`, `invariant …`, `golden`, `walk`, `generation`). */
  kills: Array<{ mutation: string; location: string; by: string }>;
  /** The machine itself fails its path tests: mutants are not judged (then total is 0). */
  error: string | null;
  durationMs: number;
}

type Config = Record<string, unknown>;

/** A deep copy of a config's plain objects and arrays; functions and other objects (actions, guards) are shared. */
function clone<T>(value: T): T {
  if (Array.isArray(value)) return value.map(clone) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clone(v)])) as T;
  }
  return value;
}

/** One transition slot of a state node config: read it, write it (as an object), where it is. */
interface Slot {
  node: Config;
  nodeId: string;
  where: string;
  get: () => Config;
  set: (t: Config | undefined) => void;
}

/** Every transition of a state node config, each candidate of an array a slot of its own. */
function slotsOf(node: Config, nodeId: string): Slot[] {
  const out: Slot[] = [];
  const add = (holder: Config, key: string, where: string) => {
    const value = holder[key];
    const asObject = (v: unknown): Config => (typeof v === 'string' ? { target: v } : (v as Config));
    if (Array.isArray(value)) {
      value.forEach((_, i) =>
        out.push({ node, nodeId, where: `${where}[${i}]`, get: () => asObject((holder[key] as unknown[])[i]), set: (t) => ((holder[key] as unknown[])[i] = t ?? {}) }),
      );
    } else if (value !== undefined && value !== null) {
      out.push({ node, nodeId, where, get: () => asObject(holder[key]), set: (t) => (holder[key] = t ?? {}) });
    }
  };
  for (const group of ['on', 'after'] as const) {
    const table = node[group] as Config | undefined;
    if (table && typeof table === 'object') for (const key of Object.keys(table)) add(table, key, `${group}.${key}`);
  }
  add(node, 'always', 'always');
  add(node, 'onDone', 'onDone');
  const invokes = node['invoke'];
  const list = (Array.isArray(invokes) ? invokes : invokes ? [invokes] : []) as Config[];
  list.forEach((inv, i) => {
    add(inv, 'onDone', `invoke[${i}].onDone`);
    add(inv, 'onError', `invoke[${i}].onError`);
  });
  return out;
}

/** Every state node config with its id and its parent's child names. */
function nodesOf(config: Config, rootId: string): Array<{ node: Config; id: string; siblings: string[] }> {
  const out: Array<{ node: Config; id: string; siblings: string[] }> = [];
  const visit = (node: Config, id: string, siblings: string[]) => {
    out.push({ node, id, siblings });
    const states = (node['states'] ?? {}) as Record<string, Config>;
    const names = Object.keys(states).filter((k) => states[k]!['type'] !== 'history');
    for (const [key, child] of Object.entries(states)) visit(child, `${id}.${key}`, names);
  };
  visit(config, rootId, []);
  return out;
}

/**
 * The mutants of a machine, in a stable order: for each state node, each transition retargeted
 * to a sibling state, its guard dropped and negated, each action dropped, a numeric delay doubled,
 * onDone/onError swapped, a final state made non-final, a history state switched deep/shallow.
 */
export function mutantsOf(machine: AnyStateMachine): Mutant[] {
  const base = machine.config as Config;
  const rootId = (machine.root as unknown as { id: string }).id;
  const count = nodesOf(base, rootId).length;
  const out: Mutant[] = [];
  // Each operator edits a fresh copy: find the same node in it by position.
  const edit = (mutation: string, location: string, change: (copy: Config) => boolean) => {
    const copy = clone(base);
    if (!change(copy)) return;
    try {
      out.push({ mutation, location, machine: createMachine(copy as never, machine.implementations as never) as unknown as AnyStateMachine });
    } catch {
      // XState refuses the config (e.g. a target that does not resolve): not a mutant.
    }
  };
  for (let n = 0; n < count; n += 1) {
    const { node, id, siblings } = nodesOf(base, rootId)[n]!;
    const at = (copy: Config) => nodesOf(copy, rootId)[n]!.node;
    const slots = slotsOf(node, id);
    slots.forEach((slot, s) => {
      const t = slot.get();
      const here = (copy: Config) => slotsOf(at(copy), id)[s]!;
      const location = `${id} ${slot.where}`;
      // Retarget: to the first sibling of the source that is not the current target.
      const target = typeof t['target'] === 'string' ? t['target'] : null;
      const other = siblings.find((name) => name !== target && !id.endsWith(`.${name}`));
      if (target !== null && other !== undefined && !target.includes('.') && !target.startsWith('#')) {
        edit(`retarget ${slot.where} from ${target} to ${other}`, location, (c) => (here(c).set({ ...here(c).get(), target: other }), true));
      }
      if (t['guard'] !== undefined) {
        edit(`drop guard of ${slot.where}`, location, (c) => {
          const { guard: _guard, ...rest } = here(c).get();
          here(c).set(rest);
          return true;
        });
        edit(`negate guard of ${slot.where}`, location, (c) => (here(c).set({ ...here(c).get(), guard: not(t['guard'] as never) }), true));
      }
      const actions = t['actions'];
      const actionList = Array.isArray(actions) ? actions : actions !== undefined ? [actions] : [];
      actionList.forEach((_, i) =>
        edit(`drop action ${i + 1} of ${slot.where}`, location, (c) => (here(c).set({ ...here(c).get(), actions: actionList.filter((__, j) => j !== i) }), true)),
      );
    });
    mutateNode(node, id, n, at, edit);
  }
  return out;
}

/** The node-level operators: delays, onDone/onError swap, final, history. */
function mutateNode(node: Config, id: string, n: number, at: (copy: Config) => Config, edit: (mutation: string, location: string, change: (copy: Config) => boolean) => void): void {
  for (const key of Object.keys((node['after'] ?? {}) as Config)) {
    const ms = Number(key);
    if (!Number.isFinite(ms) || ms <= 0) continue;
    edit(`delay after.${key} → ${ms * 2}`, `${id} after.${key}`, (c) => {
      const after = at(c)['after'] as Config;
      const entries = Object.entries(after).map(([k, v]) => [k === key ? String(ms * 2) : k, v] as const);
      at(c)['after'] = Object.fromEntries(entries);
      return true;
    });
  }
  const invokes = node['invoke'];
  (Array.isArray(invokes) ? invokes : invokes ? [invokes] : []).forEach((inv: Config, i: number) => {
    if (inv['onDone'] === undefined || inv['onError'] === undefined) return;
    edit(`swap invoke[${i}] onDone/onError`, `${id} invoke[${i}]`, (c) => {
      const list = at(c)['invoke'];
      const target = (Array.isArray(list) ? list[i] : list) as Config;
      [target['onDone'], target['onError']] = [target['onError'], target['onDone']];
      return true;
    });
  });
  if (node['type'] === 'final') {
    edit(`${id} no longer final`, id, (c) => {
      delete at(c)['type'];
      delete at(c)['output'];
      return true;
    });
  }
  if (node['type'] === 'history') {
    const now = node['history'] === 'deep' ? 'deep' : 'shallow';
    const next = now === 'deep' ? 'shallow' : 'deep';
    edit(`history ${now} → ${next}`, id, (c) => ((at(c)['history'] = next), true));
  }
}

/**
 * Run the mutants of one definition through its path tests on the model (coverage, checks,
 * golden file, walks; not the runtime replays: the runtime runs whatever machine it is given,
 * and a replay checks the runtime against the model of that same machine).
 */
export function mutationTest(definition: JobDefinition | AnyStateMachine, options: PathTestOptions, golden: { file: string } | null, seed = 1): MutationResult {
  const started = Date.now();
  const def: JobDefinition = isStateMachine(definition) ? { machine: definition } : definition;
  let original: GeneratedPaths;
  const result: MutationResult = { machine: def.id ?? def.machine.id, total: 0, killed: 0, survived: [], kills: [], error: null, durationMs: 0 };
  try {
    original = generatePaths(def, options);
  } catch (error) {
    result.error = `the machine itself fails path generation: ${(error as Error).message}`;
    return { ...result, durationMs: Date.now() - started };
  }
  result.machine = original.machineId;
  const own = killer(original, options, null, seed);
  if (own !== null) {
    result.error = `the machine itself fails its path tests (${own}): fix that first`;
    return { ...result, durationMs: Date.now() - started };
  }
  const reference: GoldenFile | null = golden === null ? null : (readGolden(golden.file) ?? goldenOf(original));
  for (const mutant of mutantsOf(def.machine)) {
    result.total += 1;
    let by: string | null;
    try {
      by = killer(generatePaths({ ...def, machine: mutant.machine }, options), options, reference, seed);
    } catch (error) {
      by = `generation (${(error as Error).message.split('\n')[0]!.slice(0, 80)})`;
    }
    if (by === null) result.survived.push({ machine: original.machineId, mutation: mutant.mutation, location: mutant.location });
    else {
      result.killed += 1;
      result.kills.push({ mutation: mutant.mutation, location: mutant.location, by });
    }
  }
  return { ...result, durationMs: Date.now() - started };
}

/** What fails for generated paths: coverage, a check, the golden file, a walk; null when all pass. */
function killer(g: GeneratedPaths, options: PathTestOptions, golden: GoldenFile | null, seed: number): string | null {
  if (g.coverage.gaps.length > 0 || g.coverage.unusedWaivers.length > 0 || g.children.some((c) => c.coverage.gaps.length > 0 || c.coverage.unusedWaivers.length > 0)) return 'coverage';
  if (g.violations.length > 0) return g.violations[0]!.check;
  if (golden && diffGolden(golden, '(golden)', g).length > 0) return 'golden';
  if (options.walks !== false) {
    const w = options.walks ?? {};
    // Fewer walks per mutant (the same seed for each): the whole analysis stays within seconds.
    const walks = runWalks(g, { ...w, seed: w.seed ?? seed, runs: Math.min(w.runs ?? 200, 50), timeMs: w.timeMs ?? 10_000, replay: 0 });
    if (walks.violation) return 'walk';
  }
  return null;
}
