/**
 * Schedules: cron expressions and intervals that start jobs, written against the store port.
 * `Runtime.schedule`, `unschedule` and `schedules` call `upsertSchedule`, `removeSchedule` and
 * `listSchedules`; `Runtime.tick` calls `fireDueSchedules`; `Runtime.nextWakeAt` asks
 * `nextScheduleWake`.
 *
 * Every occurrence (schedule id + due time) fires at most once across all processes: a step of a
 * schedule is one store transaction that moves the schedule on `WHERE revision = ?`, inserts the
 * occurrence's row under its UNIQUE (schedule id, due time) key and creates the job it starts,
 * whose id is derived from both (`schedule~<id>~<ISO time>`), so a repeated step is refused
 * instead of starting a second job. Time is the runtime's clock; nothing here reads `Date.now()`.
 *
 * The decisions of a step are a pure function ({@link planStep}) of the stored schedule, the
 * clock's time and whether the previous run has finished.
 */
import { Cron } from 'croner';
import type { Clock } from '../ports/clock.ts';
import type {
  JobRecord,
  JobStore,
  JsonValue,
  NewInboxEvent,
  NewJob,
  NewSchedule,
  OccurrenceOutcome,
  ScheduleCatchUp,
  ScheduleFire,
  ScheduleOverlap,
  ScheduleRecord,
} from '../ports/store.ts';
import { IdempotencyConflictError, SpoolError } from '../base/errors.ts';
import { hashJson } from '../base/json.ts';
import { unknownNames } from './options.ts';
import { namesEventType, type MachineRegistry } from './registry.ts';
import { type RegisteredMachine } from '../base/definition.ts';

/** What `Runtime.schedule` takes. */
export interface ScheduleSpec {
  /** Your id for the schedule (1-100 printable ASCII characters without spaces or `~`): writing it again updates it. */
  id: string;
  /** The machine to start (its newest registered version at each occurrence). */
  machineId: string;
  /** The input of every job it starts, validated now like `start` does. Default `{}`. */
  input?: unknown;
  /**
   * A cron expression: 5 fields (`minute hour day-of-month month day-of-week`), or 6 with seconds
   * first; `@daily`, `@hourly`, ... work too. Give `cron` or `everyMs`, not both.
   */
  cron?: string;
  /** The IANA time zone the cron expression is read in, e.g. `Europe/Paris`. Default `UTC`. */
  timezone?: string;
  /** An interval in ms (at least 1000): occurrences at `startAt + k * everyMs`, or at multiples of it since the epoch. */
  everyMs?: number;
  /**
   * An occurrence whose previous run (the job the previous started occurrence created) has not
   * finished: `skip` it; `buffer-one` (remember one, start it when the previous run ends; later
   * ones are skipped); `allow-all` (start it anyway); `cancel-previous` (request cancellation of
   * the previous run, a request the machine decides on, and start it).
   */
  overlap: ScheduleOverlap;
  /**
   * Occurrences handled later than `graceMs` after they fell due, or followed by a later due one,
   * are missed (the process was down, the clock jumped): `skip-missed` (run none of them; the next
   * run is the next occurrence on time), `run-once` (one run, for the latest, stands for all of
   * them), `{ runEach: n }` (one run for each of the latest n, oldest first; n from 1 to 1000).
   */
  catchUp: ScheduleCatchUp;
  /** How late an occurrence may be handled and still be on time, in ms. Default 60000. */
  graceMs?: number;
  /** No occurrence before this time (epoch ms or a Date); an interval's occurrences are counted from it. Default: now (intervals: the epoch). */
  startAt?: number | Date;
}

/** A schedule as the API returns it: its definition, its next occurrence and what it last did. */
export type Schedule = ScheduleRecord;

/** What `Runtime.schedule` resolves with. */
export interface ScheduleResult {
  schedule: Schedule;
  /** `created`; `updated` (the definition changed); `unchanged` (the same definition was written again: nothing changed). */
  status: 'created' | 'updated' | 'unchanged';
}

