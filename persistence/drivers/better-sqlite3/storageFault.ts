/**
 * SQLite's errors as Spool's storage faults: the mapping is the SQL core's (persistence/sql/sqliteFaults.ts,
 * shared with the sqlite-wasm driver); here, what a file on this machine's disk adds: its free bytes.
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { sqliteStorageFault, type FaultContext } from '../../sql/sqliteFaults.ts';

export { isSqliteFault, outcomeUnknownAtCommit, sqliteCode, type FaultContext } from '../../sql/sqliteFaults.ts';

/** Free bytes on the filesystem holding `path`, or null when they cannot be read. */
export function freeBytes(path: string): number | null {
  if (path === ':memory:' || path === '') return null;
  try {
    const s = statfsSync(dirname(path));
    return s.bavail * s.bsize;
  } catch {
    return null;
  }
}

/** Any error a better-sqlite3 call threw, as Spool's typed error (sqliteStorageFault), free space read from the disk. */
export function storageFault(error: unknown, ctx: FaultContext): unknown {
  return sqliteStorageFault(error, { freeBytes, ...ctx });
}
