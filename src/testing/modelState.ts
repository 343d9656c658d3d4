import type { AnyMachineSnapshot } from 'xstate';
import type { JsonValue, RegisteredMachine } from '../internal.ts';
import type { StaticTransition } from './transitions.ts';

/**
 * The path-test model's state, as data: the steps of a path, the jobs (the one under test and its
 * child jobs) with their timers and invocations, and the history records each step predicts.
 * `model.ts` computes it.
 */

/**
 * What a test does to the job in one step of a path. Plain JSON (it crosses process boundaries).
 * `child`, when present, names a child job by the invoke ids leading to it from the job under
 * test (`review`, or `review/lint` for a grandchild): the step acts on that child job.
 */
export type PathStep =
  /** `runtime.send(jobId, event)`. */
  | { via: 'send'; type: string; event: { type: string; [key: string]: JsonValue }; sample: number; child?: string }
  /** Move the clock to the runtime's next wake-up (`nextWakeAt()`) and `tick()`: due timers fire, due retries start. */
  | { via: 'time'; type: 'spool.time' }
  /** The waiting activity `actorId` finishes: `runtime.complete(token, output)`. */
  | { via: 'done'; type: string; actorId: string; output: JsonValue; sample: number; child?: string }
  /** The waiting activity `actorId` fails: `runtime.fail(token, error)`. */
  | { via: 'error'; type: string; actorId: string; error: JsonValue; sample: number; child?: string }
  /** The runtime dies while the attempt of `actorId` that started in the previous step is in flight; a new runtime recovers and ticks. */
  | { via: 'interrupt'; type: 'spool.interrupt'; actorId: string; child?: string };

/** One history record the runtime is expected to write. */
export interface PredictedRecord {
  eventType: string;
  /** `started`: the first record of a child job (`xstate.init`); the job under test's is implied. */
  outcome: 'applied' | 'ignored' | 'failed' | 'stale' | 'started';
  from: JsonValue;
  to: JsonValue;
}

/** A durable timer in the model (mirrors a `scheduled` row of the timers table). */
export interface ModelTimer {
  id: string;
  key: string;
  event: { type: string; [key: string]: JsonValue };
  dueAt: number;
}

/** An active invocation in the model (mirrors an `active` row of the effects table). */
export interface ModelEffect {
  id: string;
  actorId: string;
  src: string;
  /** `activity`: a fromPromise run by the runtime; `child`: a child job (its job id is this id). */
  kind: 'activity' | 'child';
  attempt: number;
  maxAttempts: number;
  unsafe: boolean;
  /** `waiting`: deferred, settled by a token (or, for a child, by its end); `backoff`: a retry is due at `nextRunAt`; `settled`: finished. */
  status: 'waiting' | 'backoff' | 'settled';
  nextRunAt: number | null;
  /** Its current attempt started during the step that produced this state. */
  fresh: boolean;
}

/** One job in the model: the job under test, or one of its child jobs. */
export interface ModelJob {
  /** Invoke ids from the job under test to this job, joined by `/`; `''` for the job under test. */
  path: string;
  jobId: string;
  /** Registered machine id: `<parent id>.<src>` for a child job. */
  machineId: string;
  /** For a child job: the parent job's id; else null. */
  parentJobId: string | null;
  /** For a child job: its invoke id in the parent; else null. */
  actorId: string | null;
  status: 'active' | 'done' | 'error' | 'stopped';
  machine: AnyMachineSnapshot;
  revision: number;
  timers: ModelTimer[];
  effects: ModelEffect[];
  /** History records written to this job by the step that produced this state. */
  records: PredictedRecord[];
  /** Static transitions of this job's machine taken (applied) during that step, always-transitions included. */
  taken: StaticTransition[];
}

/** An event that failed during a step, and why (an action threw, an unsupported action…). */
export interface ModelFailure {
  machineId: string;
  eventType: string;
  message: string;
}