/** What the runtime tells observers about schedules (part of `RuntimeEvent`). */
export type ScheduleEvent =
  | {
      type: 'schedule.fired';
      scheduleId: string;
      dueAt: number;
      /** `buffered`: waiting for the previous run to end (buffer-one). */
      outcome: OccurrenceOutcome | 'buffered';
      jobId: string | null;
      reason: string | null;
    }
  | { type: 'schedule.missed'; jobId: null; scheduleId: string; count: number; from: number; to: number }
  /** A stored schedule that cannot be used: it does not fire (reported once per runtime and stored revision). */
  | { type: 'schedule.damaged'; jobId: null; scheduleId: string; reason: string };

/** A schedule definition that cannot be used: a bad cron expression, time zone, interval or policy. */
export class InvalidScheduleError extends SpoolError {
  readonly code = 'SPOOL_INVALID_SCHEDULE';
  readonly category = 'bad-input';
}

/** No schedule with that id is visible to this caller. */
export class ScheduleNotFoundError extends SpoolError {
  readonly code = 'SPOOL_SCHEDULE_NOT_FOUND';
  readonly category = 'not-found';
  constructor(id: string) {
    super(`No schedule "${id}". Check the id with \`spool schedule list\`.`, { scheduleId: id });
  }
}

/** A job ready to be written (everything `start` validates has passed), and what to do once it is. */
export interface PreparedStart {
  job: NewJob;
  /** Paths of the input's values under the machine's sensitive keys (redacted in `job.input`). */
  sensitivePaths: string[];
  /** What `start` does after its commit: runtime events, actions of the initial state, activities. */
  started(record: JobRecord): Promise<void>;
}

/** What the schedules need from the runtime. */
export interface SchedulesHost {
  readonly store: JobStore;
  readonly clock: Clock;
  readonly owner: string | null;
  /** Whether a machine with this id is registered in this runtime. */
  hasMachine(machineId: string): boolean;
  /** Whether the newest version of the machine can be cancelled (it has its cancel event). */
  canCancel(machineId: string): boolean;
  /** Validate a start as `start` does (machine, input, initial state) and build the job without writing it. Throws the same typed errors. */
  prepareStart(machineId: string, input: unknown, jobId: string, at: number): PreparedStart;
  /** The cancel event for a job, or undefined when its machine cannot be cancelled. */
  cancelEvent(record: JobRecord, reason: string, at: number): NewInboxEvent | undefined;
  /** After a cancel request is durable: abort the job's running activities and apply its cancel event. */
  cancelled(jobId: string, reason: string): Promise<void>;
  emit(event: ScheduleEvent): void;
  log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>): void;
}

/** What the runtime hands `schedulesHost`: its parts, the way in, the cancel event, its public `cancel` and its events. */
export interface SchedulesParts {
  store: JobStore;
  clock: Clock;
  owner: string | null;
  registry: MachineRegistry;
  prepareStart: SchedulesHost['prepareStart'];
  /** The machine's cancel event for a job (cancel.ts), and the runtime's `cancel`. */
  cancelEvent: (jobId: string, def: RegisteredMachine, reason: string, at: number) => NewInboxEvent;
  cancel: (jobId: string, reason: string) => Promise<unknown>;
  emit: (event: ScheduleEvent | { type: 'cancel.requested'; jobId: string; reason: string }) => void;
  log: SchedulesHost['log'];
}

/** The schedules' host over the runtime's parts: the machines and cancel events they name, the starts and cancels they make. */
export function schedulesHost(parts: SchedulesParts): SchedulesHost {
  const { registry } = parts;
  return {
    store: parts.store,
    clock: parts.clock,
    owner: parts.owner,
    hasMachine: (machineId) => registry.all().some((m) => m.id === machineId),
    canCancel: (machineId) => {
      const def = registry.latest(machineId);
      return namesEventType(def, def.cancel.event);
    },
    prepareStart: parts.prepareStart,
    cancelEvent: (record, reason, at) => {
      const def = registry.route(record.machineId, record.machineVersion)?.target;
      return def && namesEventType(def, def.cancel.event) ? parts.cancelEvent(record.id, def, reason, at) : undefined;
    },
    cancelled: async (jobId, reason) => {
      parts.emit({ type: 'cancel.requested', jobId, reason });
      try {
        await parts.cancel(jobId, reason); // the request is recorded: this aborts its activities and applies the event
      } catch (error) {
        if (!(error instanceof SpoolError && (error.category === 'terminal' || error.category === 'conflict'))) throw error;
      }
    },
    emit: (event) => parts.emit(event),
    log: parts.log,
  };
}

