import type { AnyMachineSnapshot } from 'xstate';
import type { JsonValue } from '../index.ts';
import { SampleError, toJson, type JobModel, type ModelState, type PathStep } from './model.ts';

/**
 * What invariants and expectations see: one committed snapshot of the job under test (after an
 * applied event, or at the end of a step), with the clock as milliseconds since the job started.
 */
export interface CheckedSnapshot<TContext = any> {
  value: JsonValue;
  context: TContext;
  status: 'active' | 'done' | 'error' | 'stopped';
  /** Milliseconds since the job started (the virtual clock). */
  now: number;
  /** The event whose commit made this snapshot (`xstate.init` for the start). */
  event: string;
  /** In this state: `'approved'`, `'open.payment.paid'` (a dot path of state names). */
  matches(state: string): boolean;
}

/** A check: `false` or a throw is a violation (the thrown message is reported); anything else passes. */
export type Check<TSnapshot = CheckedSnapshot> = (snapshot: TSnapshot) => boolean | void;

/**
 * A step of a named path: an event type (`'APPROVE'`, its first sample; `'APPROVE#2'` its second;
 * `'NOTE@review'` to a child job), `'time'`, `'done.<actor>'`, `'error.<actor>'`, `'crash.<actor>'`,
 * or an event object sent as given.
 */
export type StepSpec<TEvent extends { type: string } = { type: string; [key: string]: unknown }> = string | TEvent;

/** A path written by hand: its steps, and what must hold at its end. */
export interface NamedPath<TSnapshot = CheckedSnapshot, TStep = StepSpec> {
  steps: ReadonlyArray<TStep>;
  /** Input of this path. Default: the machine's (first) input. */
  input?: unknown;
  /** Must hold on the path's last snapshot. */
  expect?: Check<TSnapshot>;
}

/** Checks declared once per machine (in `pathTests` or `describeMachinePaths`). */
export interface PathChecks<TSnapshot = CheckedSnapshot> {
  /** By name: must hold on every committed snapshot of every path, walk and explored state. */
  invariants?: Record<string, Check<TSnapshot>>;
  /** By state (dot path): must hold on every committed snapshot in that state. */
  reached?: Record<string, Check<TSnapshot>>;
  /** By name: paths written by hand, replayed like generated ones, each with its expectation. */
  paths?: Record<string, NamedPath<TSnapshot>>;
}

/** A check that failed: on which path, at which step, on which snapshot. */
export interface CheckViolation {
  /** `invariant <name>`, `reached <state>`, `path <name>`. */
  check: string;
  /** The path's name (its step labels). */
  path: string;
  /** 0 = start. */
  step: number;
  label: string;
  /** The event whose commit made the snapshot. */
  commit: string;
  snapshot: { value: JsonValue; context: JsonValue; status: string; now: number };
  /** The steps that lead there (replayable with the model). */
  steps: PathStep[];
  inputIndex: number;
  message: string;
}

/** `a.b.c` in a state value: `{ a: { b: 'c' } }`, `{ a: { b: { c: … } } }`, or a parallel region of it. */
export function valueMatches(value: unknown, state: string): boolean {
  let v: unknown = value;
  for (const part of state.split('.')) {
    if (typeof v === 'string') {
      if (v !== part) return false;
      v = undefined;
    } else if (v !== null && typeof v === 'object' && Object.hasOwn(v, part)) v = (v as Record<string, unknown>)[part];
    else return false;
  }
  return true;
}

/** Every dot path of state names of a machine (`open`, `open.payment`, `open.payment.paid`…). */
export function statePaths(root: unknown): string[] {
  type Node = { key: string; states: Record<string, Node>; type: string };
  const out: string[] = [];
  const visit = (node: Node, prefix: string): void => {
    for (const [key, child] of Object.entries(node.states)) {
      if (child.type === 'history') continue;
      const path = prefix ? `${prefix}.${key}` : key;
      out.push(path);
      visit(child, path);
    }
  };
  visit(root as Node, '');
  return out;
}

function snapshot(machine: AnyMachineSnapshot, status: CheckedSnapshot['status'], now: number, event: string): CheckedSnapshot {
  const value = toJson(machine.value);
  return { value, context: toJson(machine.context), status, now, event, matches: (s) => valueMatches(value, s) };
}

