/**
 * A worker and a storage fault that is there from the start, or met in the background: `spool
 * worker` started on a full disk waits for the store instead of exiting (rideOutFaults), and a
 * retryable fault in background work is a warning, not an error.
 */
import { unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { SqliteStore } from '../persistence/sqlite/index.ts';
import { DatabaseBusyError, DatabaseDamagedError, rideOutFaults, StorageFullError, StorageIoError, type LogEntry, type StorageFaultEvent } from '../src/index.ts';
import { Resources, PROJECT_ROOT } from './helpers/resources.ts';
import { spawnSpool } from './helpers/spoolCli.ts';
import { fill, tmpfsForFile } from './helpers/tmpfs.ts';

const res = new Resources();
afterEach(() => res.dispose());

const disk = tmpfsForFile('4m');

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