const ID_PATTERN = /^[\x21-\x7d]{1,100}$/; // printable ASCII without space and `~` (0x7e): `~` separates the job id's parts
const MIN_EVERY_MS = 1000;
const MAX_RUN_EACH = 1000;
/** Due occurrences looked at per step; more than this and the oldest are missed whatever the policy (> MAX_RUN_EACH). */
const WINDOW = 2048;
const DEFAULT_GRACE_MS = 60_000;
/** Steps of one schedule per tick at most: runEach (1000) plus windows of missed occurrences, with room for conflicts. */
const MAX_STEPS = 5000;
const PAGE = 100;
const OVERLAPS: readonly ScheduleOverlap[] = ['skip', 'buffer-one', 'allow-all', 'cancel-previous'];

/** The job id of a schedule's occurrence: the same in every process, so a second start of it is refused. */
export function occurrenceJobId(scheduleId: string, dueAt: number): string {
  return `schedule~${scheduleId}~${new Date(dueAt).toISOString()}`;
}

// ------------------------------------------------------------------ timing

/** When a schedule's occurrences are. */
export interface Timing {
  /** The first occurrence strictly after `t`, or null when none comes. */
  after(t: number): number | null;
}

/** The occurrences of a cron expression or an interval, from `startAt` on. */
export function timingOf(s: Pick<ScheduleRecord, 'cron' | 'timezone' | 'everyMs' | 'startAt'>): Timing {
  const startAt = s.startAt;
  if (s.cron !== null) {
    const cron = new Cron(s.cron, { timezone: s.timezone ?? 'UTC', mode: '5-or-6-parts' });
    return {
      after: (t) => {
        const from = startAt !== null && t < startAt ? startAt - 1 : t;
        return cron.nextRun(new Date(from))?.getTime() ?? null;
      },
    };
  }
  const every = s.everyMs!;
  const anchor = startAt ?? 0;
  return { after: (t) => (t < anchor ? anchor : anchor + (Math.floor((t - anchor) / every) + 1) * every) };
}

// ------------------------------------------------------------------ planning (pure)

/** One step of a schedule: the occurrence it handles (if any), how, and the schedule's state after it. */
export interface Step {
  /** The occurrence acted on; null when the step only passes over missed occurrences. */
  dueAt: number | null;
  action: 'start' | 'skip' | 'buffer' | 'none';
  /** `cancel-previous`: request cancellation of the previous run (it has not finished). */
  cancelPrevious: boolean;
  /** Why an occurrence is skipped. */
  reason: string | null;
  /** Occurrences this step passes over as missed. */
  missed: { count: number; from: number; to: number } | null;
  /** The state after the step (`lastJobId` is the caller's: the job it starts, if it does). */
  state: { nextDueAt: number | null; bufferedDueAt: number | null; lastDueAt: number | null; missed: number };
}

/**
 * The next step of schedule `s` at time `now`, or null when nothing is due. `previousFinished`:
 * the previous run (`s.lastJobId`) has ended, or there is none.
 *
 * A buffered occurrence whose previous run has ended starts first. Otherwise the due occurrences
 * (`nextDueAt` up to `now`) are split by the catch-up policy into the ones that run (a suffix:
 * the latest on-time one, the latest, or the latest n) and the missed ones before them; one step
 * passes over the missed ones before the first run and handles that run with the overlap policy.
 */
