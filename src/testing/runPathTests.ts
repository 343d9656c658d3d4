import type { AnyStateMachine, ContextFrom, EventFromLogic, SnapshotFrom } from 'xstate';
import { isJobDefinition, isStateMachine, MachineRegistry, type JobDefinition, type JsonValue } from '../internal.ts';
import type { CoverageGap, Waiver } from './coverage.ts';
import { generatePaths, type GeneratedPaths, type PathOptions, type PathPlan } from './paths.ts';
import { SampleError, type Samples } from './model.ts';
import type { Check, CheckedSnapshot, NamedPath } from './checks.ts';
import { compareRuns, runPath, type RunMode, type RunRecord } from './runner.ts';
import { checkGolden, goldenPath } from './golden.ts';
import { runWalks, type WalkOptions } from './walks.ts';

/** Path options plus how runs are checked. */
export interface PathTestOptions extends PathOptions {
  /** Compare the context at every step (default), never, or through a projection. */
  compareContext?: boolean | ((context: JsonValue) => unknown);
  /** `NORMAL` (default) or `FULL`: the SQLite sync mode of the runs. */
  synchronous?: 'FULL' | 'NORMAL';
  /** The module exporting this definition: needed for child-process crash runs, and where `golden: true` files go. */
  module?: string;
  /**
   * Record each path's final state and context in a golden file and compare with it afterwards:
   * `true` (`<module dir>/__paths__/<machine id>.json`) or the file's path. Written by
   * `spool test --update` (`update: true`), and when it does not exist yet.
   */
  golden?: boolean | string;
  /** Random walks over the model, checked by the invariants, and replayed on the runtime with restarts (`false`: none). */
  walks?: WalkOptions | false;
}

/** A definition with its path-test options (what a machines module can export for `spool test`). */
export interface PathTestSubject {
  definition: JobDefinition | AnyStateMachine;
  options: PathTestOptions;
}

/**
 * Attach path-test options (event samples, activity outputs, inputs, waivers…) to a definition,
 * typed from it as {@link pathTestOptions} types them (a misspelt event or state is a compile error).
 *
 * @example
 * export const approvalFlowPaths = pathTest(approvalFlow, {
 *   input: { subject: 'deploy', remindAfterMs: 1000, deadlineMs: 5000 },
 *   events: { REMIND: [], APPROVE: { by: 'ann' }, REJECT: { by: 'bob', reason: 'no' } },
 * });
 */
export function pathTest<const D extends JobDefinition | AnyStateMachine>(definition: D, options: TypedPathTestOptions<D> = {}): PathTestSubject {
  return { definition, options: options as PathTestOptions };
}

export function isPathTestSubject(value: unknown): value is PathTestSubject {
  if (value === null || typeof value !== 'object') return false;
  const v = value as { definition?: unknown; options?: unknown };
  return (isJobDefinition(v.definition) || isStateMachine(v.definition)) && typeof v.options === 'object' && v.options !== null;
}

/**
 * What a machines module offers path testing: its {@link pathTest} subjects, and its definitions
 * and bare machines that no subject already covers (with options from an exported
 * `pathTests: { [machineId]: PathTestOptions }` object, when there is one). Exports are read at
 * the top level, in arrays, and in a default export object. Each definition is taken once. A
 * bare machine that another definition invokes as a child machine is left out: its child jobs
 * are tested with that parent (wrap it in `pathTest` to test it as a job of its own too).
 *
 * @example
 * const items = collectPathTests(await import('./machines/index.ts'));
 * await runPathTests({ definitions: items, module: './machines/index.ts', crash: true });
 */
