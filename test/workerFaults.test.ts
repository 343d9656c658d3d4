/**
 * A worker on a real full disk (a 4 MB tmpfs): `runWorker` runs activities and timers while the
 * filesystem fills. It survives (a `storage.fault` per fault, no throw, no quarantine), every
 * event a caller had acknowledged is in the history, and the work goes on once space is freed.
 * A worker started during such a fault waits for the store instead of exiting (rideOutFaults), and a
 * retryable fault in background work is a warning, not an error.
 * Waits are on runtime events and predicates, never on a fixed sleep.
 */
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import {
  DatabaseBusyError,
  DatabaseDamagedError,
  rideOutFaults,
  runWorker,
  SpoolError,
  StorageFullError,
  StorageIoError,
  type LogEntry,
  type RuntimeEvent,
  type StorageFaultEvent,
} from '../src/index.ts';
import { PROJECT_ROOT, Resources } from './helpers/resources.ts';
import { spawnSpool } from './helpers/spoolCli.ts';
import { fill, tmpfsForFile } from './helpers/tmpfs.ts';

/** Released by the test: the activity of the job that is mid-attempt when the disk fills. */
let release: () => void = () => undefined;
let gate = Promise.resolve();

/** A short timer, then an activity, then done; PINGs are counted in any state. */
const busy = setup({
  actors: { step: fromPromise(async ({ input }: { input: { gated: boolean } }) => (input.gated ? gate.then(() => 'late') : 'ok')) },
  types: { context: {} as { gated: boolean; pings: number; out: string }, input: {} as { gated?: boolean } },
}).createMachine({
  id: 'busy',
  context: ({ input }) => ({ gated: input.gated === true, pings: 0, out: '' }),
  initial: 'resting',
  on: { PING: { actions: assign({ pings: ({ context }) => context.pings + 1 }) } },
  states: {
    resting: { after: { 1: 'working' } },
    working: {
      invoke: { id: 'step', src: 'step', input: ({ context }) => ({ gated: context.gated }), onDone: { target: 'done', actions: assign({ out: ({ event }) => String(event.output) }) } },
    },
    done: { type: 'final' },
  },
});

const res = new Resources();
afterEach(() => res.dispose());
const disk = tmpfsForFile('4m');

/** Resolve once `holds()` is true of the events seen so far (checked on each one). */
function once(subscribe: (l: (e: RuntimeEvent) => void) => () => void, holds: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (holds()) return resolve();
    const off = subscribe(() => {
      if (holds()) {
        off();
        resolve();
      }
    });
  });
}

describe('runWorker on a full disk (a 4 MB tmpfs)', () => {
  it.skipIf(!disk)('survives the faults, keeps every acknowledged event, and finishes the work once space is freed', async () => {
    gate = new Promise<void>((resolve) => (release = resolve));
    const path = join(disk!, `worker-${Math.random().toString(16).slice(2)}.db`);
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [busy], leaseMs: 1000 });
    const events: RuntimeEvent[] = [];
    runtime.subscribe((e) => events.push(e));
    const faults = () => events.filter((e): e is StorageFaultEvent => e.type === 'storage.fault');

    // A job mid-attempt (its activity waits on the gate), and jobs whose timers are due: no worker runs yet.
    const gated = await runtime.start('busy', { gated: true }, { jobId: 'gated' });
    const ids = ['t0', 't1', 't2', 't3', 't4'];
    for (const id of ids) await runtime.start('busy', {}, { jobId: id });
    const controller = new AbortController();
    const seen: StorageFaultEvent[] = [];
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fill(disk!);

    let workerError: unknown;
    const worker = runWorker(runtime, { signal: controller.signal, pollMs: 20, onFault: (f) => seen.push(f) }).catch((e: unknown) => (workerError = e));
    // The worker's rounds fire due timers: each write meets the full disk. Two faults in a row: it backed off and went on.
    await once((l) => runtime.subscribe(l), () => faults().length >= 2);
    release(); // the gated attempt ends while the disk is full: its outcome cannot be recorded

    // Sends while the disk is full: those acknowledged must be in the history; the others are typed retryable refusals.
    const acknowledged: { jobId: string; eventId: string }[] = [];
    for (const jobId of [gated.id, ...ids]) {
      const eventId = `ping-${jobId}-full`;
      const sent = await runtime.send(jobId, { type: 'PING' }, { eventId }).catch((e: unknown) => e);
      if (sent instanceof SpoolError) expect(['retryable', 'terminal']).toContain(sent.category);
      else acknowledged.push({ jobId, eventId });
    }
    expect(workerError).toBeUndefined();

    unlinkSync(filler);
    for (const jobId of [gated.id, ...ids]) {
      const eventId = `ping-${jobId}-freed`;
      const sent = await runtime.send(jobId, { type: 'PING' }, { eventId }).catch((e: unknown) => e);
      if (!(sent instanceof SpoolError)) acknowledged.push({ jobId, eventId });
    }
    for (const jobId of [gated.id, ...ids]) {
      const job = await runtime.waitFor(jobId, (j) => j.status === 'done', { timeoutMs: 30_000 });
      expect(job.context).toMatchObject({ out: jobId === 'gated' ? 'late' : 'ok' });
    }
    controller.abort();
    await worker;

    expect(workerError).toBeUndefined();
    expect(faults().length).toBeGreaterThanOrEqual(2);
    expect(seen).toEqual(faults());
    for (const f of faults()) expect(f.code).toMatch(/^SPOOL_(STORAGE_FULL|STORAGE_IO|DATABASE_BUSY|COMMIT_OUTCOME_UNKNOWN)$/);
    // Backoff: 100 ms, doubling while the fault lasts.
    expect(faults().slice(0, 2).map((f) => [f.attempt, f.retryInMs])).toEqual([
      [1, 100],
      [2, 200],
    ]);
    expect(acknowledged.length).toBeGreaterThan(0);
    for (const { jobId, eventId } of acknowledged) {
      expect((await store.history(jobId)).filter((t) => t.eventId === eventId), `${eventId} in ${jobId}'s history`).toHaveLength(1);
    }
    expect(await store.listJobs({ quarantined: true })).toEqual([]);
    expect(events.some((e) => e.type === 'job.quarantined')).toBe(false);
  });
});