export function planStep(s: ScheduleRecord, now: number, previousFinished: boolean, timing: Timing): Step | null {
  const keep = { nextDueAt: s.nextDueAt, bufferedDueAt: s.bufferedDueAt, lastDueAt: s.lastDueAt, missed: s.missed };
  if (s.bufferedDueAt !== null && previousFinished) {
    return { dueAt: s.bufferedDueAt, action: 'start', cancelPrevious: false, reason: null, missed: null, state: { ...keep, bufferedDueAt: null } };
  }
  if (s.nextDueAt === null || s.nextDueAt > now) return null;

  const due = [s.nextDueAt];
  let after = timing.after(s.nextDueAt);
  while (after !== null && after <= now && due.length < WINDOW) {
    due.push(after);
    after = timing.after(after);
  }
  const runs = s.catchUp === 'skip-missed' || s.catchUp === 'run-once' ? 1 : s.catchUp.runEach;
  if (after !== null && after <= now) {
    // More are due than a window holds: its oldest are missed whatever the policy.
    const dropped = due.slice(0, due.length - runs);
    return {
      dueAt: null,
      action: 'none',
      cancelPrevious: false,
      reason: null,
      missed: { count: dropped.length, from: dropped[0]!, to: dropped.at(-1)! },
      state: { ...keep, nextDueAt: due[dropped.length]!, missed: s.missed + dropped.length },
    };
  }

  const latest = due.at(-1)!;
  const run =
    s.catchUp === 'skip-missed' ? (now - latest <= s.graceMs ? latest : undefined) : s.catchUp === 'run-once' ? latest : due[Math.max(0, due.length - runs)];
  if (run === undefined) {
    return {
      dueAt: null,
      action: 'none',
      cancelPrevious: false,
      reason: null,
      missed: { count: due.length, from: due[0]!, to: latest },
      state: { ...keep, nextDueAt: after, missed: s.missed + due.length },
    };
  }
  const index = due.indexOf(run);
  const passed = due.slice(0, index);
  const step: Step = {
    dueAt: run,
    action: 'start',
    cancelPrevious: false,
    reason: null,
    missed: passed.length > 0 ? { count: passed.length, from: passed[0]!, to: passed.at(-1)! } : null,
    state: { ...keep, nextDueAt: index + 1 < due.length ? due[index + 1]! : after, lastDueAt: run, missed: s.missed + passed.length },
  };
  if (previousFinished || s.overlap === 'allow-all') return step;
  const previous = `the previous run (job ${s.lastJobId}) has not finished`;
  switch (s.overlap) {
    case 'cancel-previous':
      return { ...step, cancelPrevious: true };
    case 'skip':
      return { ...step, action: 'skip', reason: `${previous} (overlap: skip)` };
    case 'buffer-one':
      return s.bufferedDueAt === null
        ? { ...step, action: 'buffer', state: { ...step.state, bufferedDueAt: run } }
        : { ...step, action: 'skip', reason: `${previous} and the occurrence of ${iso(s.bufferedDueAt)} is already buffered (overlap: buffer-one)` };
  }
}

// ------------------------------------------------------------------ the API

/** Validate a schedule definition; throws {@link InvalidScheduleError}. Nothing is read or written. */
const LAST_START = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const SPEC_FIELDS: readonly string[] = ['id', 'machineId', 'input', 'cron', 'timezone', 'everyMs', 'overlap', 'catchUp', 'graceMs', 'startAt'];