export function collectPathTests(namespace: Record<string, unknown>): Array<PathTestSubject | JobDefinition | AnyStateMachine> {
  const subjects: PathTestSubject[] = [];
  const definitions: Array<JobDefinition | AnyStateMachine> = [];
  const take = (value: unknown): boolean => {
    if (isPathTestSubject(value)) {
      if (!subjects.includes(value)) subjects.push(value);
      return true;
    }
    if (isJobDefinition(value) || isStateMachine(value)) {
      if (!definitions.includes(value)) definitions.push(value);
      return true;
    }
    return false;
  };
  for (const [name, value] of Object.entries(namespace)) {
    if (take(value)) continue;
    if (Array.isArray(value)) value.forEach(take);
    else if (name === 'default' && value !== null && typeof value === 'object') {
      for (const inner of Object.values(value)) if (!take(inner) && Array.isArray(inner)) inner.forEach(take);
    }
  }
  const machineOf = (d: JobDefinition | AnyStateMachine) => (isStateMachine(d) ? d : d.machine);
  const covered = new Set(subjects.map((s) => machineOf(s.definition)));
  const wrapped = new Set(definitions.filter(isJobDefinition).map((d) => d.machine));
  // A bare machine that another definition invokes as a child machine is tested as its child jobs.
  const children = new Set<AnyStateMachine>();
  const addChildren = (machine: AnyStateMachine): void => {
    for (const logic of Object.values((machine.implementations.actors ?? {}) as Record<string, unknown>)) {
      if (isStateMachine(logic) && !children.has(logic)) {
        children.add(logic);
        addChildren(logic);
      }
    }
  };
  [...subjects.map((s) => machineOf(s.definition)), ...definitions.map(machineOf)].forEach(addChildren);
  const options = (namespace['pathTests'] ?? null) as Record<string, PathTestOptions> | null;
  if (options && typeof options === 'object') {
    // A key that names no exported machine (`orders` for `order`) would leave that machine without its samples.
    const ids = new Set([...subjects.map((s) => idOf(s.definition)), ...definitions.map(idOf)]);
    const stray = Object.keys(options).filter((id) => !ids.has(id));
    if (stray.length > 0) {
      throw new SampleError(`pathTests names ${stray.join(', ')}, which the module does not export (its machines: ${[...ids].sort().join(', ')}).`);
    }
  }
  const rest = definitions
    .filter((d) => !covered.has(machineOf(d)) && (isJobDefinition(d) || (!wrapped.has(d) && !children.has(d))))
    .map((d) => {
      const own = options && typeof options === 'object' ? options[idOf(d)] : undefined;
      return own ? pathTest(d, own) : d;
    });
  return [...subjects, ...rest];
}

export interface RunPathTestsOptions {
  /** Definitions, bare machines, or {@link pathTest} subjects. */
  definitions: Iterable<JobDefinition | AnyStateMachine | PathTestSubject>;
  /** Options per machine id, for definitions given without them. */
  options?: Record<string, PathTestOptions>;
  /** Called as the run goes: a CLI prints these. */
  onProgress?: (event: PathTestProgress) => void;
  /** Also replay every path with the runtime closed and reopened between every two steps. Default false. */
  crash?: boolean;
  /** Paths per machine also replayed in child processes SIGKILLed between steps, the ones most worth it first (see childSample). Default 0. */
  sampleChildCrash?: number;
  /** The module the definitions come from (child processes import it), unless a subject names its own. */
  module?: string;
  /** Where the temporary SQLite files go (a fresh directory per run, removed after it). Default: the OS temp directory. */
  dir?: string;
  /** Write golden files instead of comparing with them (`spool test --update`). */
  update?: boolean;
  /** The seed of every machine's random walks (`spool test --seed`): replays a failing walk. */
  seed?: number;
  /** A `postgres://` URL: run every path on that server instead, each run in a new database dropped after it (needs CREATEDB). */
  db?: string;
}

/** One failed run of one path. */
export interface PathFailure {
  path: number;
  name: string;
  /** A run of the path (`plain`, `restart`, `child`), a failed invariant or expectation (`check`), a golden-file difference (`golden`), a random walk that broke a check (`walk`). */
  mode: RunMode | 'check' | 'golden' | 'walk';
  message: string;
}

