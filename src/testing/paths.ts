import type { AnyStateMachine } from 'xstate';
import { MachineRegistry, isStateMachine, type JobDefinition, type JsonValue, type RegisteredMachine } from '../internal.ts';
import { coverageReport, type CoverageReport, type Waiver } from './coverage.ts';
import { JobModel, SampleError, toJson, viewOf, type JobOptions, type ModelState, type PathStep, type PredictedRecord, type Samples, type StateView } from './model.ts';
import { allJobs } from './modelState.ts';
import { listTransitions, type StaticTransition } from './transitions.ts';
import { formatValue, stepLabel } from './labels.ts';
import { historiesOf, historyKeys, nodesOf } from './histories.ts';
import { PathGenerationError, explore, replay, tryReplay, type Edge, type Graph } from './explore.ts';

export { PathGenerationError } from './explore.ts';
import { Checker, resolveStep, runCheck, statePaths, valueMatches, violation, type Check, type CheckedSnapshot, type CheckViolation, type PathChecks, type StepSpec } from './checks.ts';

/**
 * Options of {@link generatePaths} (and of the path tests built on it).
 *
 * How traversal is bounded: the graph's nodes are states of the job as the runtime sees it,
 * keyed by `stateKey` (default: state value and the whole context) plus its pending timers
 * and activities (relative to now), and the same of each running child job; events are the
 * samples below, only those the current state has a transition for. A finite set of samples
 * over a context that takes finitely many values gives a finite graph. A counter that can grow
 * forever does not: abstract it with `stateKey` (e.g. cap it), or traversal stops at `limit`
 * with a {@link PathGenerationError}. Paths are the shortest way to each transition (one per
 * transition, prefixes merged), not all paths.
 */
export interface PathOptions extends PathChecks {
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
  /**
   * Per child machine (by its src in `setup({ actors })`): samples, abstractions and waivers for
   * its child jobs. A child job's events are sent to it directly too (`runtime.send(childJobId, …)`),
   * each handled type with its samples; `events: { DONE: [] }` keeps one from outside.
   *
   * @example
   * children: { checker: { events: { NOTE: { text: 'typo' } }, outputs: { lint: { ok: true } }, stateKey: ({ value }) => value } }
   */
  children?: Record<string, ChildPathOptions>;
  /** Largest number of (state, step) explorations per input. Default 20000. */
  limit?: number;
  /** Job id used in every run (effect and timer ids derive from it). Default `path-test`. */
  jobId?: string;
  /** Transitions left uncovered on purpose, each with a reason. */
  waive?: readonly Waiver[];
}

/** Options for the child jobs of one child machine: the same as a machine's, for its own events, activities and transitions. */
export interface ChildPathOptions {
  /** Per event type of the child machine: samples of events sent to the child job directly. */
  events?: Record<string, Samples<Record<string, unknown>>>;
  /** Per invoke id or src of the child's activities: sample outputs. */
  outputs?: Record<string, Samples<unknown>>;
  /** Per invoke id or src of the child's activities: sample errors. */
  errors?: Record<string, Samples<unknown>>;
  /** Per src of the child's activities: attempts that fail retryably first. */
  failAttempts?: Record<string, number>;
  /** The child's part of the graph key. Default `({ value, context }) => ({ value, context })`. */
  stateKey?: (state: StateView) => unknown;
  /** The child machine's transitions left uncovered on purpose. */
  waive?: readonly Waiver[];
  /** Compare the child jobs' context at every step (default), never, or through a projection. */
  compareContext?: boolean | ((context: JsonValue) => unknown);
  /** Its own child machines. */
  children?: Record<string, ChildPathOptions>;
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
  /**
   * The child jobs after the step, in creation order: running ones, and ones that ended during
   * it (an ended child job is not listed again; its last prediction stands).
   */
  children: PredictedChild[];
}

/** What the model predicts of one child job after a step. */
export interface PredictedChild {
  /** Invoke ids from the job under test, joined by `/`. */
  path: string;
  jobId: string;
  /** `<parent id>.<src>`. */
  machineId: string;
  value: JsonValue;
  context: JsonValue;
  status: ModelState['status'];
  /** History records the step writes to this child job (its `xstate.init` record in the step that created it). */
  records: PredictedRecord[];
  /** Ids of static transitions of the child machine the step takes. */
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
  /** Static transitions this path was generated to cover (a child machine's as `<child machine id>: <transition id>`). */
  covers: string[];
  /** A named path's expectation on its last snapshot. */
  expectation?: { name: string; check: Check };
}

