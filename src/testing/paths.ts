import type { AnyStateMachine } from 'xstate';
import { getAdjacencyMap } from 'xstate/graph';
import { MachineRegistry, isStateMachine, type JobDefinition, type JsonValue, type RegisteredMachine } from '../index.ts';
import { coverageReport, type CoverageReport, type Waiver } from './coverage.ts';
import { JobModel, SampleError, toJson, viewOf, type ModelState, type PathStep, type PredictedRecord, type Samples, type StateView } from './model.ts';
import { listTransitions, type StaticTransition } from './transitions.ts';

/**
 * Options of {@link generatePaths} (and of the path tests built on it).
 *
 * How traversal is bounded: the graph's nodes are states of the job as the runtime sees it,
 * keyed by `stateKey` (default: state value and the whole context) plus its pending timers
 * and activities (relative to now); events are the samples below, only those the current
 * state has a transition for. A finite set of samples over a context that takes finitely many
 * values gives a finite graph. A counter that can grow forever does not: abstract it with
 * `stateKey` (e.g. cap it), or traversal stops at `limit` with a {@link PathGenerationError}.
 * Paths are the shortest way to each transition (one per transition, prefixes merged), not all paths.
 */
export interface PathOptions {
  /** Input of the job (validated by the definition's input schema). Default `{}`. */
  input?: unknown;
  /** Several inputs, each explored on its own (e.g. a flag that an always-guard reads). Overrides `input`. */
  inputs?: readonly unknown[];
  /**
   * Per event type: sample events (the `type` may be left out), a list of them, or a function of
   * the state giving them. Events without samples are sent as `{ type }`. Every sample is checked
   * against the definition's event schema.
   *
   * @example
   * events: { APPROVE: [{ by: 'ann' }, { by: 'bob', comment: 'ok' }], PROGRESS: (s) => [{ percent: 50 }] }
   */
  events?: Record<string, Samples<Record<string, unknown>>>;
  /** Per invoke id or src: sample outputs for `xstate.done.actor.<id>`. Default `null`. */
  outputs?: Record<string, Samples<unknown>>;
  /** Per invoke id or src: sample errors for `xstate.error.actor.<id>` (given with `runtime.fail`). Default `{ name: 'Error', message: 'sample failure' }`. */
  errors?: Record<string, Samples<unknown>>;
  /** Per src: attempts of every invocation that fail with a retryable error first (exercises the retry policy). Default 0. */
  failAttempts?: Record<string, number>;
  /** Activities whose attempt may be interrupted by a crash: `unsafe` (unsafeToRepeat ones, default), `all`, `none`. */
  interrupts?: 'unsafe' | 'all' | 'none';
  /** The machine part of the graph key (an abstraction). Default `({ value, context }) => ({ value, context })`. */
  stateKey?: (state: StateView) => unknown;
  /** Largest number of (state, step) explorations per input. Default 20000. */
  limit?: number;
  /** Job id used in every run (effect and timer ids derive from it). Default `path-test`. */
  jobId?: string;
  /** Transitions left uncovered on purpose, each with a reason. */
  waive?: readonly Waiver[];
}

/** What the model predicts after a step. */
export interface PredictedState {
  value: JsonValue;
  context: JsonValue;
  status: ModelState['status'];
  /** Milliseconds after the start. */
  now: number;
  revision: number;
  /** History records the step writes. */
  records: PredictedRecord[];
  /** Ids of static transitions the step takes. */
  taken: string[];
}

export interface PlannedStep {
  step: PathStep;
  label: string;
  expect: PredictedState;
}

/** One generated path: start the job with `input`, then take `steps`. */
export interface PathPlan {
  /** 1-based, stable for the same machine and options. */
  id: number;
  /** Named by its steps: `START → FINISH ⇒ completed`. */
  name: string;
  inputIndex: number;
  input: JsonValue;
  start: PredictedState;
  steps: PlannedStep[];
  /** Static transitions this path was generated to cover. */
  covers: string[];
}