/** The result for one machine: what `spool test` prints as a table row (and as `--json`). */
export interface MachinePathResult {
  machineId: string;
  version: string;
  /** Distinct graph states explored (over all inputs). */
  states: number;
  /** Static transitions of the machine. */
  transitions: number;
  /** Transitions the paths take. */
  covered: number;
  /** Uncovered transitions excused by a waiver. */
  waived: number;
  /** Uncovered, unwaived transitions: state, event, guard, targets; its child machines' too (named by their own state ids). */
  gaps: CoverageGap[];
  /** Waivers that excuse nothing (its child machines' too). */
  unusedWaivers: Waiver[];
  /** Its child machines (`<machine id>.<src>`): their own transitions and coverage by the same paths. */
  children: ChildMachineResult[];
  /** Each transition: covered, gap or waived, why (the waiver's reason, the gap's note), and the ids of the paths that take it. */
  coverage: TransitionStatus[];
  /** Generated paths. */
  paths: number;
  /** Each path: its id and name (its steps). */
  pathList: Array<{ id: number; name: string }>;
  /** Path runs executed, per mode. */
  /** Path runs executed, per mode (`walk`: random walks replayed with a restart between every two steps). */
  runs: { plain: number; restart: number; child: number; walk: number };
  failures: PathFailure[];
  /** Its random walks: the seed (replay with it), walks tried, walks replayed on the runtime; null with `walks: false`. */
  walks: { seed: number; runs: number; replayed: number } | null;
  /** Its golden file, and whether this run wrote it; null without `golden`. */
  golden: { file: string; written: boolean } | null;
  /** Why paths could not be generated (then nothing ran), else null. */
  error: string | null;
  /** No error, no gap, no unused waiver, no failure (its child machines' included). */
  ok: boolean;
  durationMs: number;
}

/** The coverage of one child machine of a machine under test. */
export interface ChildMachineResult {
  machineId: string;
  transitions: number;
  covered: number;
  waived: number;
  gaps: CoverageGap[];
  unusedWaivers: Waiver[];
  coverage: TransitionStatus[];
}

/** One transition in `--json`: its status, why, and the paths that take it. */
export interface TransitionStatus {
  id: string;
  label: string;
  status: 'covered' | 'gap' | 'waived';
  /** The waiver's reason (waived), what path generation saw (gap), else null. */
  reason: string | null;
  paths: number[];
}

export interface PathTestsResult {
  ok: boolean;
  machines: MachinePathResult[];
  durationMs: number;
}

export type PathTestProgress =
  | { type: 'machine.started'; machineId: string; version: string }
  | { type: 'machine.generated'; machineId: string; states: number; transitions: number; covered: number; paths: number }
  | { type: 'path.finished'; machineId: string; path: number; name: string; mode: RunMode; ok: boolean; message: string | null; durationMs: number }
  | { type: 'machine.finished'; result: MachinePathResult };

/**
 * Generate paths for every definition, check coverage, and replay every path on the real
 * runtime (and, when asked, with restarts between steps and in SIGKILLed child processes).
 * Never throws for a failing machine: everything is in the result.
 *
 * @example
 * const result = await runPathTests({ definitions: [pathTest(approvalFlow, { events })], crash: true, sampleChildCrash: 1, module: './machines/index.ts' });
 * if (!result.ok) process.exitCode = 1;
 */
export async function runPathTests(options: RunPathTestsOptions): Promise<PathTestsResult> {
  const started = Date.now();
  const machines: MachinePathResult[] = [];
  for (const item of options.definitions) {
    const subject = isPathTestSubject(item) ? item : { definition: item, options: options.options?.[idOf(item)] ?? {} };
    machines.push(await runOne(subject, options));
  }
  return { ok: machines.every((m) => m.ok), machines, durationMs: Date.now() - started };
}

function idOf(item: JobDefinition | AnyStateMachine): string {
  try {
    return new MachineRegistry([item]).all()[0]?.id ?? '';
  } catch {
    return isStateMachine(item) ? item.id : (item.id ?? item.machine.id);
  }
}

