/**
 * Storage faults on real files: a database on a full filesystem (a small tmpfs), one at its size
 * limit (`max_page_count`), read-only files and filesystems, and the commit whose outcome is not
 * known. Every fault reaches the caller as one of Spool's typed errors, and changes nothing.
 */
import { execFileSync } from 'node:child_process';
import { statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { assign, setup } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { outcomeUnknownAtCommit, storageFault } from '../persistence/drivers/better-sqlite3/storageFault.ts';
import { CommitOutcomeUnknown, DatabaseBusyError, DatabaseDamagedError, SpoolError, StorageAccessError, StorageFullError, StorageIoError } from '../src/internal.ts';
import { operationsOf } from '../src/ports/store.ts';
import { ChildScript } from './helpers/proc.ts';
import { dumpDatabase, Resources } from './helpers/resources.ts';
import { fill, tmpfs, tmpfsForFile, unmount } from './helpers/tmpfs.ts';

const COMMIT_IO_CHILD = fileURLToPath(new URL('./helpers/commitIoErrorChild.ts', import.meta.url));

const res = new Resources();
afterEach(() => res.dispose());

/** A driver error as better-sqlite3 throws it. */
function sqliteError(code: string, message = 'driver says no'): Error {
  return Object.assign(new Error(message), { name: 'SqliteError', code });
}

describe('the mapping of SQLite codes to the storage-fault family', () => {
  it.each([
    ['SQLITE_FULL', StorageFullError, 'retryable'],
    ['SQLITE_IOERR_WRITE', StorageIoError, 'retryable'],
    ['SQLITE_IOERR_SHMSIZE', StorageFullError, 'retryable'], // the WAL index could not grow: a full disk (as on opening a file on a full tmpfs)
    ['SQLITE_IOERR_FSYNC', StorageIoError, 'retryable'],
    ['SQLITE_BUSY', DatabaseBusyError, 'retryable'],
    ['SQLITE_LOCKED_SHAREDCACHE', DatabaseBusyError, 'retryable'],
    ['SQLITE_READONLY', StorageAccessError, 'bad-input'],
    ['SQLITE_CANTOPEN', StorageAccessError, 'bad-input'],
    ['SQLITE_PERM', StorageAccessError, 'bad-input'],
    ['SQLITE_CORRUPT', DatabaseDamagedError, 'internal'],
    ['SQLITE_CORRUPT_INDEX', DatabaseDamagedError, 'internal'],
    ['SQLITE_NOTADB', DatabaseDamagedError, 'internal'],
  ] as const)('%s is %s (%s)', (code, cls, category) => {
    const fault = storageFault(sqliteError(code), { path: '/data/spool.db', call: 'stats' });
    expect(fault).toBeInstanceOf(cls);
    expect(fault).toMatchObject({ category, details: { path: '/data/spool.db', driverCode: code } });
    expect((fault as Error).message).toContain('/data/spool.db');
  });

  it('says how to check and restore a damaged file, and counts it a corrupt record', () => {
    const fault = storageFault(sqliteError('SQLITE_CORRUPT', 'database disk image is malformed'), { path: 'x.db' }) as DatabaseDamagedError;
    expect(fault.message).toMatch(/spool doctor/);
    expect(fault.message).toMatch(/restore it from a backup/);
    expect(fault.code).toBe('SPOOL_DATABASE_DAMAGED');
  });

  it('a stored text that is not JSON (a SyntaxError) is a damaged file; a bug (TypeError) stays what it is', () => {
    expect(storageFault(new SyntaxError('Unexpected end of JSON input'), { path: 'x.db' })).toBeInstanceOf(DatabaseDamagedError);
    const bug = new TypeError('x is not a function');
    expect(storageFault(bug, { path: 'x.db' })).toBe(bug);
  });

  it('only an I/O error raised by COMMIT leaves the outcome unknown; a full disk at COMMIT changed nothing', () => {
    expect(outcomeUnknownAtCommit(sqliteError('SQLITE_IOERR_FSYNC'))).toBe(true);
    expect(outcomeUnknownAtCommit(sqliteError('SQLITE_IOERR_WRITE'))).toBe(true);
    expect(outcomeUnknownAtCommit(sqliteError('SQLITE_FULL'))).toBe(false);
    expect(outcomeUnknownAtCommit(sqliteError('SQLITE_CONSTRAINT_PRIMARYKEY'))).toBe(false);
  });
});

describe('a commit whose outcome is unknown', () => {
  it('names every job operation of the batch, typed and retryable', () => {
    const ops = operationsOf({
      creates: [{ id: 'new-job' } as never],
      commits: [{ jobId: 'j', expectedRevision: 3, transition: { eventId: 'e-1' }, event: { seq: 9 } } as never],
      finishes: [{ id: 'fx', attempt: 2 } as never],
      claims: [{ id: 'fy' } as never],
    });
    expect(ops).toEqual([
      { kind: 'create', jobId: 'new-job' },
      { kind: 'commit', jobId: 'j', revision: 4, eventId: 'e-1' },
      { kind: 'finish', effectId: 'fx', attempt: 2 },
      { kind: 'claim', effectId: 'fy' },
    ]);
    const unknown = new CommitOutcomeUnknown('lost', ops);
    expect(unknown).toBeInstanceOf(SpoolError);
    expect(unknown.toJSON()).toMatchObject({ code: 'SPOOL_COMMIT_OUTCOME_UNKNOWN', category: 'retryable', unresolved: ops });
  });

  it('commitLanded reads it back: the revision recorded for that event, and nothing else', async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    const job = await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    await runtime.send(job.id, { type: 'START' }, { eventId: 'start-1' });
    expect(await store.commitLanded('a', 2, 'start-1')).toBe(true);
    expect(await store.commitLanded('a', 2, 'start-2')).toBe(false);
    expect(await store.commitLanded('a', 3, 'start-1')).toBe(false);
    expect(await store.commitLanded('a', 1, null)).toBe(true);
    expect(await store.commitLanded('missing', 1, null)).toBe(false);
  });
});

