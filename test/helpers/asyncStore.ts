/**
 * A genuinely asynchronous boundary around any {@link JobStore}, for proving that the engine's
 * ordering does not depend on a synchronous driver (better-sqlite3 runs each transaction inside
 * the call that asks for it; a networked database does not).
 *
 * What it permits is what a networked database behind a connection pool permits:
 * - a call executes some macrotasks after it is issued (0-3 hops; 0 is a microtask, so never
 *   inside the caller's synchronous code), and its result or error is delivered 1-3 macrotasks
 *   after it executed;
 * - so two calls in flight at once execute in either order, and their results arrive in either
 *   order, whatever the order they were issued in (commits and write batches of different jobs
 *   included);
 * - the arguments are copied when the call is issued (what goes over the wire), so a caller that
 *   changes an object after handing it over changes nothing that is written.
 *
 * What it never does, as no database could: execute a call before it is issued, split one call
 * (each executes whole, inside one macrotask, and the inner store keeps it atomic), or deliver a
 * result before the call executed. A call issued after another call's result arrived executes
 * after it. `close()` waits for the calls in flight, as a pool's `end()` does.
 *
 * The hops are drawn from a seeded PRNG: {@link storeSeed} derives each store's seed from
 * `SPOOL_ASYNC_SEED` (random when unset), the test's name and the store's number in the test,
 * and `test/helpers/asyncSetup.ts` prints the seed of a failed test so the run can be replayed.
 */
import type { JobStore } from '../../src/ports/store.ts';
import { rng } from '../crash/workload.ts';

/** Every method of the port (optional ones included): the calls the boundary makes asynchronous. */
type PortMethod = { [K in keyof JobStore]-?: NonNullable<JobStore[K]> extends (...args: never[]) => unknown ? K : never }[keyof JobStore];

/** Listed as an object so that the compiler refuses a port method missing here. */
const PORT_METHODS: Record<PortMethod, true> = {
  createJob: true, writeBatch: true, historySince: true, commitLanded: true, getJob: true, findByIdempotencyKey: true, listJobs: true,
  orphanedChildren: true, activeMachineVersions: true, acceptEvent: true, getEvent: true,
  listEvents: true, pendingEvents: true, jobsWithPendingEvents: true, commit: true, rejectEvent: true,
  setQuarantine: true, history: true, getEffect: true, listEffects: true, listAttempts: true,
  dueEffects: true, claimDueEffects: true, runningEffects: true, claimEffect: true, renewClaim: true, releaseAttempt: true,
  finishAttempt: true, failEffect: true, effectByToken: true, completeByToken: true, listTimers: true,
  dueTimers: true, fireTimer: true, nextWakeAt: true, renewLeases: true, releaseLeases: true,
  leaseHolders: true, expireLeases: true, requestCancel: true, setProgress: true, addNote: true,
  listNotes: true, attachAsset: true, listAssets: true, purgeJob: true, suspendJob: true,
  resumeJob: true, redriveEffect: true, purgeFinished: true, stats: true, putSchedule: true,
  getSchedule: true, listSchedules: true, deleteSchedule: true, dueSchedules: true, fireSchedule: true,
  listOccurrences: true, pendingBacklog: true, externalChanges: true, watchChanges: true, close: true,
};

/** Port methods that take a callback (not data a wire could carry): passed to the inner store as they are. */
const DIRECT: ReadonlySet<PortMethod> = new Set(['watchChanges']);

function isPortMethod(key: PropertyKey): key is PortMethod {
  return typeof key === 'string' && Object.hasOwn(PORT_METHODS, key);
}

/** Options of {@link asyncStore}. */
export interface AsyncStoreOptions {
  /** The PRNG seed of the hops. */
  seed: number;
  /** Most macrotask hops before a call executes and (at least 1) before its result arrives. Default 3. */
  maxHops?: number;
}

/** Run `fn` after `hops` macrotasks (`setImmediate`); 0 hops: on a microtask. */
function after(hops: number, fn: () => void): void {
  if (hops <= 0) queueMicrotask(fn);
  else setImmediate(() => after(hops - 1, fn));
}

/**
 * `inner` behind an asynchronous boundary (see the file's comment). Port methods the inner store
 * does not have stay absent; everything else (`description`, a SQLite store's `db` for tests'
 * hand edits) is the inner store's, read synchronously as before.
 *
 * @example
 * const store = asyncStore(await SqliteStore.open(path), { seed: 42 });
 */
export function asyncStore<T extends JobStore>(inner: T, options: AsyncStoreOptions): T {
  const random = rng(options.seed);
  const maxHops = options.maxHops ?? 3;
  const hops = (least: number): number => least + Math.floor(random() * (maxHops - least + 1));
  const inFlight = new Set<Promise<unknown>>();
  const wrapped = new Map<PortMethod, { of: unknown; fn: (...args: unknown[]) => Promise<unknown> }>();

  function issue(method: (...args: unknown[]) => unknown, args: unknown[]): Promise<unknown> {
    const sent = structuredClone(args);
    const call = new Promise<unknown>((resolve, reject) => {
      after(hops(0), () => {
        let executed: Promise<unknown>;
        try {
          executed = Promise.resolve(method.apply(inner, sent));
        } catch (error) {
          executed = Promise.reject(error);
        }
        executed.then(
          (value) => after(hops(1), () => resolve(value)),
          (error: unknown) => after(hops(1), () => reject(error)),
        );
      });
    });
    const settled = call.then(() => undefined, () => undefined);
    inFlight.add(settled);
    void settled.then(() => inFlight.delete(settled));
    return call;
  }

  async function close(): Promise<void> {
    while (inFlight.size > 0) await Promise.all(inFlight);
    await issue(inner.close as (...args: unknown[]) => unknown, []);
  }

  return new Proxy(inner, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (!isPortMethod(key) || typeof value !== 'function' || DIRECT.has(key)) return typeof value === 'function' ? value.bind(target) : value;
      // Made again when the method was replaced on the store (a test that patches one call).
      let entry = wrapped.get(key);
      if (entry?.of !== value) {
        entry = { of: value, fn: key === 'close' ? close : (...args: unknown[]) => issue(value as (...a: unknown[]) => unknown, args) };
        wrapped.set(key, entry);
      }
      return entry.fn;
    },
  });
}

/** True when this test run puts the SQLite store behind the asynchronous boundary (`SPOOL_TEST_STORE=async`). */
export const ASYNC_STORE = process.env['SPOOL_TEST_STORE'] === 'async';

/** The run's base seed: `SPOOL_ASYNC_SEED`, or a random one (printed when a test fails). */
export const ASYNC_SEED = process.env['SPOOL_ASYNC_SEED'] !== undefined ? Number(process.env['SPOOL_ASYNC_SEED']) >>> 0 : Math.floor(Math.random() * 2 ** 32);

let currentTest = '';
let storesInTest = 0;

/** Called before each test (by the setup file): stores opened from now on draw from this test's seeds. */
export function enterTest(name: string): void {
  currentTest = name;
  storesInTest = 0;
}

/** A seed for the next store of the current test: the same for the same base seed, test and store number. */
export function storeSeed(): number {
  let h = 2166136261 ^ ASYNC_SEED;
  for (const c of `${currentTest}#${storesInTest}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  storesInTest += 1;
  return h >>> 0;
}

/**
 * The store a test uses: `store` itself, or (with `SPOOL_TEST_STORE=async`) `store` behind the
 * asynchronous boundary. The one place tests read that variable.
 */
export function storeUnderTest<T extends JobStore>(store: T): T {
  return ASYNC_STORE ? asyncStore(store, { seed: storeSeed() }) : store;
}