/** The snapshots a check sees in a model state: each commit of the job under test in its step, then the state at the end. */
export function snapshotsOf(state: ModelState, startEvent = '(end of step)'): CheckedSnapshot[] {
  const commits = state.commits.filter((c) => c.path === '').map((c) => snapshot(c.machine, c.status, state.now, c.eventType));
  return [...commits, snapshot(state.machine, state.status, state.now, state.records.length === 0 && state.revision === 1 ? 'xstate.init' : startEvent)];
}

/** Run one check: null when it holds, else why not. */
export function runCheck(check: Check, s: CheckedSnapshot): string | null {
  try {
    return check(s) === false ? 'returned false' : null;
  } catch (error) {
    return `threw: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** The invariants and state expectations, checked on model states. */
export class Checker {
  readonly #checks: Array<{ name: string; state: string | null; check: Check }>;

  constructor(checks: PathChecks, stateNames: readonly string[], machineId: string) {
    for (const state of Object.keys(checks.reached ?? {})) {
      if (!stateNames.includes(state)) {
        throw new SampleError(`reached.${state}: machine ${machineId} has no state ${state} (its states: ${stateNames.join(', ')}).`);
      }
    }
    this.#checks = [
      ...Object.entries(checks.invariants ?? {}).map(([name, check]) => ({ name: `invariant ${name}`, state: null, check: check as Check })),
      ...Object.entries(checks.reached ?? {}).map(([state, check]) => ({ name: `reached ${state}`, state, check: check as Check })),
    ];
  }

  get empty(): boolean {
    return this.#checks.length === 0;
  }

  /** The first failing check on a model state's snapshots, if any. */
  inspect(state: ModelState): { check: string; snapshot: CheckedSnapshot; message: string } | null {
    if (this.#checks.length === 0) return null;
    for (const s of snapshotsOf(state)) {
      for (const { name, state: within, check } of this.#checks) {
        if (within !== null && !s.matches(within)) continue;
        const why = runCheck(check, s);
        if (why !== null) return { check: name, snapshot: s, message: why };
      }
    }
    return null;
  }
}

/** A failed check as a violation on a path: the message names the path, step, snapshot and check. */
export function violation(
  found: { check: string; snapshot: CheckedSnapshot; message: string },
  at: { path: string; step: number; label: string; steps: PathStep[]; inputIndex: number },
): CheckViolation {
  const s = found.snapshot;
  const snap = { value: s.value, context: s.context as JsonValue, status: s.status, now: s.now };
  const message =
    `${found.check} ${found.message} on path "${at.path}", step ${at.step} (${at.label}), ` +
    `snapshot committed by ${s.event}: state ${JSON.stringify(s.value)}, status ${s.status}, clock start+${s.now} ms, context ${JSON.stringify(s.context)}`;
  return { check: found.check, ...at, commit: s.event, snapshot: snap, message };
}

/** The label of a step as named paths write it (`APPROVE`, `APPROVE#2`, `NOTE@review`, `time`, `done.reserve`). */
function specLabel(step: PathStep): string {
  const n = 'sample' in step && step.sample > 1 ? `#${step.sample}` : '';
  const at = 'child' in step && step.child ? `@${step.child}` : '';
  switch (step.via) {
    case 'send':
      return `${step.type}${n}${at}`;
    case 'time':
      return 'time';
    case 'done':
    case 'error':
      return `${step.via}.${step.actorId}${n}${at}`;
    case 'interrupt':
      return `crash.${step.actorId}${at}`;
  }
}

/** A named path's step spec as a model step in `state`: a SampleError says which steps were possible. */
export function resolveStep(model: JobModel, state: ModelState, spec: StepSpec, where: string): PathStep {
  if (typeof spec !== 'string') {
    if (spec === null || typeof spec !== 'object' || typeof spec.type !== 'string') throw new SampleError(`${where}: a step is a string or an event object with a type.`);
    return { via: 'send', type: spec.type, event: toJson(spec) as { type: string }, sample: 0 };
  }
  const possible = model.steps(state);
  // `APPROVE#2`, or the label the path names show: `APPROVE{role:peer}`.
  const found = possible.find((s) => specLabel(s) === spec) ?? possible.find((s) => s.via === 'send' && `${s.type}${model.sampleDetail(state, s)}${s.child ? `@${s.child}` : ''}` === spec);
  if (found) return found;
  throw new SampleError(`${where}: step "${spec}" is not possible here (state ${JSON.stringify(toJson(state.machine.value))}; possible: ${[...new Set(possible.map(specLabel))].join(', ') || 'none'}).`);
}
