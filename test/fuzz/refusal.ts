/**
 * What a clean refusal is, for the fuzz tests: a typed `SpoolError` (a stable code and a category
 * saying what to do), or, where the database file itself is damaged, the SQLite driver's own coded
 * error (`SQLITE_CORRUPT`, `SQLITE_NOTADB`, ...). Anything else (a TypeError, a RangeError, a process
 * crash) is a bug.
 */
import { SpoolError } from '../../src/index.ts';

const CATEGORIES = new Set(['bad-input', 'not-found', 'conflict', 'terminal', 'retryable', 'internal']);

export function isSpoolRefusal(error: unknown): error is SpoolError {
  return error instanceof SpoolError && typeof error.code === 'string' && error.code.startsWith('SPOOL_') && CATEGORIES.has(error.category) && error.message.length > 0;
}

/**
 * The driver's refusal of a damaged file: better-sqlite3's `SqliteError` with an `SQLITE_…` code
 * (`SQLITE_CORRUPT`, `SQLITE_NOTADB`, or `SQLITE_ERROR` when damage in the schema text renamed a
 * column). Coded and clean, though not (yet) a SpoolError.
 */
export function isDamagedFileRefusal(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && error.name === 'SqliteError' && typeof code === 'string' && code.startsWith('SQLITE_');
}

/** A short description of what was thrown, for assertion messages. */
export function describeThrown(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}${(error as { code?: unknown }).code ? ` ${String((error as { code?: unknown }).code)}` : ''}: ${error.message.slice(0, 200)}`;
  return `non-error ${String(error)}`;
}