export function validateSpec(spec: ScheduleSpec, now: number): Omit<NewSchedule, 'owner' | 'input' | 'nextDueAt' | 'bufferedDueAt' | 'lastDueAt' | 'lastJobId' | 'missed' | 'at'> {
  if (spec === null || typeof spec !== 'object') throw new InvalidScheduleError('A schedule is an object: { id, machineId, cron | everyMs, overlap, catchUp, ... }.');
  const { id, machineId, cron, timezone, everyMs, overlap, catchUp, graceMs, startAt } = spec;
  if (typeof id !== 'string' || !ID_PATTERN.test(id)) {
    throw new InvalidScheduleError('A schedule id must be 1-100 printable ASCII characters without spaces or "~".', { field: 'id' });
  }
  // A misspelt field (`timeZone`) would otherwise be ignored, and the schedule run in UTC.
  const unknown = unknownNames(spec, SPEC_FIELDS, 'field');
  if (unknown) throw new InvalidScheduleError(`Schedule ${id}: ${unknown.text}.`, { scheduleId: id, field: unknown.first });
  if (typeof machineId !== 'string' || machineId.length === 0) throw new InvalidScheduleError('A schedule needs a machineId.', { scheduleId: id, field: 'machineId' });
  if ((cron === undefined) === (everyMs === undefined)) {
    throw new InvalidScheduleError(`Schedule ${id} needs either \`cron\` (e.g. "0 3 * * *") or \`everyMs\` (e.g. 60000), not both.`, { scheduleId: id, field: 'cron' });
  }
  if (!OVERLAPS.includes(overlap)) {
    throw new InvalidScheduleError(`Schedule ${id}: overlap must be one of ${OVERLAPS.join(', ')} (got ${JSON.stringify(overlap)}).`, { scheduleId: id, field: 'overlap' });
  }
  const catchUpOk =
    catchUp === 'skip-missed' ||
    catchUp === 'run-once' ||
    (catchUp !== null && typeof catchUp === 'object' && Object.keys(catchUp).length === 1 && Number.isInteger(catchUp.runEach) && catchUp.runEach >= 1 && catchUp.runEach <= MAX_RUN_EACH);
  if (!catchUpOk) {
    throw new InvalidScheduleError(`Schedule ${id}: catchUp must be "skip-missed", "run-once" or { runEach: n } with n from 1 to ${MAX_RUN_EACH} (got ${JSON.stringify(catchUp)}).`, {
      scheduleId: id,
      field: 'catchUp',
    });
  }
  const grace = graceMs ?? DEFAULT_GRACE_MS;
  if (!Number.isSafeInteger(grace) || grace < 0) throw new InvalidScheduleError(`Schedule ${id}: graceMs must be a non-negative integer.`, { scheduleId: id, field: 'graceMs' });
  const start = startAt === undefined ? null : startAt instanceof Date ? startAt.getTime() : startAt;
  // Up to the end of year 9999: every occurrence after it must still be a date.
  if (start !== null && (!Number.isSafeInteger(start) || start < 0 || start > LAST_START)) {
    throw new InvalidScheduleError(`Schedule ${id}: startAt must be a valid Date or epoch milliseconds, from 1970 to the end of 9999.`, { scheduleId: id, field: 'startAt' });
  }
  const definition = {
    id,
    machineId,
    overlap,
    catchUp: typeof catchUp === 'string' ? catchUp : { runEach: catchUp.runEach },
    graceMs: grace,
    cron: null as string | null,
    timezone: null as string | null,
    everyMs: null as number | null,
    startAt: start,
  };
  if (everyMs !== undefined) {
    if (timezone !== undefined) throw new InvalidScheduleError(`Schedule ${id}: a time zone goes with a cron expression, not an interval.`, { scheduleId: id, field: 'timezone' });
    if (!Number.isSafeInteger(everyMs) || everyMs < MIN_EVERY_MS) {
      throw new InvalidScheduleError(`Schedule ${id}: everyMs must be an integer of at least ${MIN_EVERY_MS} (got ${JSON.stringify(everyMs)}).`, { scheduleId: id, field: 'everyMs' });
    }
    return { ...definition, everyMs };
  }
  const zone = timezone ?? 'UTC';
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
  } catch {
    throw new InvalidScheduleError(`Schedule ${id}: unknown time zone ${JSON.stringify(zone)}; use an IANA name such as "Europe/Paris" or "UTC".`, { scheduleId: id, field: 'timezone' });
  }
  if (typeof cron !== 'string' || cron.trim() === '' || cron.length > 200) {
    throw new InvalidScheduleError(`Schedule ${id}: the cron expression must be a non-empty string, e.g. "0 3 * * *".`, { scheduleId: id, field: 'cron' });
  }
  const expression = cron.trim().replace(/\s+/g, ' ');
  let next: number | null;
  try {
    next = timingOf({ cron: expression, timezone: zone, everyMs: null, startAt: start }).after(Math.max(now, start ?? now));
  } catch (error) {
    throw new InvalidScheduleError(`Schedule ${id}: invalid cron expression ${JSON.stringify(cron)}: ${(error as Error).message}`, { scheduleId: id, field: 'cron' });
  }
  if (next === null) throw new InvalidScheduleError(`Schedule ${id}: the cron expression ${JSON.stringify(cron)} never matches a date.`, { scheduleId: id, field: 'cron' });
  return { ...definition, cron: expression, timezone: zone };
}