describe('rideOutFaults: opening through a storage fault', () => {
  it('tries a retryable fault again, telling each one, until the open succeeds', async () => {
    const faults = [new StorageFullError('the disk is full'), new DatabaseBusyError('the server has no connection to spare'), new StorageIoError('connect ECONNREFUSED')];
    const told: StorageFaultEvent[] = [];
    let calls = 0;
    const opened = await rideOutFaults(
      async () => {
        calls += 1;
        const fault = faults.shift();
        if (fault) throw fault;
        return 'the store';
      },
      { onFault: (f) => told.push(f) },
    );
    expect(opened).toBe('the store');
    expect(calls).toBe(4);
    expect(told.map((f) => [f.code, f.attempt])).toEqual([
      ['SPOOL_STORAGE_FULL', 1],
      ['SPOOL_DATABASE_BUSY', 2],
      ['SPOOL_STORAGE_IO', 3],
    ]);
  });

  it('throws anything else at once, and the last fault once its signal aborts', async () => {
    const damaged = new DatabaseDamagedError('damaged');
    await expect(rideOutFaults(() => Promise.reject(damaged))).rejects.toBe(damaged);
    const controller = new AbortController();
    const full = new StorageFullError('the disk is full');
    // The abort comes during the pause after the first fault: the pause ends at once.
    await expect(rideOutFaults(() => Promise.reject(full), { signal: controller.signal, onFault: () => controller.abort() })).rejects.toBe(full);
  });
});

describe('`spool worker` started on a full disk', () => {
  it.skipIf(!disk)(
    'says once that it cannot open the database yet, keeps trying, and runs once space is freed',
    async () => {
      const path = join(disk!, `worker-${Math.random().toString(16).slice(2)}.db`);
      await (await SqliteStore.open(path)).close();
      const filler = fill(disk!);
      const worker = spawnSpool(['--db', path, 'worker', '--poll-ms', '50'], PROJECT_ROOT);
      try {
        // On a full tmpfs, SQLite fails to grow its shared-memory file (an I/O error) or to write (full).
        await worker.until(/cannot open .* yet: .*\(SPOOL_STORAGE_(FULL|IO)\); retrying/, 'stderr');
        unlinkSync(filler);
        await worker.until(/^spool worker on /m);
        const said = worker.output().stderr;
        // Once per kind of fault, not once per try.
        const kinds = [...said.matchAll(/cannot open .*\((SPOOL_\w+)\); retrying/g)].map((m) => m[1]);
        expect(kinds.length).toBeGreaterThan(0);
        expect(new Set(kinds).size).toBe(kinds.length);
        worker.child.kill('SIGTERM');
        expect(await worker.exited).toBe(0);
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
    120_000,
  );
});

describe('background work that meets a retryable storage fault', () => {
  it('logs a warning, not an error: what it left undone is done again', async () => {
    const inner = await res.sqlite(res.dbPath());
    let failing = false;
    const fail = () => {
      throw new StorageIoError('connect ECONNREFUSED 127.0.0.1:5432 (test)');
    };
    const store = new Proxy(inner, {
      get(target, prop, receiver) {
        if (failing && (prop === 'commit' || prop === 'writeBatch')) return fail;
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const logs: LogEntry[] = [];
    const runtime = await res.runtime({ store, machines: [jobLifecycle], log: (entry) => logs.push(entry) });
    await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    failing = true;
    // Accepted; its application runs in the background and meets the fault.
    const sent = await runtime.send('a', { type: 'START' }, { eventId: 'e1', wait: false });
    await runtime.idle();
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(logs).toContainEqual(expect.objectContaining({ level: 'warn', msg: expect.stringMatching(/storage fault/) }));
    // Nothing was lost: once the fault clears, the event is applied.
    failing = false;
    await runtime.processPending();
    expect((await runtime.get('a')).revision).toBe(2);
    expect(sent.status).toBe('pending');
  });
});
