import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { JsonValue, Runtime } from '../index.ts';
import { closeRuntime, driveStep, openRuntime, restartInProcess, scriptedDefinition, type ActivityScript, type DriverContext, type Hang } from './driver.ts';
import type { PredictedRecord } from './model.ts';
import { formatValue } from './labels.ts';
import { type GeneratedPaths, type PathPlan, type PredictedChild, type PredictedState } from './paths.ts';
import { VirtualClock } from './VirtualClock.ts';
import { ownModule } from '../loader/ownFiles.ts';

/** How a path is replayed on the real runtime. */
export type RunMode =
  /** One runtime for the whole path. */
  | 'plain'
  /** The runtime is closed and a new one opened on the same file between every two steps. */
  | 'restart'
  /** Every step runs in a new child process; the previous one is SIGKILLed after its step. */
  | 'child';

export interface RunPathOptions {
  mode?: RunMode;
  /** Directory for the SQLite file (a fresh subdirectory is made and removed). Default: the OS temp directory. */
  dir?: string;
  /** A `postgres://` URL: each run uses a new database on that server, dropped after (instead of a SQLite file in `dir`). */
  db?: string;
  /** `NORMAL` (default: survives process crashes, which is what these tests do) or `FULL`. */
  synchronous?: 'FULL' | 'NORMAL';
  /** Compare the context at every step (default), never, or through a projection (for fields the model cannot predict). */
  compareContext?: boolean | ((context: JsonValue) => unknown);
  /** For `child` mode: the module that exports the definition (the child imports it). */
  module?: string;
  /** Per child machine id: how its jobs' contexts are compared. Default: from the generated paths' child options (compare all). */
  childContexts?: Record<string, boolean | ((context: JsonValue) => unknown)>;
}

/** What a finished run left in the store of one job: compared between an uninterrupted run and crash runs. */
export interface JobRunRecord {
  job: { value: JsonValue; context: JsonValue; status: string; revision: number; output: JsonValue | null };
  history: Array<{ revision: number; eventType: string; outcome: string; from: JsonValue | null; to: JsonValue }>;
  events: Array<{ eventId: string; type: string; status: string; revision: number | null }>;
  effects: Array<{ id: string; actorId: string; src: string; status: string; active: boolean; attempt: number; maxAttempts: number }>;
  attempts: Array<{ effectId: string; attempt: number; outcome: string }>;
  timers: Array<{ id: string; key: string; status: string; dueAt: number }>;
}

/** What a finished run left in the store: the job under test, and each child job (by id). */
export interface RunRecord extends JobRunRecord {
  children: Array<JobRunRecord & { id: string; machineId: string }>;
}

/** A path step disagreed with the model, or a crash run with the uninterrupted one. */
export class PathMismatchError extends Error {
  override name = 'PathMismatchError';
  readonly code = 'SPOOL_PATH_MISMATCH';
}

/** The file of the child-process fixture. */
export const CHILD_SCRIPT = ownModule('./pathChild', import.meta.url);

/**
 * Replay one generated path on the real runtime (SQLite file, virtual clock, scripted
 * activities), asserting the predicted state value, context and history records after every
 * step, and the run's invariants (no revision twice, no activity over its attempts).
 *
 * @example
 * const generated = generatePaths(approvalFlow, options);
 * for (const path of generated.paths) await runPath(generated, path, { mode: 'restart' });
 */