/**
 * Create or update a schedule (see `Runtime.schedule`). Everything is validated before anything is
 * written: the definition, the machine, the input (as `start` would). Writing the same definition
 * again changes nothing (every process may call it at boot); a new time rule starts counting
 * occurrences from now, anything else keeps the schedule's place.
 */
export async function upsertSchedule(host: SchedulesHost, spec: ScheduleSpec): Promise<ScheduleResult> {
  const now = host.clock.now();
  const definition = validateSpec(spec, now);
  const prepared = host.prepareStart(definition.machineId, spec.input ?? {}, occurrenceJobId(definition.id, now), now);
  if (prepared.sensitivePaths.length > 0) {
    // The stored input is redacted, as every stored input is: each occurrence would start its job with `[redacted]`.
    throw new InvalidScheduleError(
      `Schedule ${definition.id}: its input carries sensitive ${prepared.sensitivePaths.join(', ')}, which Spool never stores, so a schedule cannot replay it. ` +
        'Give the job a reference it can look the secret up with instead.',
      { scheduleId: definition.id, field: 'input' },
    );
  }
  const input = prepared.job.input;
  if (definition.overlap === 'cancel-previous' && !host.canCancel(definition.machineId)) {
    throw new InvalidScheduleError(
      `Schedule ${definition.id}: overlap cancel-previous needs machine ${definition.machineId} to handle its cancel event; handle it or choose another overlap policy.`,
      { scheduleId: definition.id, field: 'overlap' },
    );
  }
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const stored = await host.store.getSchedule(definition.id);
    const existing = stored ? checked(stored) : null;
    if (existing && existing.owner !== host.owner) {
      throw new IdempotencyConflictError(`Schedule id "${definition.id}" is taken; choose another id.`, { scheduleId: definition.id });
    }
    // A damaged row is rewritten even where what could be read of it matches.
    if (existing && existing.damaged === undefined && sameDefinition(existing, definition, input)) return { schedule: existing, status: 'unchanged' };
    const sameTime =
      existing !== null &&
      existing.cron === definition.cron &&
      existing.timezone === definition.timezone &&
      existing.everyMs === definition.everyMs &&
      existing.startAt === definition.startAt;
    const timing = timingOf(definition);
    const record: NewSchedule = {
      ...definition,
      owner: host.owner,
      input,
      nextDueAt: sameTime ? existing.nextDueAt : timing.after(Math.max(now, definition.startAt ?? now) - 1),
      bufferedDueAt: existing !== null && definition.overlap === 'buffer-one' ? existing.bufferedDueAt : null,
      lastDueAt: existing?.lastDueAt ?? null,
      lastJobId: existing?.lastJobId ?? null,
      missed: existing?.missed ?? 0,
      at: now,
    };
    const result = await host.store.putSchedule(record, existing?.revision ?? null);
    if (result.ok) {
      host.log('info', existing ? 'schedule updated' : 'schedule created', { scheduleId: definition.id, machine: definition.machineId, nextDueAt: result.schedule.nextDueAt });
      return { schedule: result.schedule, status: existing ? 'updated' : 'created' };
    }
  }
  throw new IdempotencyConflictError(`Schedule ${definition.id} kept changing while being written; try again.`, { scheduleId: definition.id });
}

function sameDefinition(s: ScheduleRecord, d: ReturnType<typeof validateSpec>, input: JsonValue): boolean {
  return (
    s.machineId === d.machineId &&
    s.cron === d.cron &&
    s.timezone === d.timezone &&
    s.everyMs === d.everyMs &&
    s.overlap === d.overlap &&
    JSON.stringify(s.catchUp) === JSON.stringify(d.catchUp) &&
    s.graceMs === d.graceMs &&
    s.startAt === d.startAt &&
    hashJson(s.input) === hashJson(input)
  );
}