export interface GeneratedPaths {
  machineId: string;
  version: string;
  /** The definition as given. */
  definition: JobDefinition;
  /** Distinct graph states explored, over all inputs. */
  states: number;
  /** Explored edges (state, step), over all inputs. */
  edges: number;
  transitions: StaticTransition[];
  paths: PathPlan[];
  coverage: CoverageReport;
  jobId: string;
  failAttempts: Record<string, number>;
}

/** Path generation could not finish: the message says why and what to change. */
export class PathGenerationError extends Error {
  override name = 'PathGenerationError';
  readonly code = 'SPOOL_PATH_GENERATION';
}

const DEFAULT_LIMIT = 20_000;
const CANDIDATES_PER_TRANSITION = 8;

type Edge = { from: string; step: PathStep; to: string; result: ModelState; order: number };

/**
 * Compute paths that cover every transition of a machine, on a model of the Spool runtime
 * (timers in due order, activities with retries, snapshots through JSON), with `xstate/graph`.
 *
 * @example
 * const { paths, coverage } = generatePaths(approvalFlow, {
 *   input: { subject: 'deploy', remindAfterMs: 1000, deadlineMs: 5000 },
 *   events: { APPROVE: { by: 'ann' }, REJECT: { by: 'bob', reason: 'no' }, CANCEL: {} },
 * });
 * coverage.gaps; // [] when every transition is taken
 */
export function generatePaths(definition: JobDefinition | AnyStateMachine, options: PathOptions = {}): GeneratedPaths {
  const def: JobDefinition = isStateMachine(definition) ? { machine: definition } : definition;
  const registered = registeredOf(def);
  const jobId = options.jobId ?? 'path-test';
  const failAttempts = { ...(options.failAttempts ?? {}) };
  const model = new JobModel({
    def: registered,
    jobId,
    events: options.events ?? {},
    outputs: options.outputs ?? {},
    errors: options.errors ?? {},
    failAttempts,
    interrupts: options.interrupts ?? 'unsafe',
    stateKey: options.stateKey,
  });
  checkOptionKeys(registered, options);
  const transitions = listTransitions(registered.machine);
  const inputs = options.inputs ?? [options.input ?? {}];
  if (inputs.length === 0) throw new PathGenerationError('`inputs` is empty: give at least one input.');
  const limit = options.limit ?? DEFAULT_LIMIT;

  const chosen: Array<{ inputIndex: number; steps: PathStep[]; covers: Set<string> }> = [];
  const covered = new Set<string>();
  const explored = new Exploration();
  let states = 0;
  let edges = 0;

  inputs.forEach((input, inputIndex) => {
    const start = model.initial(input);
    const graph = explore(model, start, limit, registered.id, inputIndex, inputs.length);
    states += graph.keys.length;
    edges += graph.edges.length;
    explored.add(graph.edges, graph.stateOf);
    start.taken.forEach((t) => covered.add(t.id));
    if (start.taken.length > 0) chosen.push({ inputIndex, steps: [], covers: new Set(start.taken.map((t) => t.id)) });

    for (const t of transitions) {
      if (covered.has(t.id)) continue;
      const candidates = graph.edges
        .filter((e) => graph.depth.has(e.from) && e.result.taken.some((x) => x.id === t.id))
        .sort((a, b) => graph.depth.get(a.from)! - graph.depth.get(b.from)! || a.order - b.order)
        .slice(0, CANDIDATES_PER_TRANSITION);
      for (const edge of candidates) {
        const steps = [...graph.prefix(edge.from), edge.step];
        const replayed = tryReplay(model, input, steps);
        if (!replayed) continue;
        const taken = new Set([...replayed.start.taken, ...replayed.states.flatMap((s) => s.taken)].map((x) => x.id));
        if (!taken.has(t.id)) continue;
        taken.forEach((id) => covered.add(id));
        chosen.push({ inputIndex, steps, covers: new Set([t.id]) });
        break;
      }
    }
  });

  const merged = mergePrefixes(chosen);
  const paths = merged.map((p, i) => plan(model, inputs, p, i + 1, inputs.length));
  const finalCovered = new Set(paths.flatMap((p) => [...p.start.taken, ...p.steps.flatMap((s) => s.expect.taken)]));
  const coverage = coverageReport(registered.id, transitions, finalCovered, options.waive ?? [], explored.notes(transitions, finalCovered));
  return {
    machineId: registered.id,
    version: registered.version,
    definition: def,
    states,
    edges,
    transitions,
    paths,
    coverage,
    jobId,
    failAttempts,
  };
}