/** Generate the paths of one machine, check their coverage and replay them: its row of the result. */
async function runOne(subject: PathTestSubject, options: RunPathTestsOptions): Promise<MachinePathResult> {
  const started = Date.now();
  const emit = (event: PathTestProgress) => options.onProgress?.(event);
  const def: JobDefinition = isStateMachine(subject.definition) ? { machine: subject.definition } : subject.definition;
  const machineId = idOf(def);
  const version = String(def.version ?? def.machine.version ?? 1);
  emit({ type: 'machine.started', machineId, version });
  const result = emptyResult(machineId, version);
  let generated: GeneratedPaths;
  try {
    generated = generatePaths(def, subject.options);
  } catch (error) {
    result.error = error instanceof Error ? error.message : String(error);
    result.durationMs = Date.now() - started;
    emit({ type: 'machine.finished', result });
    return result;
  }
  Object.assign(result, generatedCounts(generated));
  emit({ type: 'machine.generated', machineId, states: result.states, transitions: result.transitions, covered: result.covered, paths: result.paths });
  checkResults(generated, subject, options, result);
  const walks = walkResults(generated, subject, options, result);
  await replayPaths(generated, subject, options, result, emit, walks);
  result.ok = result.error === null && result.gaps.length === 0 && result.unusedWaivers.length === 0 && result.failures.length === 0;
  result.durationMs = Date.now() - started;
  emit({ type: 'machine.finished', result });
  return result;
}

/** Invariants and expectations that failed on the model, and the golden file (compared, or written with `update`). */
function checkResults(generated: GeneratedPaths, subject: PathTestSubject, options: RunPathTestsOptions, result: MachinePathResult): void {
  for (const v of generated.violations) result.failures.push({ path: 0, name: v.path, mode: 'check', message: v.message });
  const golden = subject.options.golden;
  if (golden === undefined || golden === false) return;
  let file: string;
  try {
    file = goldenPath(golden, generated.machineId, subject.options.module ?? options.module);
  } catch (error) {
    result.failures.push({ path: 0, name: '(golden file)', mode: 'golden', message: (error as Error).message });
    return;
  }
  const { written, diffs } = checkGolden(file, generated, options.update === true);
  for (const d of diffs) result.failures.push({ path: 0, name: d.name, mode: 'golden', message: d.message });
  result.golden = { file, written };
}

/** Random walks on the model (a failing one shrunk, in `failures`): the walks to replay on the runtime. */
function walkResults(generated: GeneratedPaths, subject: PathTestSubject, options: RunPathTestsOptions, result: MachinePathResult): PathPlan[] {
  if (subject.options.walks === false) return [];
  const walks = runWalks(generated, { ...(subject.options.walks ?? {}), ...(options.seed !== undefined ? { seed: options.seed } : {}) });
  result.walks = { seed: walks.seed, runs: walks.runs, replayed: walks.replay.length };
  if (walks.violation) result.failures.push({ path: 0, name: walks.violation.path, mode: 'walk', message: walks.violation.message });
  return walks.replay;
}

/** A machine's result before anything is generated: nothing counted, nothing run, not ok. */
function emptyResult(machineId: string, version: string): MachinePathResult {
  return {
    machineId,
    version,
    states: 0,
    transitions: 0,
    covered: 0,
    waived: 0,
    gaps: [],
    unusedWaivers: [],
    children: [],
    coverage: [],
    paths: 0,
    pathList: [],
    runs: { plain: 0, restart: 0, child: 0, walk: 0 },
    failures: [],
    golden: null,
    walks: null,
    error: null,
    ok: false,
    durationMs: 0,
  };
}