/** The model's state: the job under test (these fields), and its child jobs. It is an XState-graph snapshot (status/output/error) too. */
export interface ModelState extends ModelJob {
  output: unknown;
  error: unknown;
  /** Milliseconds since the job started. */
  now: number;
  /**
   * Child jobs (and theirs), in creation order: running ones, ones that ended during the step
   * that produced this state, and ended ones with a timer left to fire.
   */
  children: ModelJob[];
  /** Events that failed during the step that produced this state. */
  failures: ModelFailure[];
  /** Event types applied (or recorded) during that step, in order, each with the path of its job. */
  trail: Array<{ path: string; eventType: string }>;
  /** The snapshots the step committed, in order (one per applied event), each with the path of its job. */
  commits: Array<{ path: string; eventType: string; machine: AnyMachineSnapshot; status: ModelJob['status'] }>;
}

/** What sample functions see of a state. */
export interface StateView {
  value: JsonValue;
  context: JsonValue;
  status: ModelState['status'];
}

/** A sample payload, a list of them, or a function of the state giving them. */
export type Samples<T> = T | readonly T[] | ((state: StateView) => T | readonly T[]);

/** Samples and abstractions for the jobs of one machine. */
export interface JobOptions {
  /** Per event type: sample events (with or without `type`). */
  events: Record<string, Samples<Record<string, unknown>>>;
  /** Per invoke id or src: sample outputs of `done` steps. Default `[null]`. */
  outputs: Record<string, Samples<unknown>>;
  /** Per invoke id or src: sample errors of `error` steps. Default `[{ name: 'Error', message: 'sample failure' }]`. */
  errors: Record<string, Samples<unknown>>;
  /** Per src: how many attempts of every invocation fail (retryably) before one waits for its outcome. */
  failAttempts: Record<string, number>;
  /** Abstraction of the machine part of the state key. Default `{ value, context }`. */
  stateKey: ((state: StateView) => unknown) | undefined;
}

/** How the model was configured: the parts of path options it needs. */
export interface ModelConfig extends JobOptions {
  /** The definition as the runtime holds it (defaults resolved). */
  def: RegisteredMachine;
  jobId: string;
  /** Which activities may be interrupted by a crash mid-attempt: `unsafe` ones (default), `all`, or `none`. */
  interrupts: 'unsafe' | 'all' | 'none';
  /** Child machines by registered id (`<parent id>.<src>`, recursively): their definitions as registered, and their samples. */
  children?: Record<string, JobOptions & { def: RegisteredMachine }>;
}

/** The job under test and every child job. */
export function allJobs(state: ModelState): ModelJob[] {
  return [state, ...state.children];
}

/** The job a step acts on: the job under test, or the running child job at `child` (invoke ids joined by `/`). */
export function jobAt(state: ModelState, child: string | undefined): ModelJob {
  if (child === undefined || child === '') return state;
  const job = state.children.filter((c) => c.path === child && c.status === 'active').at(-1);
  if (!job) throw new Error(`No child job "${child}" is running here.`);
  return job;
}

/** When the runtime next wakes up: the earliest timer or retry of any job (a stopped child's are cancelled). */
export function nextWake(state: ModelState): number | null {
  let wake: number | null = null;
  for (const job of allJobs(state)) {
    for (const t of job.timers) wake = wake === null ? t.dueAt : Math.min(wake, t.dueAt);
    for (const e of job.effects) if (e.status === 'backoff' && e.nextRunAt !== null) wake = wake === null ? e.nextRunAt : Math.min(wake, e.nextRunAt);
  }
  return wake;
}

export function samplesOf<T>(samples: Samples<T>, view: StateView): T[] {
  const resolved = typeof samples === 'function' ? (samples as (s: StateView) => T | readonly T[])(view) : samples;
  return Array.isArray(resolved) ? [...(resolved as readonly T[])] : [resolved as T];
}