/** A sample for an event or activity the machine does not have is a typo: say so instead of ignoring it. */
function checkOptionKeys(def: RegisteredMachine, options: PathOptions): void {
  const events = [...def.eventTypes].filter((t) => !t.startsWith('xstate.')).sort();
  for (const type of Object.keys(options.events ?? {})) {
    if (!def.eventTypes.has(type)) throw new SampleError(`events.${type}: machine ${def.id} has no event ${type} (its events: ${events.join(', ') || 'none'}).`);
  }
  const srcs = Object.keys(def.machine.implementations.actors ?? {});
  const ids = invokeIds(def.machine);
  const known = [...new Set([...ids, ...srcs])].sort();
  for (const [what, table] of [['outputs', options.outputs], ['errors', options.errors]] as const) {
    for (const key of Object.keys(table ?? {})) {
      if (!known.includes(key)) throw new SampleError(`${what}.${key}: machine ${def.id} invokes no actor with that id or src (it has: ${known.join(', ') || 'none'}).`);
    }
  }
  for (const src of Object.keys(options.failAttempts ?? {})) {
    if (!srcs.includes(src)) throw new SampleError(`failAttempts.${src}: machine ${def.id} has no actor src ${src} (it has: ${srcs.join(', ') || 'none'}).`);
  }
}

function invokeIds(machine: AnyStateMachine): string[] {
  type Node = { invoke: Array<{ id: string }>; states: Record<string, Node> };
  const out: string[] = [];
  const visit = (node: Node): void => {
    node.invoke.forEach((i) => out.push(i.id));
    Object.values(node.states).forEach(visit);
  };
  visit(machine.root as unknown as Node);
  return out;
}

function registeredOf(def: JobDefinition): RegisteredMachine {
  const registry = new MachineRegistry([def]);
  const [registered] = registry.all();
  if (!registered) throw new PathGenerationError('The definition did not register.');
  return registered;
}

interface Graph {
  keys: string[];
  edges: Edge[];
  stateOf: Map<string, ModelState>;
  depth: Map<string, number>;
  prefix: (key: string) => PathStep[];
}

