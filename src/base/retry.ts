import type { ErrorInfo } from '../ports/store.ts';
import { textOf, toErrorInfo } from './errors.ts';

/**
 * Retry policy of an activity, as data (its rules: `src/step/attempts.ts`). Defaults: 3 attempts, 1 s doubling to at most 5 min,
 * ±10 % jitter, every error retried except terminal ones.
 *
 * @example
 * activities: { upload: { maxAttempts: 5, backoff: { initialMs: 500, factor: 2, maxMs: 30_000, jitter: 0.2 } } }
 */
export interface RetryPolicy {
  /** Attempts in all, the first included. Default 3. */
  maxAttempts?: number;
  backoff?: { initialMs?: number; factor?: number; maxMs?: number; jitter?: number };
  /** Decide whether an error is worth another attempt. Default: all but terminal errors. */
  retryOn?: (error: ErrorInfo) => boolean;
}

/** How an activity is run: its retry policy, and what to do after a crash mid-attempt. */
export interface ActivityPolicy extends RetryPolicy {
  /**
   * True when running it twice could do harm (a payment without provider-side idempotency):
   * after a crash mid-attempt it is NOT re-run; the machine receives `xstate.error.actor.<id>`
   * with an {@link IndeterminateOutcomeError} and can reconcile.
   */
  unsafeToRepeat?: boolean;
}

/** A failure worth retrying; `retryAfterMs` overrides the backoff for the next attempt. */
export class RetryableError extends Error {
  readonly retryable = true;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'RetryableError';
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** A failure that no retry can fix: the machine gets the error at once. */
export class TerminalError extends Error {
  readonly terminal = true;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'TerminalError';
  }
}

/** Delivered to the machine when an unsafe-to-repeat activity was interrupted mid-attempt. */
export class IndeterminateOutcomeError extends Error {
  readonly code = 'SPOOL_INDETERMINATE';
  constructor(message: string) {
    super(message);
    this.name = 'IndeterminateOutcomeError';
  }
}

/** Sort a thrown value: machines import neither class, so duck typing is the contract. */
export function classify(error: unknown): { info: ErrorInfo; terminal: boolean; retryAfterMs: number | undefined } {
  try {
    const e = error as { name?: unknown; message?: unknown; code?: unknown; terminal?: unknown; retryable?: unknown; retryAfterMs?: unknown } | null;
    const name = typeof e?.name === 'string' ? e.name : 'Error';
    // Its message when it has one (as text), else the whole value.
    const message = e !== null && typeof e === 'object' && e.message !== undefined && e.message !== null ? textOf(e.message) : textOf(error);
    const info: ErrorInfo = typeof e?.code === 'string' ? { name, message, code: e.code } : { name, message };
    const terminal = e?.terminal === true || e?.retryable === false || name === 'TerminalError';
    const retryAfterMs = typeof e?.retryAfterMs === 'number' && e.retryAfterMs >= 0 ? e.retryAfterMs : undefined;
    return { info, terminal, retryAfterMs };
  } catch {
    // A Proxy or getters that throw: record what can be read, and retry as for any error.
    return { info: toErrorInfo(error), terminal: false, retryAfterMs: undefined };
  }
}
