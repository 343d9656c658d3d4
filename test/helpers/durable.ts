/**
 * Helpers for the durable-effects and time tests: a runtime on a real SQLite file driven by a
 * VirtualClock, event capture, one-shot waits on runtime events, and a loop that drives a job to
 * its end by moving the virtual clock from one wake-up time to the next (never sleeping).
 */
import type { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import type { Job, Runtime, RuntimeEvent, RuntimeOptions } from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { rawAll } from './rawSql.ts';
import type { Resources } from './resources.ts';

export const T0 = Date.parse('2026-01-01T00:00:00Z');

export interface Opened {
  runtime: Runtime;
  store: SqliteStore;
  clock: VirtualClock;
  path: string;
  seen: RuntimeEvent[];
}

type Extra = Omit<RuntimeOptions, 'store' | 'machines' | 'clock'>;

/**
 * A runtime on a SQLite file (a fresh one unless `path` is given) with a VirtualClock shared by the
 * runtime and the store. Every runtime event is recorded in `seen`.
 */
export async function openRuntime(
  res: Resources,
  machines: RuntimeOptions['machines'],
  options: Extra & { path?: string; clock?: VirtualClock } = {},
): Promise<Opened> {
  const { path: given, clock: givenClock, ...rest } = options;
  const path = given ?? res.dbPath();
  const clock = givenClock ?? new VirtualClock(T0);
  const store = await res.sqlite(path, { clock });
  const seen: RuntimeEvent[] = [];
  const runtime = await res.runtime({ ...rest, store, machines, clock });
  runtime.subscribe((e) => seen.push(e));
  return { runtime, store, clock, path, seen };
}

/** The first runtime event (from now on) that matches. Subscribe before triggering it. */
export function nextEvent<T extends RuntimeEvent['type']>(
  runtime: Runtime,
  type: T,
  match: (e: Extract<RuntimeEvent, { type: T }>) => boolean = () => true,
): Promise<Extract<RuntimeEvent, { type: T }>> {
  return new Promise((resolve) => {
    const off = runtime.subscribe((e) => {
      if (e.type === type && match(e as Extract<RuntimeEvent, { type: T }>)) {
        off();
        resolve(e as Extract<RuntimeEvent, { type: T }>);
      }
    });
  });
}

const openGates = new Set<(e: unknown) => void>();

/**
 * A promise with its resolve/reject exposed. Gates still open when a test ends are rejected by
 * {@link releaseGates} (call it in afterEach before closing runtimes), so a failed assertion never
 * leaves an activity waiting forever and a runtime's close() hanging.
 */
export function gate<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = (v) => {
      openGates.delete(reject);
      res(v);
    };
    reject = (e) => {
      openGates.delete(reject);
      rej(e);
    };
  });
  openGates.add(reject);
  promise.catch(() => undefined); // a gate nobody awaited must not become an unhandled rejection
  return { promise, resolve, reject };
}

/** Reject every gate still open (see {@link gate}). */
export function releaseGates(): void {
  for (const reject of [...openGates]) reject(new Error('test ended'));
}

/** A promise that rejects when `signal` aborts (an activity that waits until it is told to stop). */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * Drive a job to its end under a virtual clock: tick at the current time, settle in-flight work,
 * and if the job is not yet final (or `until` does not hold) jump the clock to the next wake-up
 * (timer, retry or claim expiry) and go round again. Throws if nothing is left to wait for.
 */
export async function runToEnd(runtime: Runtime, clock: VirtualClock, jobId: string, until: (job: Job) => boolean = (job) => job.final, maxRounds = 50): Promise<Job> {
  for (let round = 0; round < maxRounds; round += 1) {
    await runtime.tick();
    await runtime.idle();
    const job = await runtime.get(jobId);
    if (until(job)) return job;
    const next = await runtime.nextWakeAt();
    if (next === null) throw new Error(`job ${jobId} is stuck in ${JSON.stringify(job.value)}: nothing scheduled`);
    if (next > clock.now()) clock.set(next);
  }
  throw new Error(`job ${jobId} did not finish within ${maxRounds} rounds`);
}

/** Every row of a table that belongs to a job (raw SQL on the store's tables: rawSql.ts). */
export async function rowsOf(store: SqliteStore, table: string, jobId: string): Promise<unknown[]> {
  // Effect ids (and so attempt rows) start with the job id: found even if the effect row is gone.
  if (table === 'effect_attempts') return rawAll(store, "SELECT * FROM effect_attempts WHERE effect_id LIKE CAST(? AS TEXT) || '~%'", jobId);
  const column = table === 'jobs' ? 'id' : 'job_id';
  return rawAll(store, `SELECT * FROM "${table}" WHERE ${column} = ?`, jobId);
}