describe('an I/O error raised by COMMIT (a real one: the WAL write fails with EFBIG past a file-size limit)', () => {
  it('throws CommitOutcomeUnknown naming the operations, and commitLanded resolves it once the fault clears', async () => {
    const path = res.dbPath();
    const child = new ChildScript(COMMIT_IO_CHILD, [path]);
    try {
      const ready = await child.waitFor((l) => l.type === 'ready');
      // Past 8 KB no file of the child may grow: the database file is written only at checkpoints, the WAL at COMMIT.
      execFileSync('prlimit', ['--pid', String(ready['pid']), '--fsize=8192:']);
      child.proc.stdin.write('go\n');
      const thrown = await child.waitFor((l) => l.type === 'thrown');
      expect(thrown).toMatchObject({
        name: 'CommitOutcomeUnknown',
        code: 'SPOOL_COMMIT_OUTCOME_UNKNOWN',
        unresolved: [
          { kind: 'create', jobId: 'second' },
          { kind: 'create', jobId: 'third' },
        ],
      });
      expect(thrown['message']).toMatch(/failed at COMMIT/);
      execFileSync('prlimit', ['--pid', String(ready['pid']), '--fsize=unlimited:']);
      child.proc.stdin.write('read\n');
      // Read back: the WAL's commit frame never made it, so the batch did not land (and may be written again).
      expect(await child.waitFor((l) => l.type === 'read')).toMatchObject({ landed: false, job: null, again: true });
    } finally {
      await child.kill('SIGKILL');
    }
  });
});