/** What generation tells the result: states, transitions and coverage (its child machines' gaps and waivers included), paths. */
function generatedCounts(generated: GeneratedPaths): Pick<MachinePathResult, 'states' | 'transitions' | 'covered' | 'waived' | 'gaps' | 'unusedWaivers' | 'children' | 'coverage' | 'paths' | 'pathList'> {
  // Which paths take each transition (a child machine's by `<child machine id>: <id>`).
  const takenBy = new Map<string, number[]>();
  for (const p of generated.paths) {
    const keys = new Set(
      [p.start, ...p.steps.map((s) => s.expect)].flatMap((e) => [...e.taken, ...e.children.flatMap((c) => c.taken.map((id) => `${c.machineId}: ${id}`))]),
    );
    for (const k of keys) takenBy.set(k, [...(takenBy.get(k) ?? []), p.id]);
  }
  const statuses = (report: GeneratedPaths['coverage'], prefix: string): TransitionStatus[] =>
    report.transitions.map((t) => ({
      id: t.id,
      label: t.label,
      status: t.covered ? 'covered' : t.waived !== null ? 'waived' : 'gap',
      reason: t.covered ? null : (t.waived ?? t.note),
      paths: takenBy.get(`${prefix}${t.id}`) ?? [],
    }));
  return {
    coverage: statuses(generated.coverage, ''),
    pathList: generated.paths.map((p) => ({ id: p.id, name: p.name })),
    states: generated.states,
    transitions: generated.transitions.length,
    covered: generated.coverage.covered,
    waived: generated.coverage.waived,
    gaps: [...generated.coverage.gaps, ...generated.children.flatMap((c) => c.coverage.gaps)],
    unusedWaivers: [...generated.coverage.unusedWaivers, ...generated.children.flatMap((c) => c.coverage.unusedWaivers)],
    children: generated.children.map((c) => ({
      machineId: c.machineId,
      transitions: c.transitions.length,
      covered: c.coverage.covered,
      waived: c.coverage.waived,
      gaps: c.coverage.gaps,
      unusedWaivers: c.coverage.unusedWaivers,
      coverage: statuses(c.coverage, `${c.machineId}: `),
    })),
    paths: generated.paths.length,
  };
}

/**
 * Replay every path plainly (and with restarts, with `crash`), then the child-crash sample of the
 * ones that passed: each run counted in `result.runs`, each failure in `result.failures`.
 */
async function replayPaths(
  generated: GeneratedPaths,
  subject: PathTestSubject,
  options: RunPathTestsOptions,
  result: MachinePathResult,
  emit: (event: PathTestProgress) => void,
  walks: readonly PathPlan[] = [],
): Promise<void> {
  const { machineId } = result;
  const runOptions = {
    ...(options.dir !== undefined ? { dir: options.dir } : {}),
    ...(options.db !== undefined ? { db: options.db } : {}),
    ...(subject.options.compareContext !== undefined ? { compareContext: subject.options.compareContext } : {}),
    ...(subject.options.synchronous !== undefined ? { synchronous: subject.options.synchronous } : {}),
  };
  const attempt = async (path: PathPlan, mode: RunMode, run: () => Promise<RunRecord>, kind: 'walk' | RunMode = mode): Promise<RunRecord | undefined> => {
    const t = Date.now();
    result.runs[kind] += 1;
    try {
      const record = await run();
      emit({ type: 'path.finished', machineId, path: path.id, name: path.name, mode, ok: true, message: null, durationMs: Date.now() - t });
      return record;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      result.failures.push({ path: path.id, name: path.name, mode: kind, message });
      emit({ type: 'path.finished', machineId, path: path.id, name: path.name, mode, ok: false, message, durationMs: Date.now() - t });
      return undefined;
    }
  };
  const plain = new Map<number, RunRecord>();
  for (const path of generated.paths) {
    const record = await attempt(path, 'plain', () => runPath(generated, path, { ...runOptions, mode: 'plain' }));
    if (record) plain.set(path.id, record);
    if (options.crash && record) {
      await attempt(path, 'restart', async () => {
        const crashed = await runPath(generated, path, { ...runOptions, mode: 'restart' });
        compareRuns(path, 'restart', record, crashed);
        return crashed;
      });
    }
  }
  // Walks with a restart between every two steps: each step checked against the model.
  // (Not when a path already disagrees with the runtime: a walk would only say it again.)
  if (result.failures.every((f) => f.mode !== 'plain')) {
    for (const walk of walks) await attempt(walk, 'restart', () => runPath(generated, walk, { ...runOptions, mode: 'restart' }), 'walk');
  }
  const module = subject.options.module ?? options.module;
  const sample = childSample(generated.paths, options.sampleChildCrash ?? 0).filter((p) => plain.has(p.id));
  if (sample.length > 0 && module === undefined) {
    result.failures.push({ path: 0, name: '(child crash sample)', mode: 'child', message: 'sampleChildCrash needs `module`: the module that exports the definitions, for the child processes to import.' });
  } else {
    for (const path of sample) {
      await attempt(path, 'child', async () => {
        const crashed = await runPath(generated, path, { ...runOptions, mode: 'child', module: module! });
        compareRuns(path, 'child', plain.get(path.id)!, crashed);
        return crashed;
      });
    }
  }
}