export async function runPath(generated: GeneratedPaths, path: PathPlan, options: RunPathOptions = {}): Promise<RunRecord> {
  const mode = options.mode ?? 'plain';
  // Its own fresh directory, removed after the run: by default under the OS temp dir, so nothing is left in the project.
  const dir = join(resolve(options.dir ?? tmpdir()), `spool-path-${randomBytes(6).toString('hex')}`);
  mkdirSync(dir, { recursive: true });
  try {
    // The Postgres driver is imported only for a run on Postgres (a child process of a SQLite run starts without it).
    const scratch = options.db === undefined ? undefined : await (await import('../../persistence/drivers/pg/scratch.ts')).scratchDatabase(options.db, 'spool_path');
    const file = scratch?.url ?? join(dir, 'spool.db');
    try {
      const record = mode === 'child' ? await runInChildren(generated, path, file, options) : await runInProcess(generated, path, file, mode, options);
      checkInvariants(generated, path, mode, record);
      return record;
    } finally {
      await scratch?.drop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runInProcess(generated: GeneratedPaths, path: PathPlan, file: string, mode: 'plain' | 'restart', options: RunPathOptions): Promise<RunRecord> {
  const script: ActivityScript = { failAttempts: generated.failAttempts, childFailAttempts: generated.childFailAttempts, hang: null, onHang: () => undefined };
  const clock = new VirtualClock();
  const ctx: DriverContext = {
    file,
    clock,
    t0: clock.now(),
    jobId: generated.jobId,
    machineId: generated.machineId,
    definition: scriptedDefinition(generated.definition, generated.jobId, script),
    script,
    synchronous: options.synchronous ?? 'NORMAL',
    runtime: null,
    die: restartInProcess,
  };
  const hangs = hangsOf(path);
  const checks = withChildContexts(generated, options);
  try {
    await openRuntime(ctx);
    await step(ctx, path, 0, { via: 'start', input: path.input }, hangs[0] ?? null, path.start, checks);
    for (const [i, planned] of path.steps.entries()) {
      if (mode === 'restart') await restartInProcess(ctx);
      await step(ctx, path, i + 1, planned.step, hangs[i + 1] ?? null, planned.expect, checks);
    }
    return await recordOf(ctx.runtime!, ctx.jobId);
  } finally {
    await closeRuntime(ctx);
  }
}

async function step(
  ctx: DriverContext,
  path: PathPlan,
  index: number,
  action: Parameters<typeof driveStep>[1],
  hang: Hang | null,
  expect: PredictedState,
  options: RunPathOptions,
): Promise<void> {
  const label = index === 0 ? 'start' : path.steps[index - 1]!.label;
  try {
    await driveStep(ctx, action, index, hang);
  } catch (error) {
    throw new PathMismatchError(`${where(path, index, label)}: the runtime refused the step: ${(error as Error).message}`, { cause: error });
  }
  checkStep(path, index, label, expect, await observe(ctx.runtime!, ctx.jobId, ctx.clock.now() - ctx.t0), options);
}

/** The activity whose attempt must stay in flight after each step (0 = start), for the next step's interrupt. */
function hangsOf(path: PathPlan): Array<Hang | null> {
  const out: Array<Hang | null> = [];
  for (let i = 0; i <= path.steps.length; i += 1) {
    const next = path.steps[i]?.step;
    out.push(next?.via === 'interrupt' ? { child: next.child ?? '', actorId: next.actorId } : null);
  }
  return out;
}

/** The run options with each child machine's context comparison filled in from the generated paths. */
function withChildContexts(generated: GeneratedPaths, options: RunPathOptions): RunPathOptions {
  return { ...options, childContexts: { ...Object.fromEntries(generated.children.map((c) => [c.machineId, c.compareContext])), ...(options.childContexts ?? {}) } };
}

type Seen = { value: JsonValue; context: JsonValue; status: string; history: Array<{ eventType: string; outcome: string; from: JsonValue | null; to: JsonValue }> };

/** What a step is checked against: the job and its history, and every other job in the store (its child jobs). */
export interface Observation extends Seen {
  /** Clock time minus the start time. */
  now: number;
  children: Array<Seen & { id: string; machineId: string }>;
}

export async function observe(runtime: Runtime, jobId: string, now: number): Promise<Observation> {
  const seen = async (id: string): Promise<Seen> => {
    const job = await runtime.get(id);
    const history = await runtime.history(id);
    return { value: job.value, context: job.context, status: job.status, history: history.map((h) => ({ eventType: h.eventType, outcome: h.outcome, from: h.from, to: h.to })) };
  };
  const others = (await runtime.list()).filter((j) => j.id !== jobId);
  const children: Observation['children'] = [];
  for (const job of others) children.push({ id: job.id, machineId: job.machineId, ...(await seen(job.id)) });
  return { ...(await seen(jobId)), now, children };
}

function where(path: PathPlan, index: number, label: string): string {
  return `Path ${path.id} "${path.name}", step ${index} (${label})`;
}

/** Compare one step with the model's prediction: value, status, context, clock, and the step's history records. */
export function checkStep(path: PathPlan, index: number, label: string, expect: PredictedState, seen: Observation, options: RunPathOptions): void {
  const at = where(path, index, label);
  const problems: string[] = [];
  if (!same(seen.value, expect.value)) problems.push(`state: expected ${formatValue(expect.value)}, the runtime is in ${formatValue(seen.value)}`);
  if (seen.status !== expect.status) problems.push(`status: expected ${expect.status}, got ${seen.status}`);
  const compare = options.compareContext ?? true;
  if (compare !== false) {
    const project = typeof compare === 'function' ? compare : (c: JsonValue) => c;
    if (!same(project(seen.context), project(expect.context))) {
      problems.push(`context: expected ${JSON.stringify(project(expect.context))}, got ${JSON.stringify(project(seen.context))}`);
    }
  }
  if (seen.now !== expect.now) problems.push(`clock: expected start+${expect.now} ms, the runtime woke at start+${seen.now} ms`);
  const expected = expectedHistory(path, index);
  const got = seen.history.map((h) => `${h.eventType}:${h.outcome} ${JSON.stringify(h.from)}→${JSON.stringify(h.to)}`);
  const want = expected.map((h) => `${h.eventType}:${h.outcome} ${JSON.stringify(h.from)}→${JSON.stringify(h.to)}`);
  if (got.join('\n') !== want.join('\n')) {
    problems.push(`history: expected\n      ${want.join('\n      ')}\n    got\n      ${got.join('\n      ')}`);
  }
  problems.push(...checkChildren(path, index, seen, options));
  if (problems.length > 0) {
    // The model and the runtime run the same machine on the same steps: a context that differs
    // most often means the machine is not deterministic.
    const hint = problems.some((p) => p.startsWith('context'))
      ? '\n  (if the machine reads Math.random(), Date.now() or other outside state in an assign or a guard, it gives other values on each run: let an activity produce them, as its output)'
      : '';
    throw new PathMismatchError(`${at}: the runtime disagrees with the model:\n  - ${problems.join('\n  - ')}${hint}`);
  }
}

/** Compare every child job with the model: which exist, and each one's value, status, context and whole history. */
function checkChildren(path: PathPlan, index: number, seen: Observation, options: RunPathOptions): string[] {
  const problems: string[] = [];
  // The last prediction of each child job up to this step (an ended one is not predicted again).
  const last = new Map<string, PredictedChild>();
  for (const s of [path.start, ...path.steps.slice(0, index).map((p) => p.expect)]) for (const c of s.children) last.set(c.jobId, c);
  const expected = [...last.values()];
  const wantIds = expected.map((c) => c.jobId).sort();
  const gotIds = seen.children.map((c) => c.id).sort();
  if (!same(wantIds, gotIds)) problems.push(`child jobs: expected [${wantIds.join(', ')}], the store has [${gotIds.join(', ')}]`);
  for (const child of expected) {
    const got = seen.children.find((c) => c.id === child.jobId);
    if (!got) continue;
    const name = `child job ${child.path} (${child.jobId})`;
    if (got.machineId !== child.machineId) problems.push(`${name}: machine ${got.machineId}, expected ${child.machineId}`);
    if (!same(got.value, child.value)) problems.push(`${name}: state: expected ${formatValue(child.value)}, the runtime is in ${formatValue(got.value)}`);
    if (got.status !== child.status) problems.push(`${name}: status: expected ${child.status}, got ${got.status}`);
    const compare = options.childContexts?.[child.machineId] ?? true;
    if (compare !== false) {
      const project = typeof compare === 'function' ? compare : (c: JsonValue) => c;
      if (!same(project(got.context), project(child.context))) {
        problems.push(`${name}: context: expected ${JSON.stringify(project(child.context))}, got ${JSON.stringify(project(got.context))}`);
      }
    }
    const line = (h: { eventType: string; outcome: string; from: JsonValue | null; to: JsonValue }) => `${h.eventType}:${h.outcome} ${JSON.stringify(h.from)}→${JSON.stringify(h.to)}`;
    const want = expectedChildHistory(path, index, child.jobId).map(line);
    const have = got.history.map(line);
    if (have.join('\n') !== want.join('\n')) problems.push(`${name}: history: expected\n      ${want.join('\n      ')}\n    got\n      ${have.join('\n      ')}`);
  }
  return problems;
}

/** Every history record expected of a child job up to step `index` (its `xstate.init` record included). */
function expectedChildHistory(path: PathPlan, index: number, jobId: string): PredictedRecord[] {
  const states = [path.start, ...path.steps.slice(0, index).map((s) => s.expect)];
  return states.flatMap((s) => s.children.filter((c: PredictedChild) => c.jobId === jobId).flatMap((c) => c.records));
}

/** Every history record expected up to step `index`: the start record, then each step's records. */
function expectedHistory(path: PathPlan, index: number): Array<Omit<PredictedRecord, 'outcome' | 'from'> & { outcome: string; from: JsonValue | null }> {
  const start = { eventType: 'xstate.init', outcome: 'started', from: null, to: firstValue(path) };
  return [start, ...path.start.records, ...path.steps.slice(0, index).flatMap((s) => s.expect.records)];
}

/** The value right after the initial transition, before any event the start itself triggered. */
function firstValue(path: PathPlan): JsonValue {
  return path.start.records[0]?.from ?? path.start.value;
}

function same(a: unknown, b: unknown): boolean {
  return stable(a) === stable(b);
}

function stable(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]))
        : v;
  return JSON.stringify(sort(value)) ?? 'undefined';
}