/** A child machine of the machine under test: its transitions and their coverage. */
export interface ChildMachinePaths {
  /** Registered id: `<parent id>.<src>`. */
  machineId: string;
  /** The src that names it in its parent's `setup({ actors })`. */
  src: string;
  transitions: StaticTransition[];
  coverage: CoverageReport;
  /** How its jobs' contexts are compared (from its options). */
  compareContext: boolean | ((context: JsonValue) => unknown);
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
  /** Its child machines (recursively), each with its own transitions and coverage. */
  children: ChildMachinePaths[];
  jobId: string;
  failAttempts: Record<string, number>;
  /** Per child machine id: attempts of its activities that fail first. */
  childFailAttempts: Record<string, Record<string, number>>;
  /** Invariants and expectations that failed: at most one per check, on the shortest path found. */
  violations: CheckViolation[];
  /** The model the paths were generated on (replays golden files and walks). */
  model: JobModel;
  /** The inputs explored, by input index. */
  inputs: readonly unknown[];
  /** Its invariants and state expectations. */
  checker: Checker;
}

const DEFAULT_LIMIT = 20_000;
const CANDIDATES_PER_TRANSITION = 8;


/** A transition to cover: of the machine under test, or of one of its child machines. */
type Target = { machineId: string; t: StaticTransition };

/** A path chosen to cover transitions: the input it starts from, its steps, the transitions it was chosen for. */
type ChosenPath = { inputIndex: number; steps: PathStep[]; covers: Set<string> };

/** A child machine of the definition, as registered, with its options. */
interface ChildMachine {
  def: RegisteredMachine;
  src: string;
  options: ChildPathOptions;
  /** Where its options sit in the path options: `children.checker.`. */
  optionPath: string;
  transitions: StaticTransition[];
}

/** The key of a transition in covered sets: its id for the machine under test, `<child machine id>: <id>` for a child machine's. */
function coverKey(rootId: string, machineId: string, transitionId: string): string {
  return machineId === rootId ? transitionId : `${machineId}: ${transitionId}`;
}

/** Every transition a state's step took, of every job, as cover keys. */
function takenKeys(rootId: string, state: ModelState): string[] {
  return allJobs(state).flatMap((job) => job.taken.map((t) => coverKey(rootId, job.machineId, t.id)));
}

/** Option names of a machine's path tests (PathOptions, plus how runs are checked) and of its child machines'. */
const MACHINE_OPTIONS: readonly string[] = [
  'input', 'inputs', 'events', 'outputs', 'errors', 'failAttempts', 'interrupts', 'stateKey', 'children', 'limit', 'jobId', 'waive',
  'compareContext', 'synchronous', 'module',
  // Checks, golden files and walks.
  'invariants', 'reached', 'paths', 'golden', 'walks',
  // describeMachinePaths's own (the same object reaches here).
  'crash', 'childCrash', 'dir', 'childTimeoutMs', 'update',
];
const CHILD_OPTIONS: readonly string[] = ['events', 'outputs', 'errors', 'failAttempts', 'stateKey', 'waive', 'compareContext', 'children'];

/**
 * Refuse option names the path tests do not know: a misspelt one (`waiver`, `evnts`) would be
 * ignored, and the run then fails far from the cause (a gap, or an exploration that never ends).
 */
export function checkPathOptions(options: unknown, where: string, known: readonly string[] = MACHINE_OPTIONS): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new SampleError(`Path-test options for ${where} must be an object.`);
  const unknown = Object.keys(options).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new SampleError(`Path-test options for ${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${known.join(', ')}).`);
  }
  const children = (options as { children?: unknown }).children;
  if (children !== undefined && children !== null && typeof children === 'object') {
    for (const [src, child] of Object.entries(children)) checkPathOptions(child, `${where} child ${src}`, CHILD_OPTIONS);
  }
}

