/**
 * SQLite's errors as Spool's storage faults (src/base/errors.ts), in one place for every SQLite
 * driver (better-sqlite3, sqlite-wasm): every entry point of the store goes through `guardEntryPoints`
 * (faults.ts) with this mapping, so no driver error (nor a `SyntaxError` from a stored JSON text)
 * reaches a caller. By `code`, the extended code (`SQLITE_IOERR_WRITE`, `SQLITE_CORRUPT_INDEX`):
 *
 * | SQLite                                          | Spool                                  | the caller |
 * |-------------------------------------------------|----------------------------------------|------------|
 * | FULL                                            | StorageFullError (path, free bytes)    | retries    |
 * | IOERR_SHMSIZE, IOERR* with no byte free         | StorageFullError                       | retries    |
 * | IOERR*, NOMEM, PROTOCOL, INTERRUPT              | StorageIoError                         | retries    |
 * | BUSY*, LOCKED*                                  | DatabaseBusyError                      | retries    |
 * | READONLY*, PERM, CANTOPEN*, AUTH                | StorageAccessError                     | fixes the configuration |
 * | CORRUPT*, NOTADB, FORMAT, SCHEMA, ERROR, CONSTRAINT at an entry point, MISMATCH | DatabaseDamagedError | runs `spool doctor` |
 */
import { CHECK } from './faults.ts';
import { DatabaseBusyError, DatabaseDamagedError, SpoolError, StorageAccessError, StorageFullError, StorageIoError } from '../../src/base/errors.ts';

/** What a fault message can say about where it happened. */
export interface FaultContext {
  /** The database file (`:memory:` for none). */
  path: string;
  /** The store call, for the message (`stats`, `writeBatch`). */
  call?: string;
  /** Free bytes where the database lives, or null when unknown (the file system's, for a file on disk). */
  freeBytes?: (path: string) => number | null;
}

const unknownFree = (): null => null;

/** A SQLite driver error's code (`SQLITE_FULL`: better-sqlite3's `code`, the sqlite-wasm driver's likewise), or undefined for anything else. */
export function sqliteCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** The storage-fault class a SQLite code maps to, or undefined for a code that is not one. */
function kindOf(code: string): 'full' | 'io' | 'busy' | 'access' | 'damaged' {
  const base = code.replace(/^(SQLITE_[A-Z]+?)(_[A-Z_]+)?$/, '$1');
  if (base === 'SQLITE_FULL') return 'full';
  if (base === 'SQLITE_BUSY' || base === 'SQLITE_LOCKED') return 'busy';
  if (['SQLITE_READONLY', 'SQLITE_PERM', 'SQLITE_CANTOPEN', 'SQLITE_AUTH'].includes(base)) return 'access';
  if (['SQLITE_IOERR', 'SQLITE_NOMEM', 'SQLITE_PROTOCOL', 'SQLITE_INTERRUPT'].includes(base)) return 'io';
  return 'damaged';
}

/**
 * Whether an error inside one write of a batch is a storage fault (full, I/O, busy, read-only, a
 * damaged page): the whole transaction fails with it, rather than that write alone being refused
 * as its own checks (a constraint) refuse it.
 */
export function isSqliteFault(error: unknown): boolean {
  const code = sqliteCode(error);
  if (code === undefined) return false;
  const kind = kindOf(code);
  return kind !== 'damaged' || /^SQLITE_(CORRUPT|NOTADB)/.test(code);
}

/**
 * Whether an error raised by COMMIT itself leaves the transaction's outcome unknown: an I/O error
 * (a failed write or sync of the WAL) may leave a complete commit record in the log that a later
 * recovery applies. A full disk is not one: SQLite writes the commit frame last, so a write refused
 * for space leaves no commit behind (nothing was changed).
 */
export function outcomeUnknownAtCommit(error: unknown): boolean {
  const code = sqliteCode(error);
  return code !== undefined && kindOf(code) === 'io';
}

/**
 * Any error a SQLite call threw, as Spool's typed error: SpoolErrors as they are, SQLite errors
 * by code, a `SyntaxError` (stored JSON that does not parse) as a damaged file; anything else
 * (a bug) as it is.
 */
export function sqliteStorageFault(error: unknown, ctx: FaultContext): unknown {
  if (error instanceof SpoolError) return error;
  const where = ctx.call ? ` (${ctx.call})` : '';
  if (error instanceof SyntaxError) {
    return new DatabaseDamagedError(`A stored record of ${ctx.path} is not valid JSON${where}: ${error.message}. ${CHECK}`, { path: ctx.path });
  }
  const code = sqliteCode(error);
  if (code === undefined) return error;
  const said = (error as Error).message;
  const details = { path: ctx.path, driverCode: code };
  const free = ctx.freeBytes ?? unknownFree;
  switch (spaceShort(code, ctx.path, free) ? 'full' : kindOf(code)) {
    case 'full': {
      const bytes = free(ctx.path);
      const space = bytes === null ? '' : `, ${bytes} bytes free`;
      return new StorageFullError(
        `The disk holding ${ctx.path} is full (${code}: ${said}${space})${where}. Nothing was changed; free some space and try again.`,
        { ...details, freeBytes: bytes },
      );
    }
    case 'io':
      return new StorageIoError(`Reading or writing ${ctx.path} failed (${code}: ${said})${where}. Nothing acknowledged was lost; try again, and check the disk if it persists.`, details);
    case 'busy':
      return new DatabaseBusyError(`${ctx.path} stayed locked by another connection for the whole busy timeout (${code})${where}. Nothing was changed; try again.`, details);
    case 'access':
      return new StorageAccessError(
        `${ctx.path} cannot be written or opened (${code}: ${said})${where}: the file or its directory is read-only, or this process may not use it. ` +
          'Check the path and its permissions (and the disk is not mounted read-only).',
        details,
      );
    case 'damaged':
      return new DatabaseDamagedError(`The database file ${ctx.path} is damaged (${code}: ${said})${where}. ${CHECK}`, { ...details, ...tableOf(said) });
  }
}

/**
 * An I/O error that is a full disk by another name: SQLite could not grow the WAL index
 * (`SQLITE_IOERR_SHMSIZE`, as when the file opens on a full tmpfs), or a write failed on a
 * filesystem with no byte free. Reported as full, so its remedy is "free some space".
 */
function spaceShort(code: string, path: string, freeBytes: (path: string) => number | null): boolean {
  return code === 'SQLITE_IOERR_SHMSIZE' || (code.startsWith('SQLITE_IOERR') && freeBytes(path) === 0);
}

/** The table or index SQLite's message names, where it names one. */
function tableOf(message: string): { table?: string } {
  const m = /(?:table|index|column)\s+"?([A-Za-z_][\w.]*)"?/.exec(message);
  return m?.[1] ? { table: m[1] } : {};
}

