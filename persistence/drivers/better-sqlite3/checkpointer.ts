/**
 * WAL checkpoints off the event loop. SQLite runs its automatic checkpoint inside the COMMIT that
 * takes the WAL past `wal_autocheckpoint` pages; with this synchronous driver that COMMIT blocks
 * the event loop while the WAL is copied into the database and both files are synced. Measured in
 * the queue shape (3-step jobs, a backlog, NORMAL): 1% of commits took 53-67% of all COMMIT time,
 * up to 165 ms each. SQLite's advice for an application that cannot afford that is to checkpoint
 * from another thread, and so does this. Once a store's WAL has grown to a quarter of
 * `wal_autocheckpoint` (a store that writes less never pays for a thread), a worker thread with a
 * connection of its own runs PASSIVE checkpoints, each copying about that quarter's frames: they
 * never take the write lock, so commits go on meanwhile. The WAL starts again from its beginning
 * only after a checkpoint that no commit overtook; while commits keep coming, that is still the
 * writer's own automatic checkpoint (wal.ts), which now finds all but the last quarter copied.
 *
 * No timer: the writer counts its commits where the worker reads them and wakes it every
 * WAKE_EVERY commits (`Atomics.notify`). Closing waits for the worker's connection to close, so
 * the last connection's close still checkpoints and removes the WAL.
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The worker is woken once per this many commits (and, until it runs, the WAL's size is looked at as often). */
export const WAKE_EVERY = 16;
/** The most commits between two checkpoints. */
const MAX_EVERY = 4096;

/** Slots of the shared counter: the commits seen (-1: close), the worker's state, the WAL size that calls for a checkpoint. */
const COMMITS = 0;
const EXITED = 1;
const THRESHOLD = 2;

/** The worker, as source (an eval worker: it runs alike under any loader, built or not). */
const SOURCE = `
const { workerData } = require('node:worker_threads');
const signal = new Int32Array(workerData.signal);
let db;
try {
  const Database = require(workerData.module);
  db = new Database(workerData.path, { fileMustExist: true, timeout: 0 });
  const checkpoint = () => db.pragma('wal_checkpoint(PASSIVE)')[0];
  // Frames in the WAL when last checkpointed, at which commit; commits between checkpoints, set
  // from the frames a commit adds so that each copies about the threshold's worth.
  let seen = 0, lastCommits = 0, lastLog = 0, every = ${WAKE_EVERY};
  for (;;) {
    Atomics.wait(signal, ${COMMITS}, seen);
    const now = Atomics.load(signal, ${COMMITS});
    if (now < 0) break;
    seen = now;
    if (now - lastCommits < every) continue;
    let r = checkpoint();
    // (After the WAL started again from its beginning, the frames before that are not counted: keep the interval.)
    if (r.log > lastLog) every = Math.min(${MAX_EVERY}, Math.max(${WAKE_EVERY}, Math.ceil((Atomics.load(signal, ${THRESHOLD}) * (now - lastCommits)) / (r.log - lastLog))));
    lastCommits = now;
    // Commits landed while it copied: copy their few frames too, so that the WAL is all copied
    // when the writer next begins, and it starts the WAL again from its beginning.
    for (let i = 0; i < 2 && r.busy === 0 && Atomics.load(signal, ${COMMITS}) !== now; i++) r = checkpoint();
    lastLog = r.log;
  }
} catch {}
try { db?.close(); } finally {
  Atomics.store(signal, ${EXITED}, 1);
  Atomics.notify(signal, ${EXITED});
}
`;

/** The size of `path`'s WAL in bytes (0 when it has none). */
function walBytes(path: string): number {
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
}

export class Checkpointer {
  readonly #path: string;
  readonly #pageSize: number;
  #signal: Int32Array | undefined;
  #worker: Worker | undefined;
  #commits = 0;
  #pages: number;
  #closed = false;

  constructor(path: string, pageSize: number, pages: number) {
    this.#path = path;
    this.#pageSize = pageSize;
    this.#pages = pages;
  }

  /** Whether its worker runs (started, not closed). */
  get running(): boolean {
    return this.#worker !== undefined && !this.#closed;
  }

  /** The writer's `wal_autocheckpoint` changed: the worker checkpoints at a quarter of it. */
  bound(pages: number): void {
    this.#pages = pages;
    if (this.#signal) Atomics.store(this.#signal, THRESHOLD, this.#threshold());
  }

  /** The WAL's size, in pages, that calls for a checkpoint. */
  #threshold(): number {
    return Math.max(1, Math.floor(this.#pages / 4));
  }

  /** A write transaction committed: counted where the worker reads it, and every WAKE_EVERY commits it is woken. */
  committed(): void {
    const n = ++this.#commits;
    if (this.#signal) Atomics.store(this.#signal, COMMITS, n);
    if (n % WAKE_EVERY !== 0 || this.#closed) return;
    if (!this.#signal) {
      if (walBytes(this.#path) < this.#threshold() * this.#pageSize) return;
      this.#start();
      Atomics.store(this.#signal!, COMMITS, n);
    }
    Atomics.notify(this.#signal!, COMMITS);
  }

  #start(): void {
    const signal = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
    this.#signal = signal;
    this.bound(this.#pages);
    const module = createRequire(import.meta.url).resolve('better-sqlite3');
    this.#worker = new Worker(SOURCE, { eval: true, workerData: { module, path: this.#path, pageSize: this.#pageSize, signal: signal.buffer } });
    this.#worker.unref();
  }

  /** Stop the worker, and wait (at most `waitMs`) until its connection is closed. */
  close(waitMs = 10_000): void {
    if (this.#closed) return;
    this.#closed = true;
    const signal = this.#signal;
    if (!signal) return;
    Atomics.store(signal, COMMITS, -1);
    Atomics.notify(signal, COMMITS);
    Atomics.wait(signal, EXITED, 0, waitMs);
  }
}
