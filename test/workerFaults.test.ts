/**
 * A worker on a real full disk (a 4 MB tmpfs): `runWorker` runs activities and timers while the
 * filesystem fills. It survives (a `storage.fault` per fault, no throw, no quarantine), every
 * event a caller had acknowledged is in the history, and the work goes on once space is freed.
 * Waits are on runtime events and predicates, never on a fixed sleep.
 */
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { runWorker, SpoolError, type RuntimeEvent, type StorageFaultEvent } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';
import { fill, tmpfs, unmount } from './helpers/tmpfs.ts';

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
let disk: string | undefined;
beforeAll(() => {
  disk = tmpfs('4m');
});
afterAll(() => {
  if (disk) unmount(disk);
});

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
  it('mount is permitted here (root)', () => {
    expect(disk, 'mount -t tmpfs was refused: the full-disk case cannot run').toBeDefined();
  });

  it('survives the faults, keeps every acknowledged event, and finishes the work once space is freed', async () => {
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