/**
 * Compute paths that cover every transition of a machine (and of its child machines), on a
 * model of the Spool runtime (timers in due order, activities with retries, snapshots through
 * JSON, child machines as child jobs), with `xstate/graph`.
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
  checkPathOptions(options, def.id ?? def.machine.id);
  const { registered, children } = registeredOf(def, options);
  const jobId = options.jobId ?? 'path-test';
  const failAttempts = { ...(options.failAttempts ?? {}) };
  const childFailAttempts = Object.fromEntries(children.map((c) => [c.def.id, { ...(c.options.failAttempts ?? {}) }]));
  const model = modelOf(registered, children, jobId, options);
  checkOptionKeys(registered, options, '');
  for (const c of children) checkOptionKeys(c.def, c.options, c.optionPath);
  const transitions = listTransitions(registered.machine);
  const targets: Target[] = [
    ...transitions.map((t) => ({ machineId: registered.id, t })),
    ...children.flatMap((c) => c.transitions.map((t) => ({ machineId: c.def.id, t }))),
  ];
  const inputs = options.inputs ?? [options.input ?? {}];
  if (inputs.length === 0) throw new PathGenerationError('`inputs` is empty: give at least one input.');
  const limit = options.limit ?? DEFAULT_LIMIT;

  const checker = new Checker(options, statePaths(registered.machine.root), registered.id);
  const { chosen, explored, states, edges, violations } = choosePaths(model, registered.id, children, targets, inputs, limit, checker);

  const merged = mergePrefixes(chosen);
  const paths = merged.map((p, i) => plan(model, inputs, p, i + 1, inputs.length));
  paths.push(...namedPaths(model, options, inputs, paths.length, violations));
  violations.push(...pathViolations(model, checker, paths, violations));
  const finalCovered = new Set(paths.flatMap((p) => [...p.start.taken, ...p.steps.flatMap((s) => s.expect.taken)]));
  const coverage = coverageReport(registered.id, transitions, finalCovered, options.waive ?? [], explored.notes(registered.id, transitions, finalCovered));
  return {
    machineId: registered.id,
    version: registered.version,
    definition: def,
    states,
    edges,
    transitions,
    paths,
    coverage,
    children: childCoverage(children, paths, explored),
    jobId,
    failAttempts,
    childFailAttempts,
    violations,
    model,
    inputs,
    checker,
  };
}

/** The model of the job under test and of its child machines' jobs, with their samples. */
function modelOf(registered: RegisteredMachine, children: readonly ChildMachine[], jobId: string, options: PathOptions): JobModel {
  const jobOptions = (o: PathOptions | ChildPathOptions): JobOptions => ({
    events: o.events ?? {},
    outputs: o.outputs ?? {},
    errors: o.errors ?? {},
    failAttempts: { ...(o.failAttempts ?? {}) },
    stateKey: o.stateKey,
  });
  return new JobModel({
    def: registered,
    jobId,
    ...jobOptions(options),
    interrupts: options.interrupts ?? 'unsafe',
    children: Object.fromEntries(children.map((c) => [c.def.id, { def: c.def, ...jobOptions(c.options) }])),
  });
}

/**
 * Explore the graph of every input and choose, for each target transition not yet covered, the
 * shortest replayable path that takes it: the chosen paths, the explored edges, and their counts.
 */
function choosePaths(
  model: JobModel,
  rootId: string,
  children: readonly ChildMachine[],
  targets: readonly Target[],
  inputs: readonly unknown[],
  limit: number,
  checker: Checker,
): { chosen: ChosenPath[]; explored: Exploration; states: number; edges: number; violations: CheckViolation[] } {
  const chosen: ChosenPath[] = [];
  const violations: CheckViolation[] = [];
  const histories = historiesOf(model.machine);
  const covered = new Set<string>();
  const explored = new Exploration();
  let states = 0;
  let edges = 0;

  inputs.forEach((input, inputIndex) => {
    const start = model.initial(input);
    const graph = explore(model, start, limit, rootId, inputIndex, inputs.length, children.map((c) => c.optionPath));
    states += graph.keys.length;
    edges += graph.edges.length;
    explored.add(graph.edges, graph.stateOf);
    violations.push(...graphViolations(model, checker, graph, start, input, inputIndex, violations));
    const keysOf = (state: ModelState) => [...takenKeys(rootId, state), ...historyKeys(state, histories)];
    const startTaken = keysOf(start);
    startTaken.forEach((k) => covered.add(k));
    if (startTaken.length > 0) chosen.push({ inputIndex, steps: [], covers: new Set(startTaken) });
    const edgeTaken = new Map(graph.edges.map((e) => [e, new Set(keysOf(e.result))] as const));

    const keys = [...targets.map(({ machineId, t }) => coverKey(rootId, machineId, t.id)), ...histories.flatMap((h) => h.configurations.map((c) => `history ${h.id} ${c}`))];
    for (const key of keys) {
      if (covered.has(key)) continue;
      const candidates = graph.edges
        .filter((e) => graph.depth.has(e.from) && edgeTaken.get(e)!.has(key))
        .sort((a, b) => graph.depth.get(a.from)! - graph.depth.get(b.from)! || a.order - b.order)
        .slice(0, CANDIDATES_PER_TRANSITION);
      for (const edge of candidates) {
        const steps = [...graph.prefix(edge.from), edge.step];
        const replayed = tryReplay(model, input, steps);
        if (!replayed) continue;
        const taken = new Set([replayed.start, ...replayed.states].flatMap(keysOf));
        if (!taken.has(key)) continue;
        taken.forEach((id) => covered.add(id));
        chosen.push({ inputIndex, steps, covers: new Set([key]) });
        break;
      }
    }
  });
  return { chosen, explored, states, edges, violations };
}

