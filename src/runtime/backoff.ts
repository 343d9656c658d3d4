/**
 * Bounded backoff for riding out storage faults (the worker's loop, the read-back of a commit
 * whose outcome is unknown): a delay that doubles from `firstMs` to at most `maxMs`. The sleep
 * itself is real time; what is due stays the runtime clock's business.
 */
import { SpoolError } from '../base/errors.ts';

/** The delay before try `n` (1-based) after a fault: `firstMs`, doubling, at most `maxMs`. */
export function backoffMs(n: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, Math.min(n - 1, 30)));
}

/** A fault worth trying again after a pause: a Spool error of the `retryable` category (disk full, I/O, busy, an unknown commit outcome). */
export function isRetryableFault(error: unknown): error is SpoolError {
  return error instanceof SpoolError && error.category === 'retryable';
}

/** Wait `ms` of real time. */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