/** The store's record of the job and of every other job (its child jobs), for comparing runs. */
export async function recordOf(runtime: Runtime, jobId: string): Promise<RunRecord> {
  const one = async (id: string): Promise<JobRunRecord> => {
    const d = await runtime.details(id);
    return {
      job: { value: d.job.value, context: d.job.context, status: d.job.status, revision: d.job.revision, output: d.job.output ?? null },
      history: d.history.map((h) => ({ revision: h.revision, eventType: h.eventType, outcome: h.outcome, from: h.from, to: h.to })),
      events: d.events.map((e) => ({ eventId: e.eventId, type: e.type, status: e.status, revision: e.revision })),
      effects: d.effects.map((e) => ({ id: e.id, actorId: e.actorId, src: e.src, status: e.status, active: e.active, attempt: e.attempt, maxAttempts: e.maxAttempts })),
      attempts: d.attempts.map((a) => ({ effectId: a.effectId, attempt: a.attempt, outcome: a.outcome })),
      timers: d.timers.map((t) => ({ id: t.id, key: t.key, status: t.status, dueAt: t.dueAt })),
    };
  };
  const children: RunRecord['children'] = [];
  for (const job of (await runtime.list()).filter((j) => j.id !== jobId).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    children.push({ id: job.id, machineId: job.machineId, ...(await one(job.id)) });
  }
  return { ...(await one(jobId)), children };
}