describe('a database at its size limit (max_page_count)', () => {
  it('a send gives the typed retryable error and changes nothing; it works once there is room', async () => {
    const path = res.dbPath();
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    const pages = store.db.pragma('page_count', { simple: true }) as number;
    store.db.pragma(`max_page_count = ${pages}`);
    let error: unknown;
    let before = dumpDatabase(res.raw(path));
    // Starts until one needs a page the limit refuses (a few fit in the pages' free space).
    for (let i = 0; i < 500 && error === undefined; i += 1) {
      before = dumpDatabase(res.raw(path));
      error = await runtime.start('job-lifecycle', { name: `n${i}-${'x'.repeat(180)}` }, { jobId: `b${i}-${'y'.repeat(180)}` }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }
    expect(error).toBeInstanceOf(StorageFullError);
    expect(error).toMatchObject({ code: 'SPOOL_STORAGE_FULL', category: 'retryable', details: { path } });
    expect(dumpDatabase(res.raw(path))).toEqual(before);
    expect((await runtime.get('a')).quarantine).toBeNull();
    store.db.pragma('max_page_count = 1073741823');
    expect((await runtime.send('a', { type: 'START' })).status).toBe('applied');
  });
});

const mounts: string[] = [];
let disk: string | undefined;
beforeAll(() => {
  disk = tmpfs('4m');
  if (disk) mounts.push(disk);
});
afterAll(() => {
  for (const dir of mounts.splice(0)) unmount(dir);
});

describe('a database on a full filesystem (a 4 MB tmpfs)', () => {
  it('mount is permitted here (root): the fault tests below run on a real full disk', () => {
    expect(disk, 'mount -t tmpfs was refused: the real-disk cases cannot run').toBeDefined();
  });

  it('a send and a start give the typed retryable error with the free space, change nothing, and work once space is freed', async () => {
    const path = join(disk!, `full-${Math.random().toString(16).slice(2)}.db`);
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fill(disk!);
    const before = dumpDatabase(res.raw(path, { readonly: true }));
    const payload = { name: 'p'.repeat(190) };
    let fault: unknown;
    // The page cache can hold a few writes before SQLite needs the disk: the first refusal is the one that counts.
    for (let i = 0; i < 2000 && fault === undefined; i += 1) {
      fault = await runtime.start('job-lifecycle', payload, { jobId: `n${i}-${'z'.repeat(180)}` }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }
    expect(fault).toBeInstanceOf(StorageFullError);
    expect(fault).toMatchObject({ category: 'retryable', details: { path } });
    expect(typeof (fault as StorageFullError).details['freeBytes']).toBe('number');
    const sendFault = await runtime.send('a', { type: 'START' }).catch((e: unknown) => e);
    expect(sendFault).toBeInstanceOf(SpoolError);
    expect((sendFault as SpoolError).category).toBe('retryable');
    // Nothing of `a` changed: no quarantine, no new revision.
    const a = await store.getJob('a');
    expect(a).toMatchObject({ revision: 1, quarantine: null });
    expect(dumpDatabase(res.raw(path, { readonly: true }))['jobs']).toEqual(expect.arrayContaining(before['jobs']!));
    unlinkSync(filler);
    expect((await runtime.send('a', { type: 'START' })).status).toBe('applied');
    expect((await store.history('a')).map((t) => t.revision)).toEqual([1, 2]);
  });
});

describe('read-only storage', () => {
  it('a connection that may not write (query_only) gives the configuration error on writes; reads go on', async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    store.db.pragma('query_only = ON');
    const error = await runtime.send('a', { type: 'START' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageAccessError);
    expect(error).toMatchObject({ code: 'SPOOL_STORAGE_ACCESS', category: 'bad-input' });
    expect((error as Error).message).toMatch(/read-only/);
    expect((await store.getJob('a'))?.revision).toBe(1);
    expect((await store.stats({ now: 0 })).jobs).toHaveLength(1);
  });

  it('a filesystem remounted read-only: opening it (or its first write) gives the configuration error', async () => {
    const dir = tmpfs('2m');
    expect(dir, 'mount -t tmpfs was refused').toBeDefined();
    mounts.push(dir!);
    const path = join(dir!, 'ro.db');
    const first = await SqliteStore.open(path);
    await first.close();
    execFileSync('mount', ['-o', 'remount,ro', dir!], { stdio: 'ignore' });
    const opened = await SqliteStore.open(path).catch((e: unknown) => e);
    if (opened instanceof SqliteStore) {
      res.track(opened);
      const write = await opened.setQuarantine('none', 'x', 0).catch((e: unknown) => e);
      expect(write).toBeInstanceOf(StorageAccessError);
    } else {
      expect(opened).toBeInstanceOf(StorageAccessError);
      expect(opened).toMatchObject({ details: { path } });
    }
  });
});

/** A job that takes any number of ADD events, each with a payload: every send is one commit that grows the WAL. */
const tally = setup({ types: { context: {} as { n: number } } }).createMachine({
  id: 'tally',
  context: { n: 0 },
  on: { ADD: { actions: assign({ n: ({ context }) => context.n + 1 }) } },
});

const smallDisk = tmpfsForFile('8m');

describe('after a full disk, freeing space brings the store back (an 8 MB tmpfs)', () => {
  it.skipIf(!smallDisk)('the WAL is bounded and truncated: sends resume at once after space is freed, and every acknowledged event is kept', async () => {
    // 5 MB of the disk taken by another file, the store on the rest.
    const filler = join(smallDisk!, 'other-files');
    writeFileSync(filler, Buffer.alloc(5 * 1024 * 1024, 1));
    const path = join(smallDisk!, 'spool.db');
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [tally] });
    // Two connections on the file, as a worker and a sender have: each must get the WAL back.
    const other = await res.runtime({ store: await res.sqlite(path), machines: [tally] });
    const jobs = ['j0', 'j1', 'j2', 'j3'];
    for (const id of jobs) await runtime.start('tally', {}, { jobId: id });
    const acknowledged: { jobId: string; eventId: string }[] = [];
    const send = async (i: number): Promise<unknown> => {
      const jobId = jobs[i % jobs.length]!;
      const eventId = `e${i}`;
      const sender = i % 2 === 0 ? runtime : other;
      const sent = await sender.send(jobId, { type: 'ADD', blob: 'x'.repeat(512) }, { eventId }).catch((e: unknown) => e);
      if (!(sent instanceof Error)) acknowledged.push({ jobId, eventId });
      return sent;
    };
    // Send until the disk is full.
    let fault: unknown;
    let i = 0;
    for (; i < 20_000 && !(fault instanceof Error); i += 1) fault = await send(i);
    expect(fault).toBeInstanceOf(StorageFullError);
    unlinkSync(filler);
    // 600 more commits write far more WAL than the 5 MB freed: each lands only if the WAL is checkpointed and reused.
    const refused: unknown[] = [];
    for (const end = i + 600; i < end; i += 1) {
      const sent = await send(i);
      if (sent instanceof Error) refused.push(sent);
    }
    expect(refused).toEqual([]);
    for (const id of jobs) {
      const history = new Set((await store.history(id)).map((t) => t.eventId));
      const missing = acknowledged.filter((a) => a.jobId === id && !history.has(a.eventId));
      expect(missing, `acknowledged events missing from ${id}'s history`).toEqual([]);
    }
    // The WAL stayed bounded: it never holds the disk.
    expect(statSync(`${path}-wal`).size).toBeLessThan(2 * 1024 * 1024);
  });
});