/**
 * Check every explored state (the start, then each edge's result, shortest first): for each check
 * that fails, the shortest path found to a snapshot where it fails (replayed, so it is concrete).
 */
function graphViolations(model: JobModel, checker: Checker, graph: Graph, start: ModelState, input: unknown, inputIndex: number, known: readonly CheckViolation[]): CheckViolation[] {
  if (checker.empty) return [];
  const out: CheckViolation[] = [];
  const reported = (check: string) => known.some((v) => v.check === check) || out.some((v) => v.check === check);
  const candidates: Array<{ state: ModelState; steps: () => PathStep[] }> = [
    { state: start, steps: () => [] },
    ...graph.edges
      .filter((e) => graph.depth.has(e.from))
      .sort((a, b) => graph.depth.get(a.from)! - graph.depth.get(b.from)! || a.order - b.order)
      .map((e) => ({ state: e.result, steps: () => [...graph.prefix(e.from), e.step] })),
  ];
  for (const c of candidates) {
    const found = checker.inspect(c.state);
    if (!found || reported(found.check)) continue;
    const steps = c.steps();
    // The graph keeps one concrete state per (abstract) key: replay the steps to name a concrete path.
    const along = checkAlong(model, checker, input, steps, undefined, inputIndex);
    const labels = describeSteps(model, input, steps);
    out.push(along ?? violation(found, { path: labels.name, step: steps.length, label: labels.labels.at(-1) ?? 'start', steps, inputIndex }));
  }
  return out;
}

/** The step labels of a path, and its name. */
function describeSteps(model: JobModel, input: unknown, steps: readonly PathStep[]): { labels: string[]; name: string } {
  const replayed = tryReplay(model, input, [...steps]);
  if (!replayed) return { labels: steps.map((s) => s.type), name: steps.map((s) => s.type).join(' → ') || '(start)' };
  let prevNow = 0;
  const labels = steps.map((step, i) => {
    const state = replayed.states[i]!;
    const label = stepLabel(step, predicted(state), prevNow, state.trail, model.sampleDetail(i === 0 ? replayed.start : replayed.states[i - 1]!, step));
    prevNow = state.now;
    return label;
  });
  const last = replayed.states.at(-1) ?? replayed.start;
  return { labels, name: `${labels.length ? labels.join(' → ') : '(start)'} ⇒ ${formatValue(toJson(last.machine.value))}` };
}

/** Replay steps on the model and check every snapshot: the first violation, or null. */
export function checkAlong(model: JobModel, checker: Checker, input: unknown, steps: readonly PathStep[], name: string | undefined, inputIndex: number): CheckViolation | null {
  if (checker.empty) return null;
  const replayed = tryReplay(model, input, [...steps]);
  if (!replayed) return null;
  const states = [replayed.start, ...replayed.states];
  for (const [i, state] of states.entries()) {
    const found = checker.inspect(state);
    if (!found) continue;
    const prefix = steps.slice(0, i);
    const labels = describeSteps(model, input, prefix);
    return violation(found, { path: name ?? labels.name, step: i, label: labels.labels.at(-1) ?? 'start', steps: prefix, inputIndex });
  }
  return null;
}

