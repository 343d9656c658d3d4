/**
 * The write-ahead log on a disk that can fill. Left to itself, SQLite checkpoints the WAL only
 * once it passes `wal_autocheckpoint` pages, and reuses it from the start only after a
 * checkpoint: on a disk smaller than that (or nearly full), the WAL takes every free byte, and
 * once the disk is full no commit can land, even after space is freed, since the WAL grows back
 * into it first. So:
 *
 * - its growth is bounded: a checkpoint at most every quarter of the free space (64 to 4000
 *   pages), and `journal_size_limit` truncates it back to that size after each;
 * - a write refused with SQLITE_FULL checkpoints the WAL into the database and truncates it
 *   (`wal_checkpoint(TRUNCATE)`), then runs once more: the space the WAL held is free again;
 * - when that checkpoint fails too (the database file cannot grow either), the checkpoint is
 *   owed, and each later write tries it first: once space is freed, writes resume at once.
 *
 * A write refused with SQLITE_FULL changed nothing (its transaction rolled back), so running it
 * again is safe. Nothing acknowledged is lost: a checkpoint copies committed pages, never drops them.
 */
import type Database from 'better-sqlite3';
import { freeBytes, sqliteCode } from './storageFault.ts';
import { Checkpointer } from './checkpointer.ts';

/** The bounds of `wal_autocheckpoint`, in pages: 4000 (~16 MB at 4 KB pages) on a roomy disk. */
export const AUTOCHECKPOINT_PAGES = { min: 64, max: 4000 } as const;

/** The checkpoint interval for `free` bytes on the disk: a quarter of them, in pages, clamped. */
export function autocheckpointPages(free: number | null, pageSize: number): number {
  if (free === null) return AUTOCHECKPOINT_PAGES.max;
  const quarter = Math.floor(free / 4 / pageSize);
  return Math.max(AUTOCHECKPOINT_PAGES.min, Math.min(AUTOCHECKPOINT_PAGES.max, quarter));
}

function isFull(error: unknown): boolean {
  return sqliteCode(error)?.startsWith('SQLITE_FULL') === true;
}

/** One connection's WAL: bounded, and brought back after a full disk (see the module's comment). */
export class WalGuard {
  readonly #db: Database.Database;
  readonly #path: string;
  /** A full disk refused the last checkpoint: the next write tries it first. */
  #owed = false;

  /** Checkpoints off the event loop (checkpointer.ts), for a database in a file. */
  readonly #checkpointer: Checkpointer | undefined;

  constructor(db: Database.Database, path: string) {
    this.#db = db;
    this.#path = path;
    if (path !== '' && path !== ':memory:') this.#checkpointer = new Checkpointer(path, db.pragma('page_size', { simple: true }) as number, AUTOCHECKPOINT_PAGES.max);
  }

  /** Whether a checkpoint is owed (a full disk refused it). */
  get owed(): boolean {
    return this.#owed;
  }

  /** Set the checkpoint interval and the WAL's size limit from the space free now. */
  bound(): void {
    const pageSize = this.#db.pragma('page_size', { simple: true }) as number;
    const pages = autocheckpointPages(freeBytes(this.#path), pageSize);
    this.#db.pragma(`wal_autocheckpoint = ${pages}`);
    this.#db.pragma(`journal_size_limit = ${pages * pageSize}`);
    this.#checkpointer?.bound(pages);
  }

  /**
   * Run `write` (one write transaction, outside any other). On SQLITE_FULL: checkpoint and
   * truncate the WAL, and run it once more; a fault that stands is thrown as it was.
   */
  write<T>(write: () => T): T {
    if (this.#owed) this.#checkpoint();
    try {
      const result = write();
      this.#checkpointer?.committed();
      return result;
    } catch (error) {
      if (!isFull(error) || this.#db.inTransaction || !this.#checkpoint()) throw error;
    }
    return write();
  }

  /** Stop checkpointing off the event loop (before the writer's connection closes). */
  close(): void {
    this.#checkpointer?.close();
  }

  /** Checkpoint the WAL into the database and truncate it; false (and owed) when the disk refused. */
  #checkpoint(): boolean {
    try {
      const [row] = this.#db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      // Another connection's read kept part of the WAL: it is owed still, and space may be back anyway.
      this.#owed = row?.busy === 1;
      this.bound();
      return true;
    } catch (error) {
      if (!isFull(error) && sqliteCode(error) === undefined) throw error;
      this.#owed = true;
      return false;
    }
  }
}