/** The `n` paths most worth a child-process replay: interrupted attempts first, then timers and retries, then most steps, then id. */
export function childSample(paths: readonly PathPlan[], n: number): PathPlan[] {
  const count = (p: PathPlan, via: string) => p.steps.filter((s) => s.step.via === via).length;
  const weight = (p: PathPlan) => Math.min(count(p, 'interrupt'), 1) * 10_000 + Math.min(count(p, 'time'), 9) * 100 + p.steps.length;
  return [...paths].sort((a, b) => weight(b) - weight(a) || a.id - b.id).slice(0, Math.max(0, n));
}

// ------------------------------------------------------------------ typed options

type MachineOf<D> = D extends { machine: infer M extends AnyStateMachine } ? M : D extends AnyStateMachine ? D : never;
type EventOf<D> = EventFromLogic<MachineOf<D>>;
/** Dot paths of a state value type: `'open' | 'open.payment' | 'open.payment.paid' | …`. */
type StatePaths<V> = V extends string ? V : V extends object ? { [K in keyof V & string]: K | `${K}.${StatePaths<V[K]>}` }[keyof V & string] : never;
/** The snapshot checks see, with the machine's context type. */
export type SnapshotOf<D> = CheckedSnapshot<ContextFrom<MachineOf<D>>>;
type EventSamples<E extends { type: string }> = { [T in E['type']]?: Samples<Omit<Extract<E, { type: T }>, 'type'> & { type?: T }> };
/** A named path step: a known event type (or a sample of it), `time`, an activity outcome, or an event object. */
type TypedStep<E extends { type: string }> = E['type'] | `${E['type']}#${number}` | `${string}@${string}` | 'time' | `done.${string}` | `error.${string}` | `crash.${string}` | E;

/**
 * Path-test options typed from the machine: event samples by the machine's own event types (and
 * payloads), `reached` by its state paths, checks on its context, named paths by its events. A
 * misspelt event or state is a compile error.
 */
export type TypedPathTestOptions<D> = Omit<PathTestOptions, 'events' | 'invariants' | 'reached' | 'paths'> & {
  /** Also wildcard keys (`'note.*'`): samples with their own `type`. */
  events?: EventSamples<EventOf<D>> & { [wildcard: `${string}*`]: Samples<Record<string, unknown>> };
  invariants?: Record<string, Check<SnapshotOf<D>>>;
  reached?: { [S in StatePaths<SnapshotFrom<MachineOf<D>>['value']>]?: Check<SnapshotOf<D>> };
  paths?: Record<string, NamedPath<SnapshotOf<D>, TypedStep<EventOf<D>>>>;
};

/**
 * The `pathTests` entry of one machine, typed from it (like `satisfies`): returns the options as given.
 *
 * @example
 * export const pathTests = {
 *   'approval-flow': pathTestOptions(approvalFlow, {
 *     events: { APPROVE: [{ role: 'manager' }, { role: 'peer' }] },
 *     reached: { approved: (s) => s.context.approvals >= 2 },
 *     invariants: { bounded: (s) => s.context.approvals <= 3 },
 *   }),
 * };
 */
export function pathTestOptions<const D extends JobDefinition | AnyStateMachine>(definition: D, options: TypedPathTestOptions<D>): TypedPathTestOptions<D> {
  void definition;
  return options;
}