/** No revision written twice or skipped; no activity started more often than its policy allows. */
export function checkInvariants(generated: GeneratedPaths, path: PathPlan, mode: RunMode, record: RunRecord): void {
  const at = `Path ${path.id} "${path.name}" (${mode})`;
  const problems: string[] = [];
  for (const [name, job] of [['', record], ...record.children.map((c) => [`child job ${c.id}: `, c] as const)] as const) {
    const revisions = job.history.map((h) => h.revision);
    revisions.forEach((r, i) => {
      if (r !== i + 1) problems.push(`${name}history revision ${r} at position ${i + 1} (duplicated or skipped revision): ${revisions.join(', ')}`);
    });
    if (job.job.revision !== revisions.length) problems.push(`${name}job revision ${job.job.revision} but ${revisions.length} history records`);
    for (const effect of job.effects) {
      const attempts = job.attempts.filter((a) => a.effectId === effect.id).map((a) => a.attempt);
      if (new Set(attempts).size !== attempts.length) problems.push(`${name}activity ${effect.id} has an attempt recorded twice: ${attempts.join(', ')}`);
      if (attempts.length > effect.maxAttempts || effect.attempt > effect.maxAttempts) {
        problems.push(`${name}activity ${effect.id} (${effect.src}) was started ${Math.max(attempts.length, effect.attempt)} times; its policy allows ${effect.maxAttempts}`);
      }
    }
  }
  if (problems.length > 0) throw new PathMismatchError(`${at}: ${problems.join('; ')}`);
  void generated;
}

/**
 * Compare a crash run with the uninterrupted run: final state, context, output, history
 * (event types, outcomes, revisions), inbox, activities and their attempts, timers, of the job
 * and of every child job.
 */
export function compareRuns(path: PathPlan, mode: RunMode, uninterrupted: RunRecord, crashed: RunRecord): void {
  const parts: Array<keyof RunRecord> = ['job', 'history', 'events', 'effects', 'attempts', 'timers', 'children'];
  const diffs = parts.filter((k) => !same(uninterrupted[k], crashed[k]));
  if (diffs.length === 0) return;
  const show = (k: keyof RunRecord) => `  ${k}:\n    uninterrupted ${JSON.stringify(uninterrupted[k])}\n    ${mode.padEnd(13)} ${JSON.stringify(crashed[k])}`;
  throw new PathMismatchError(`Path ${path.id} "${path.name}": the ${mode} run differs from the uninterrupted run:\n${diffs.map(show).join('\n')}`);
}

// ------------------------------------------------------------------ child processes