/** Remove one of this owner's schedules. Its occurrence rows and the jobs it started stay. */
export async function removeSchedule(host: SchedulesHost, id: string): Promise<boolean> {
  if (typeof id !== 'string' || id.length === 0) throw new InvalidScheduleError('A schedule id must be a non-empty string.', { field: 'id' });
  const removed = await host.store.deleteSchedule(id, host.owner);
  if (removed) host.log('info', 'schedule removed', { scheduleId: id });
  return removed;
}

/** This owner's schedules, ordered by id. */
export async function listSchedules(host: SchedulesHost): Promise<Schedule[]> {
  return (await host.store.listSchedules({ owner: host.owner })).map(checked);
}

/**
 * A stored schedule as it can be used: the store marks a row it cannot read `damaged`; a cron
 * expression or time zone that no longer works (a damaged file, a zone the runtime's ICU lacks)
 * is marked here. A damaged schedule never fires and holds no other back.
 */
function checked(s: ScheduleRecord): ScheduleRecord {
  if (s.damaged !== undefined) return s;
  const problem = timeRuleProblem(s);
  return problem === null ? s : { ...s, damaged: `the stored schedule is damaged: its time rule cannot be read (${problem}). It does not fire; add it again under its id to rewrite it, or remove it.` };
}

/** Time rules already checked (a worker checks every schedule each round): rule -> problem, or null. */
const ruleChecks = new Map<string, string | null>();

function timeRuleProblem(s: ScheduleRecord): string | null {
  const rule = `${s.cron ?? ''}|${s.timezone ?? ''}|${s.everyMs ?? ''}|${s.startAt ?? ''}`;
  let problem = ruleChecks.get(rule);
  if (problem === undefined) {
    try {
      timingOf(s).after(s.startAt ?? 0);
      problem = null;
    } catch (error) {
      problem = (error as Error).message;
    }
    if (ruleChecks.size >= 10_000) ruleChecks.clear();
    ruleChecks.set(rule, problem);
  }
  return problem;
}

/** The earliest next occurrence of this owner's schedules that this runtime can fire, or null. */
export async function nextScheduleWake(host: SchedulesHost): Promise<number | null> {
  let next: number | null = null;
  for (const s of await listSchedules(host)) {
    if (s.nextDueAt !== null && s.damaged === undefined && host.hasMachine(s.machineId) && (next === null || s.nextDueAt < next)) next = s.nextDueAt;
  }
  return next;
}

/** The earlier of two wake times. */
export function earliest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b);
}

// ------------------------------------------------------------------ firing

/**
 * Fire every due occurrence of this owner's schedules at the clock's time (what `tick()` does).
 * Schedules of machines this runtime does not register are left for a runtime that does.
 * Returns how many jobs were started.
 */
export async function fireDueSchedules(host: SchedulesHost): Promise<number> {
  const now = host.clock.now();
  let started = 0;
  const seen = new Set<string>();
  for (;;) {
    // Buffered schedules stay due while their previous run goes on: read past the ones already
    // handled this round, so that they never hide the others.
    const due = (await host.store.dueSchedules(host.owner, now, seen.size + PAGE)).filter((s) => !seen.has(s.id));
    if (due.length === 0) return started;
    for (const stored of due) {
      seen.add(stored.id);
      const s = checked(stored);
      if (s.damaged !== undefined) reportDamaged(host, s);
      else if (host.hasMachine(s.machineId)) started += await fireSchedule(host, s, now);
    }
  }
}

const reported = new WeakMap<SchedulesHost, Set<string>>();

/** Log a damaged schedule once per runtime and stored revision: it stays due, and is not fired. */
function reportDamaged(host: SchedulesHost, s: ScheduleRecord): void {
  const seen = reported.get(host) ?? new Set<string>();
  reported.set(host, seen);
  const key = `${s.id}@${s.revision}`;
  if (seen.has(key)) return;
  seen.add(key);
  host.log('error', 'schedule damaged: not fired', { scheduleId: s.id, reason: s.damaged });
  host.emit({ type: 'schedule.damaged', jobId: null, scheduleId: s.id, reason: s.damaged ?? '' });
}