/** The checks along each path (a check already reported is not again), and each named path's expectation on its last snapshot. */
function pathViolations(model: JobModel, checker: Checker, paths: readonly PathPlan[], known: readonly CheckViolation[]): CheckViolation[] {
  const out: CheckViolation[] = [];
  for (const p of paths) {
    const steps = p.steps.map((s) => s.step);
    const found = checkAlong(model, checker, p.input, steps, p.name, p.inputIndex);
    if (found && ![...known, ...out].some((v) => v.check === found.check)) out.push(found);
    if (!p.expectation) continue;
    const last = p.steps.at(-1)?.expect ?? p.start;
    const s: CheckedSnapshot = { value: last.value, context: last.context, status: last.status, now: last.now, event: p.steps.at(-1)?.step.type ?? 'xstate.init', matches: (v) => valueMatches(last.value, v) };
    const why = runCheck(p.expectation.check, s);
    if (why) out.push(violation({ check: `path ${p.expectation.name}`, snapshot: s, message: why }, { path: p.name, step: p.steps.length, label: p.steps.at(-1)?.label ?? 'start', steps, inputIndex: p.inputIndex }));
  }
  return out;
}

/** The user's named paths as plans (ids after the generated ones): resolved step by step on the model. */
function namedPaths(model: JobModel, options: PathOptions, inputs: readonly unknown[], first: number, violations: CheckViolation[]): PathPlan[] {
  return Object.entries(options.paths ?? {}).flatMap(([name, spec], i) => {
    const input = spec.input !== undefined ? spec.input : inputs[0];
    let state = model.initial(input);
    const steps: PathStep[] = [];
    for (const [n, s] of spec.steps.entries()) {
      let step: PathStep;
      try {
        step = resolveStep(model, state, s as StepSpec, `paths.${name}, step ${n + 1}`);
      } catch (error) {
        // The machine no longer lets the path go this way: a failed expectation, not a crash of the run.
        const at = describeSteps(model, input, steps);
        violations.push({ check: `path ${name}`, path: `«${name}» ${at.name}`, step: n, label: at.labels.at(-1) ?? 'start', commit: '-', snapshot: { ...viewOf(state), now: state.now }, steps, inputIndex: -1, message: (error as Error).message });
        return [];
      }
      state = model.step(state, step);
      steps.push(step);
    }
    const p = plan(model, [input], { inputIndex: 0, steps, covers: new Set() }, first + i + 1, 1);
    p.name = `«${name}» ${p.name}`;
    if (spec.input !== undefined) p.inputIndex = -1;
    if (spec.expect) p.expectation = { name, check: spec.expect as Check };
    return p;
  });
}

/** Each child machine's coverage by the paths: the transitions its child jobs take in them. */
function childCoverage(children: readonly ChildMachine[], paths: readonly PathPlan[], explored: Exploration): ChildMachinePaths[] {
  return children.map((c) => {
    const ids = new Set(
      paths.flatMap((p) => [p.start, ...p.steps.map((s) => s.expect)].flatMap((e) => e.children.filter((j) => j.machineId === c.def.id).flatMap((j) => j.taken))),
    );
    const rootNode = (c.def.machine.root as unknown as { id: string }).id;
    return {
      machineId: c.def.id,
      src: c.src,
      transitions: c.transitions,
      coverage: coverageReport(c.def.id, c.transitions, ids, c.options.waive ?? [], explored.notes(c.def.id, c.transitions, ids), rootNode),
      compareContext: c.options.compareContext ?? true,
    };
  });
}