/** Explore the model with `xstate/graph`'s adjacency map, then index shortest prefixes (BFS). */
function explore(model: JobModel, start: ModelState, limit: number, machineId: string, inputIndex: number, inputCount: number): Graph {
  type GraphEvent = { type: string; step: PathStep };
  const logic = {
    transition: (state: ModelState, event: GraphEvent) => model.step(state, event.step),
    getInitialSnapshot: () => start,
    getPersistedSnapshot: (state: ModelState) => state,
  };
  // ModelState is a snapshot in the graph's sense ({status, output, error}); XState's Snapshot type is a union it cannot name.
  type Adjacency = Record<string, { state: ModelState; transitions: Record<string, { event: GraphEvent; state: ModelState }> }>;
  const traverse = getAdjacencyMap as unknown as (logic: unknown, options: Record<string, unknown>) => Adjacency;
  let adjacency: Adjacency;
  try {
    adjacency = traverse(logic, {
      fromState: start,
      events: (state: ModelState) => model.steps(state).map((step) => ({ type: step.type, step })),
      serializeState: (state: ModelState) => model.key(state),
      serializeEvent: (event: GraphEvent) => JSON.stringify(event.step),
      limit,
    });
  } catch (error) {
    if (error instanceof Error && /Traversal limit exceeded/.test(error.message)) {
      throw new PathGenerationError(
        `Path generation for ${machineId}${inputCount > 1 ? ` (input ${inputIndex + 1})` : ''} explored more than ${limit} (state, step) pairs without finishing. ` +
          'The graph key includes the whole context, so a counter or other unbounded context makes the graph infinite. ' +
          'Pass `stateKey` to abstract it (e.g. ({ value, context }) => ({ value, count: Math.min(context.count, 3) })), give fewer event samples, or raise `limit`.',
      );
    }
    throw error;
  }
  const keys = Object.keys(adjacency);
  const edges: Edge[] = [];
  let order = 0;
  for (const key of keys) {
    for (const { event, state } of Object.values(adjacency[key]!.transitions)) {
      edges.push({ from: key, step: event.step, to: model.key(state), result: state, order: order++ });
    }
  }
  const out = new Map<string, Edge[]>();
  for (const e of edges) out.set(e.from, [...(out.get(e.from) ?? []), e]);
  const startKey = model.key(start);
  const depth = new Map<string, number>([[startKey, 0]]);
  const parent = new Map<string, Edge>();
  const queue = [startKey];
  while (queue.length > 0) {
    const key = queue.shift()!;
    for (const e of out.get(key) ?? []) {
      if (depth.has(e.to)) continue;
      depth.set(e.to, depth.get(key)! + 1);
      parent.set(e.to, e);
      queue.push(e.to);
    }
  }
  const prefix = (key: string): PathStep[] => {
    const steps: PathStep[] = [];
    for (let k = key, e = parent.get(k); e; k = e.from, e = parent.get(k)) steps.unshift(e.step);
    return steps;
  };
  const stateOf = new Map(keys.map((k) => [k, adjacency[k]!.state] as const));
  return { keys, edges, stateOf, depth, prefix };
}

function tryReplay(model: JobModel, input: unknown, steps: PathStep[]): { start: ModelState; states: ModelState[] } | undefined {
  try {
    return replay(model, input, steps);
  } catch {
    return undefined;
  }
}

/** The concrete states along a path: the graph may have stored another state under the same (abstract) key. */
function replay(model: JobModel, input: unknown, steps: readonly PathStep[]): { start: ModelState; states: ModelState[] } {
  const start = model.initial(input);
  const states: ModelState[] = [];
  let state = start;
  for (const step of steps) {
    state = model.step(state, step);
    states.push(state);
  }
  return { start, states };
}

/** Drop paths that are a prefix of another path of the same input; the longer one covers both. */
function mergePrefixes(chosen: Array<{ inputIndex: number; steps: PathStep[]; covers: Set<string> }>) {
  const keyed = chosen.map((c, order) => ({ ...c, order, keys: c.steps.map((s) => JSON.stringify(s)) }));
  const out: typeof keyed = [];
  for (const c of [...keyed].sort((a, b) => b.keys.length - a.keys.length || a.order - b.order)) {
    const host = out.find((o) => o.inputIndex === c.inputIndex && c.keys.every((k, i) => o.keys[i] === k));
    if (host) {
      c.covers.forEach((id) => host.covers.add(id));
      host.order = Math.min(host.order, c.order);
    } else out.push(c);
  }
  // Back to generation order (input, then first covered transition).
  return out.sort((a, b) => a.order - b.order);
}

function predicted(state: ModelState): PredictedState {
  const view = viewOf(state);
  return { value: view.value, context: view.context, status: state.status, now: state.now, revision: state.revision, records: state.records, taken: state.taken.map((t) => t.id) };
}

function plan(model: JobModel, inputs: readonly unknown[], p: { inputIndex: number; steps: PathStep[]; covers: Set<string> }, id: number, inputCount: number): PathPlan {
  const input = inputs[p.inputIndex];
  const { start, states } = replay(model, input, p.steps);
  let prevNow = 0;
  const steps: PlannedStep[] = p.steps.map((step, i) => {
    const expect = predicted(states[i]!);
    const label = stepLabel(step, expect, prevNow);
    prevNow = expect.now;
    return { step, label, expect };
  });
  const last = states.at(-1) ?? start;
  const name = `${inputCount > 1 ? `[input ${p.inputIndex + 1}] ` : ''}${steps.length ? steps.map((s) => s.label).join(' → ') : '(start)'} ⇒ ${formatValue(toJson(last.machine.value))}`;
  return { id, name, inputIndex: p.inputIndex, input: toJson(input ?? {}), start: predicted(start), steps, covers: [...p.covers] };
}

