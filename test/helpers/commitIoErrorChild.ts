/**
 * A child process for the outcome-unknown test: it opens a store, says `ready` with its pid (the
 * parent then lowers this process's file-size limit with `prlimit --fsize`, so the WAL write at
 * COMMIT fails with EFBIG, which SQLite reports as SQLITE_IOERR_WRITE), commits on `go`, and
 * prints what the commit threw, and what `commitLanded` reads back once the limit is lifted.
 */
import { createInterface } from 'node:readline';
import { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import type { NewJob } from '../../src/ports/store.ts';

process.on('SIGXFSZ', () => {}); // a write past the limit fails with EFBIG instead of killing the process
const path = process.argv[2]!;
const store = await SqliteStore.open(path);
const newJob = (id: string): NewJob => ({
  id, machineId: 'm', machineVersion: '1', status: 'active', value: 'x', statePaths: ['x'], context: { pad: 'p'.repeat(20_000) },
  snapshot: '{}', input: {}, inputHash: 'h', idempotencyKey: null, owner: null, at: 0,
  transition: { eventId: null, eventType: 'xstate.init', payload: null, from: null, to: 'x', outcome: 'started', error: null, at: 0 },
});
await store.createJob(newJob('first'));
store.db.pragma('wal_checkpoint(TRUNCATE)');
const print = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
print({ type: 'ready', pid: process.pid });
const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line === 'go') {
    const thrown = await store.writeBatch({ creates: [newJob('second'), newJob('third')] }).then(() => null, (e: unknown) => e as Error & { code?: string; unresolved?: unknown });
    print({ type: 'thrown', name: thrown?.constructor.name ?? null, code: thrown?.code ?? null, unresolved: thrown?.unresolved ?? null, message: thrown?.message ?? null });
  } else if (line === 'read') {
    const landed = await store.commitLanded('second', 1, null);
    const found = (await store.getJob('second'))?.id ?? null;
    // Absent, so written again: it lands once.
    await store.writeBatch({ creates: [newJob('second'), newJob('third')] });
    print({ type: 'read', landed, job: found, again: await store.commitLanded('second', 1, null) });
    await store.close();
    process.exit(0);
  }
}