/** Run the steps of one schedule until nothing is due. */
async function fireSchedule(host: SchedulesHost, initial: ScheduleRecord, now: number): Promise<number> {
  let s = initial;
  let started = 0;
  for (let round = 0; round < MAX_STEPS; round += 1) {
    const previous = s.lastJobId === null ? undefined : await host.store.getJob(s.lastJobId);
    const previousFinished = previous === undefined || previous.status !== 'active';
    const step = planStep(s, now, previousFinished, timingOf(s));
    if (!step) return started;

    const fire: ScheduleFire = { scheduleId: s.id, expectedRevision: s.revision, at: now, state: { ...step.state, lastJobId: s.lastJobId } };
    let outcome: OccurrenceOutcome | 'buffered' | null = null;
    let reason = step.reason;
    let prepared: PreparedStart | undefined;
    if (step.dueAt !== null) {
      if (step.action === 'start') {
        try {
          prepared = host.prepareStart(s.machineId, s.input, occurrenceJobId(s.id, step.dueAt), now);
        } catch (error) {
          if (!(error instanceof SpoolError && error.category === 'bad-input')) throw error;
          reason = `could not start: ${error.code}: ${error.message}`; // the machine changed under the schedule: visible, and the schedule goes on
        }
      }
      outcome = step.action === 'buffer' ? 'buffered' : step.action === 'skip' ? 'skipped' : prepared ? 'started' : 'failed';
      if (outcome !== 'buffered') fire.occurrence = { dueAt: step.dueAt, outcome, reason, ...(prepared ? { job: prepared.job } : {}) };
      if (prepared) fire.state.lastJobId = prepared.job.id;
      if (prepared && step.cancelPrevious && previous) {
        const cancelReason = `schedule ${s.id}: the occurrence of ${iso(step.dueAt)} replaces this run (overlap: cancel-previous)`;
        const event = host.cancelEvent(previous, cancelReason, now);
        if (event) fire.cancel = { jobId: previous.id, reason: cancelReason, event };
        else host.log('warn', 'previous run cannot be cancelled', { scheduleId: s.id, jobId: previous.id });
      }
    }

    const result = await host.store.fireSchedule(fire);
    if (!result.ok) {
      if (result.reason === 'occurrence-taken' && step.dueAt !== null) {
        // Handled before (by an earlier schedule under this id, or its job id is taken): pass over it.
        const { occurrence: _o, cancel: _c, ...passOver } = fire;
        const again = await host.store.fireSchedule({ ...passOver, state: { ...fire.state, lastJobId: s.lastJobId } });
        host.emit({ type: 'schedule.fired', scheduleId: s.id, dueAt: step.dueAt, outcome: 'skipped', jobId: null, reason: 'this occurrence was already handled' });
        if (again.ok) {
          s = again.schedule;
          continue;
        }
      }
      // Another process moved the schedule first (or removed it): start over from what it wrote.
      const current = await host.store.getSchedule(s.id);
      if (!current || current.owner !== host.owner) return started;
      s = current;
      continue;
    }
    s = result.schedule;
    if (step.missed) {
      host.emit({ type: 'schedule.missed', jobId: null, scheduleId: s.id, ...step.missed });
      host.log('warn', 'schedule occurrences missed', { scheduleId: s.id, ...step.missed, catchUp: s.catchUp });
    }
    if (step.dueAt !== null && outcome !== null) {
      const jobId = result.job?.id ?? null;
      host.emit({ type: 'schedule.fired', scheduleId: s.id, dueAt: step.dueAt, outcome, jobId, reason });
      host.log(outcome === 'failed' ? 'error' : 'info', `schedule occurrence ${outcome}`, { scheduleId: s.id, dueAt: step.dueAt, ...(jobId ? { jobId } : {}), ...(reason ? { reason } : {}) });
    }
    if (prepared && result.job) {
      started += 1;
      await prepared.started(result.job);
    }
    if (fire.cancel) await host.cancelled(fire.cancel.jobId, fire.cancel.reason);
  }
  host.log('error', 'schedule still due after the step limit; the next tick carries on', { scheduleId: s.id });
  return started;
}

function iso(t: number): string {
  return new Date(t).toISOString();
}