/** `APPROVE`, `APPROVE#2` (second sample), `time+1d[REMIND]`, `done.reserve`, `error.export`, `crash.export`. */
export function stepLabel(step: PathStep, expect: PredictedState, prevNow: number): string {
  const n = (sample: number) => (sample > 1 ? `#${sample}` : '');
  switch (step.via) {
    case 'send':
      return `${step.type}${n(step.sample)}`;
    case 'time':
      return `time+${formatMs(expect.now - prevNow)}[${expect.records.length ? expect.records.map((r) => shortEvent(r.eventType)).join(', ') : 'retry'}]`;
    case 'done':
      return `done.${step.actorId}${n(step.sample)}`;
    case 'error':
      return `error.${step.actorId}${n(step.sample)}`;
    case 'interrupt':
      return `crash.${step.actorId}`;
  }
}

export function shortEvent(type: string): string {
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return `after.${after[1]}`;
  return type.replace(/^xstate\.(done|error)\.actor\./, '$1.');
}

export function formatMs(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ];
  for (const [size, unit] of units) if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** `processing`, `a.b`, `{a.b, c.d}`. */
export function formatValue(value: unknown, prefix = ''): string {
  const leaves = (v: unknown, p: string): string[] => {
    if (typeof v === 'string') return [p ? `${p}.${v}` : v];
    if (v === null || typeof v !== 'object') return [p];
    const entries = Object.entries(v);
    return entries.length === 0 ? [p] : entries.flatMap(([k, c]) => leaves(c, p ? `${p}.${k}` : k));
  };
  const all = leaves(value, prefix);
  return all.length === 1 ? all[0]! : `{${all.join(', ')}}`;
}

/** What exploration saw, to explain gaps. */
class Exploration {
  readonly #reached = new Set<string>();
  readonly #received = new Set<string>();
  readonly #failed = new Map<string, string>();

  add(edges: readonly Edge[], stateOf: ReadonlyMap<string, ModelState>): void {
    for (const s of stateOf.values()) for (const node of nodesOf(s)) this.#reached.add(node);
    for (const e of edges) {
      const from = stateOf.get(e.from);
      const nodes = from ? nodesOf(from) : [];
      for (const r of e.result.records) for (const node of nodes) this.#received.add(`${node} ${r.eventType}`);
      for (const f of e.result.failures) {
        const type = f.slice(0, f.indexOf(':'));
        if (!this.#failed.has(type)) this.#failed.set(type, f.slice(f.indexOf(':') + 2));
      }
    }
  }

  notes(transitions: readonly StaticTransition[], covered: ReadonlySet<string>): Map<string, string> {
    const notes = new Map<string, string>();
    for (const t of transitions) {
      if (covered.has(t.id)) continue;
      let note: string;
      if (!this.#reached.has(t.source)) note = `state ${t.source} is never reached by the generated steps`;
      else if (this.#failed.has(t.event)) note = `a ${t.event} event failed during exploration: ${this.#failed.get(t.event)}`;
      else if (t.eventless) note = `${t.source} was reached, but this candidate was never the one taken (guard false, or an earlier candidate taken)`;
      else if (this.#received.has(`${t.source} ${t.event}`)) note = `${t.event} was received in ${t.source}, but this candidate was never the one taken (guard false, or an earlier candidate taken)`;
      else note = `no generated step delivers ${t.event} while in ${t.source} (add a sample, an output/error, or a timer that leads there)`;
      notes.set(t.id, note);
    }
    return notes;
  }
}

function nodesOf(state: ModelState): string[] {
  return ((state.machine as unknown as { _nodes: Array<{ id: string }> })._nodes ?? []).map((n) => n.id);
}