/** A sample for an event or activity the machine does not have is a typo: say so instead of ignoring it. */
function checkOptionKeys(def: RegisteredMachine, options: PathOptions | ChildPathOptions, optionPath: string): void {
  const prefix = (key: string) => `${optionPath}${key}`;
  const events = [...def.eventTypes].filter((t) => !t.startsWith('xstate.')).sort();
  for (const type of Object.keys(options.events ?? {})) {
    if (!def.eventTypes.has(type)) throw new SampleError(`${prefix(`events.${type}`)}: machine ${def.id} has no event ${type} (its events: ${events.join(', ') || 'none'}).`);
  }
  const actors = (def.machine.implementations.actors ?? {}) as Record<string, unknown>;
  const machines = Object.keys(actors).filter((src) => isStateMachine(actors[src]));
  const srcs = Object.keys(actors).filter((src) => !machines.includes(src));
  const invokes = invokesOf(def.machine);
  const ids = invokes.filter((i) => srcs.includes(i.src)).map((i) => i.id);
  const known = [...new Set([...ids, ...srcs])].sort();
  const childIds = invokes.filter((i) => machines.includes(i.src)).map((i) => i.id);
  for (const [what, table] of [['outputs', options.outputs], ['errors', options.errors]] as const) {
    for (const key of Object.keys(table ?? {})) {
      if (machines.includes(key) || childIds.includes(key)) {
        throw new SampleError(
          `${prefix(`${what}.${key}`)}: "${key}" is a child machine of ${def.id}; its outcome comes from the child job reaching a final state (give its own samples under \`children\`).`,
        );
      }
      if (!known.includes(key)) throw new SampleError(`${prefix(`${what}.${key}`)}: machine ${def.id} invokes no actor with that id or src (it has: ${known.join(', ') || 'none'}).`);
    }
  }
  for (const src of Object.keys(options.failAttempts ?? {})) {
    if (!srcs.includes(src)) throw new SampleError(`${prefix(`failAttempts.${src}`)}: machine ${def.id} has no actor src ${src} (it has: ${srcs.join(', ') || 'none'}).`);
  }
  for (const src of Object.keys(options.children ?? {})) {
    if (!machines.includes(src)) throw new SampleError(`${prefix(`children.${src}`)}: machine ${def.id} has no child machine ${src} (it has: ${machines.join(', ') || 'none'}).`);
  }
}

function invokesOf(machine: AnyStateMachine): Array<{ id: string; src: string }> {
  type Node = { invoke: Array<{ id: string; src: unknown }>; states: Record<string, Node> };
  const out: Array<{ id: string; src: string }> = [];
  const visit = (node: Node): void => {
    node.invoke.forEach((i) => out.push({ id: i.id, src: typeof i.src === 'string' ? i.src : '' }));
    Object.values(node.states).forEach(visit);
  };
  visit(machine.root as unknown as Node);
  return out;
}

/** The definition as the runtime registers it, and its child machines (registered as `<parent id>.<src>`, recursively). */
function registeredOf(def: JobDefinition, options: PathOptions): { registered: RegisteredMachine; children: ChildMachine[] } {
  const registry = new MachineRegistry([def]);
  const id = def.id ?? def.machine.id;
  const version = String(def.version ?? def.machine.version ?? 1);
  const registered = registry.get(id, version);
  if (!registered) throw new PathGenerationError('The definition did not register.');
  const children: ChildMachine[] = [];
  const visit = (parent: RegisteredMachine, table: Record<string, ChildPathOptions> | undefined, optionPath: string): void => {
    const actors = (parent.machine.implementations.actors ?? {}) as Record<string, unknown>;
    for (const src of Object.keys(actors).sort()) {
      if (!isStateMachine(actors[src])) continue;
      const child = registry.get(`${parent.id}.${src}`, version);
      if (!child) throw new PathGenerationError(`Child machine ${src} of ${parent.id} did not register.`);
      const childOptions = table?.[src] ?? {};
      const path = `${optionPath}children.${src}.`;
      children.push({ def: child, src, options: childOptions, optionPath: path, transitions: listTransitions(child.machine) });
      visit(child, childOptions.children, path);
    }
  };
  visit(registered, options.children, '');
  return { registered, children };
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
  return {
    value: view.value,
    context: view.context,
    status: state.status,
    now: state.now,
    revision: state.revision,
    records: state.records,
    taken: state.taken.map((t) => t.id),
    children: state.children.map((c) => {
      const v = viewOf(c);
      return { path: c.path, jobId: c.jobId, machineId: c.machineId, value: v.value, context: v.context, status: c.status, records: c.records, taken: c.taken.map((t) => t.id) };
    }),
  };
}

/** A path of the generated paths' model from its steps (a walk, a replayed counterexample): predicted step by step. */
export function planOf(generated: GeneratedPaths, inputIndex: number, steps: PathStep[], id: number): PathPlan {
  return plan(generated.model, generated.inputs, { inputIndex, steps, covers: new Set() }, id, generated.inputs.length);
}

