/**
 * Commits that reached the database, counted by SQLite itself: the wal-index header at the start
 * of the `-shm` file holds `iChange`, which SQLite increments once for every write transaction it
 * commits to the WAL (sqlite3WalFrames, when the frame set is a commit), from any connection, and
 * which a checkpoint or a WAL restart leaves alone. Reading it costs one 4-byte `pread` and needs
 * nothing from the store port, so it keeps counting whatever the store's methods become.
 *
 * Limits: WAL mode with a shared-memory wal-index (no `locking_mode = EXCLUSIVE`), a little-endian
 * host (the header is in native byte order), and a wrap at 2^32 (handled for one wrap).
 */
import { closeSync, existsSync, openSync, readSync } from 'node:fs';

/** Offset of `WalIndexHdr.iChange` in the `-shm` file: after `iVersion` and `unused`. */
const ICHANGE_OFFSET = 8;

/** A reader of the commit counter of the database at `dbPath` (its `-shm` file), or null reads when there is none. */
export function walCommitCounter(dbPath: string): { read: () => number | null; close: () => void } {
  const shm = `${dbPath}-shm`;
  const fd = existsSync(shm) ? openSync(shm, 'r') : null;
  const buf = Buffer.alloc(4);
  return {
    read: () => {
      if (fd === null || readSync(fd, buf, 0, 4, ICHANGE_OFFSET) !== 4) return null;
      return buf.readUInt32LE(0);
    },
    close: () => {
      if (fd !== null) closeSync(fd);
    },
  };
}

/** Commits between two reads of {@link walCommitCounter} (null if either is unknown). */
export function commitsBetween(before: number | null, after: number | null): number | null {
  if (before === null || after === null) return null;
  return after >= before ? after - before : after + 2 ** 32 - before;
}