/** The first line a child reads: where and what to run. */
export interface ChildConfig {
  file: string;
  module: string;
  machineId: string;
  version: string;
  jobId: string;
  failAttempts: Record<string, number>;
  childFailAttempts: Record<string, Record<string, number>>;
  synchronous: 'FULL' | 'NORMAL';
  /** Clock time to start at (the previous process's last time). */
  now: number;
  t0: number;
}

export type ChildCommand = { index: number; step: Parameters<typeof driveStep>[1]; hang: Hang | null };

export type ChildMessage =
  | { type: 'ack'; index: number; now: number; observation: Observation; record: RunRecord }
  | { type: 'inflight'; index: number; now: number }
  | { type: 'error'; index: number; message: string };

async function runInChildren(generated: GeneratedPaths, path: PathPlan, file: string, options: RunPathOptions): Promise<RunRecord> {
  if (!options.module) throw new PathMismatchError('A child-process run needs `module`: the module that exports the definition, for the child to import.');
  const t0 = new VirtualClock().now();
  let now = t0;
  let record: RunRecord | undefined;
  const hangs = hangsOf(path);
  const actions: Array<Parameters<typeof driveStep>[1]> = [{ via: 'start', input: path.input }, ...path.steps.map((s) => s.step)];
  const checks = withChildContexts(generated, options);
  for (const [index, action] of actions.entries()) {
    const config: ChildConfig = {
      file,
      module: resolve(options.module),
      machineId: generated.machineId,
      version: generated.version,
      jobId: generated.jobId,
      failAttempts: generated.failAttempts,
      childFailAttempts: generated.childFailAttempts,
      synchronous: options.synchronous ?? 'NORMAL',
      now,
      t0,
    };
    const message = await oneChildStep(config, { index, step: action, hang: hangs[index] ?? null });
    const label = index === 0 ? 'start' : path.steps[index - 1]!.label;
    if (message.type === 'error') throw new PathMismatchError(`${where(path, index, label)} (child process): ${message.message}`);
    now = message.now;
    if (message.type === 'ack') {
      checkStep(path, index, label, index === 0 ? path.start : path.steps[index - 1]!.expect, message.observation, checks);
      record = message.record;
    }
  }
  if (!record) throw new PathMismatchError(`Path ${path.id}: no child process reported its record.`);
  return record;
}

/**
 * What the child runs under: tsx with the hooks the `spool` command loads machines modules with
 * (src/loader), so the child loads the same module the same way. Checked when first needed: only
 * child runs need tsx.
 */
function childLoader(): string {
  try {
    createRequire(import.meta.url).resolve('tsx');
  } catch {
    throw new PathMismatchError('Child-process runs need the `tsx` package (they run the TypeScript fixture and your machines module); install it or do not ask for child runs.');
  }
  return new URL('../loader/register.mjs', import.meta.url).href;
}

/** A child that neither reports nor exits within this many real milliseconds is killed and the run fails. */
const CHILD_STEP_TIMEOUT_MS = 30_000;

/** Spawn a child, run one step in it, take its report, then SIGKILL it (by its own pid) and wait for the exit. */
async function oneChildStep(config: ChildConfig, command: ChildCommand): Promise<ChildMessage> {
  const child = spawn(process.execPath, ['--import', childLoader(), CHILD_SCRIPT], { cwd: process.cwd(), env: process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.on('exit', (code, signal) => done({ code, signal })));
  const reply = new Promise<ChildMessage | undefined>((done) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      try {
        const msg = JSON.parse(line) as ChildMessage;
        if (msg.type === 'ack' || msg.type === 'inflight' || msg.type === 'error') done(msg);
      } catch {
        // not a protocol line
      }
    });
    lines.on('close', () => done(undefined));
  });
  child.stdin.write(`${JSON.stringify(config)}\n${JSON.stringify(command)}\n`);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<'timeout'>((done) => (timer = setTimeout(() => done('timeout'), CHILD_STEP_TIMEOUT_MS)));
  const msg = await Promise.race([reply, exited.then(() => undefined), timeout]);
  clearTimeout(timer);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  const exit = await exited;
  if (msg === 'timeout') throw new PathMismatchError(`The child process did not report step ${command.index} within ${CHILD_STEP_TIMEOUT_MS} ms; it was killed.\n${stderr}`);
  if (!msg) throw new PathMismatchError(`The child process exited (code ${exit.code}, signal ${exit.signal}) without reporting step ${command.index}:\n${stderr}`);
  return msg;
}