function plan(model: JobModel, inputs: readonly unknown[], p: { inputIndex: number; steps: PathStep[]; covers: Set<string> }, id: number, inputCount: number): PathPlan {
  const input = inputs[p.inputIndex];
  const { start, states } = replay(model, input, p.steps);
  let prevNow = 0;
  const steps: PlannedStep[] = p.steps.map((step, i) => {
    const state = states[i]!;
    const expect = predicted(state);
    const label = stepLabel(step, expect, prevNow, state.trail, model.sampleDetail(i === 0 ? start : states[i - 1]!, step));
    prevNow = expect.now;
    return { step, label, expect };
  });
  const last = states.at(-1) ?? start;
  const name = `${inputCount > 1 ? `[input ${p.inputIndex + 1}] ` : ''}${steps.length ? steps.map((s) => s.label).join(' → ') : '(start)'} ⇒ ${formatValue(toJson(last.machine.value))}`;
  return { id, name, inputIndex: p.inputIndex, input: toJson(input ?? {}), start: predicted(start), steps, covers: [...p.covers] };
}

/** What exploration saw, per machine (the one under test and each child machine), to explain gaps. */
class Exploration {
  readonly #reached = new Set<string>();
  readonly #received = new Set<string>();
  readonly #failed = new Map<string, string>();

  add(edges: readonly Edge[], stateOf: ReadonlyMap<string, ModelState>): void {
    for (const s of stateOf.values()) for (const job of allJobs(s)) for (const node of nodesOf(job)) this.#reached.add(`${job.machineId} ${node}`);
    for (const e of edges) {
      // A state entered and left in one step (an eventless transition out of it) is reached too.
      for (const job of allJobs(e.result)) for (const t of job.taken) [t.source, ...t.targets].forEach((id) => this.#reached.add(`${job.machineId} ${id}`));
      const from = stateOf.get(e.from);
      for (const job of allJobs(e.result)) {
        const before = from ? allJobs(from).find((j) => j.jobId === job.jobId) : undefined;
        const nodes = before ? nodesOf(before) : [];
        for (const r of job.records) for (const node of nodes) this.#received.add(`${job.machineId} ${node} ${r.eventType}`);
      }
      for (const f of e.result.failures) {
        const key = `${f.machineId} ${f.eventType}`;
        if (!this.#failed.has(key)) this.#failed.set(key, f.message);
      }
    }
  }

  notes(machineId: string, transitions: readonly StaticTransition[], covered: ReadonlySet<string>): Map<string, string> {
    const notes = new Map<string, string>();
    for (const t of transitions) {
      if (covered.has(t.id)) continue;
      let note: string;
      const failed = this.#failed.get(`${machineId} ${t.event}`);
      if (!this.#reached.has(`${machineId} ${t.source}`)) note = `state ${t.source} is never reached by the generated steps`;
      else if (failed !== undefined) {
        const actor = /^xstate\.done\.actor\.(.+)$/.exec(t.event)?.[1];
        // The usual cause: the machine reads the output, and no sample was given (the default is null).
        const hint = actor === undefined ? '' : ` (its output comes from \`outputs: { ${actor}: … }\`, null when no sample is given)`;
        note = `a ${t.event} event failed during exploration: ${failed}${hint}`;
      }
      else if (t.eventless) note = `${t.source} was reached, but this candidate was never the one taken (${t.guard ? `guard ${t.guard} false every time` : 'an earlier candidate taken every time'}${t.index > 1 ? ', or an earlier candidate taken' : ''})`;
      else if (t.event.startsWith('xstate.done.state.')) {
        // Raised by XState, never sent: the state must reach its final state (every region of a parallel one).
        note = `${t.source} never reaches its final state${t.event.endsWith(t.source) ? '' : ` (${t.event.slice('xstate.done.state.'.length)})`} on the generated steps: ${t.event} is raised then (every region final, for a parallel state); give the samples that lead there`;
      }
      else if (this.#received.has(`${machineId} ${t.source} ${t.event}`)) note = `${t.event} was received in ${t.source}, but this candidate was never the one taken (guard false, or an earlier candidate taken)`;
      else {
        const actor = /^xstate\.(?:done|error)\.actor\.(.+)$/.exec(t.event)?.[1];
        const how =
          actor === undefined
            ? t.event.includes('*')
              ? `add a sample keyed \`'${t.event}'\` with its own \`type\` (e.g. { type: '${t.event === '*' ? 'SOME_EVENT' : `${t.event.slice(0, -1)}something`}' })`
              : 'add a sample, or a timer that leads there; an event given `[]` samples is never sent'
            : `an activity's outcome comes from \`outputs\`/\`errors\`; a child machine's when its child job ends: give the child's events samples under \`children.<src>.events\``;
        note = `no generated step delivers ${t.event} while in ${t.source} (${how})`;
      }
      notes.set(t.id, note);
    }
    return notes;
  }
}
