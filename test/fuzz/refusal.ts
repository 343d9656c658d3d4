/**
 * What a clean refusal is, for the fuzz tests: a typed `SpoolError` (a stable code and a category
 * saying what to do), also where the database file itself is damaged (the store maps the driver's
 * `SQLITE_CORRUPT`, `SQLITE_NOTADB`, ... to `DatabaseDamagedError`). Anything else (a driver's
 * error, a TypeError, a RangeError, a process crash) is a bug.
 */
import { SpoolError } from '../../src/index.ts';

const CATEGORIES = new Set(['bad-input', 'not-found', 'conflict', 'terminal', 'retryable', 'internal']);

export function isSpoolRefusal(error: unknown): error is SpoolError {
  return error instanceof SpoolError && typeof error.code === 'string' && error.code.startsWith('SPOOL_') && CATEGORIES.has(error.category) && error.message.length > 0;
}

/** A short description of what was thrown, for assertion messages. */
export function describeThrown(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}${(error as { code?: unknown }).code ? ` ${String((error as { code?: unknown }).code)}` : ''}: ${error.message.slice(0, 200)}`;
  return `non-error ${String(error)}`;
}
