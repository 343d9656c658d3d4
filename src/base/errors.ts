/**
 * Spool's errors: classes with a stable `code`, grouped by what the caller should do.
 *
 * - `bad-input`: fix the request; nothing was changed.
 * - `not-found`: no such job (also what another owner's job looks like).
 * - `conflict`: the request disagrees with what is stored; read it and decide.
 * - `terminal`: the job has ended; nothing more can happen to it.
 * - `retryable`: try again later.
 * - `internal`: a bug or a broken database; see the message.
 *
 * @example
 * try { await runtime.send(id, { type: 'PAUSE' }) }
 * catch (e) { if (e instanceof SpoolError && e.category === 'bad-input') console.error(e.message) }
 */
export type ErrorCategory = 'bad-input' | 'not-found' | 'conflict' | 'terminal' | 'retryable' | 'internal';

export abstract class SpoolError extends Error {
  abstract readonly code: string;
  abstract readonly category: ErrorCategory;
  /** Structured, non-sensitive details for tools (`--json`). */
  readonly details: Record<string, unknown>;
  constructor(message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
  toJSON(): Record<string, unknown> {
    return { code: this.code, category: this.category, message: this.message, ...this.details };
  }
}

/** Input, an event or a payload failed validation. */
export class ValidationError extends SpoolError {
  readonly code = 'SPOOL_INVALID';
  readonly category = 'bad-input';
}

/** No machine is registered under that id. */
export class UnknownMachineError extends SpoolError {
  readonly code = 'SPOOL_UNKNOWN_MACHINE';
  readonly category = 'bad-input';
}

/** The job's machine does not know this event type. */
export class UnknownEventError extends SpoolError {
  readonly code = 'SPOOL_UNKNOWN_EVENT';
  readonly category = 'bad-input';
}

/** The payload is larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends SpoolError {
  readonly code = 'SPOOL_PAYLOAD_TOO_LARGE';
  readonly category = 'bad-input';
}

/** A machine definition cannot be registered as given. */
export class MachineDefinitionError extends SpoolError {
  readonly code = 'SPOOL_BAD_MACHINE';
  readonly category = 'bad-input';
}

/** No job with that id is visible to this caller. */
export class JobNotFoundError extends SpoolError {
  readonly code = 'SPOOL_NOT_FOUND';
  readonly category = 'not-found';
  constructor(jobId: string) {
    super(`No job "${jobId}". Check the id with \`spool list\`.`, { jobId });
  }
}

/** Events can no longer be sent to a quarantined job until it is released (`details`: `jobId`, `reason`). */
export class JobQuarantined extends SpoolError {
  readonly code = 'SPOOL_QUARANTINED';
  readonly category = 'conflict';
}

/** The job is in a final state: terminal means terminal. */
export class JobTerminalError extends SpoolError {
  readonly code = 'SPOOL_TERMINAL';
  readonly category = 'terminal';
}

/** The same idempotency key or event id was used before with a different payload. */
export class IdempotencyConflictError extends SpoolError {
  readonly code = 'SPOOL_IDEMPOTENCY_CONFLICT';
  readonly category = 'conflict';
}

/** A commit found the job at another revision than the one it was computed from. */
export class RevisionConflictError extends SpoolError {
  readonly code = 'SPOOL_REVISION_CONFLICT';
  readonly category = 'conflict';
}

/** The database was written by a newer Spool than this one. */
export class SchemaTooNewError extends SpoolError {
  readonly code = 'SPOOL_SCHEMA_TOO_NEW';
  readonly category = 'internal';
}

/** A stored row could not be read back (corrupted or hand-edited). */
export class CorruptRecordError extends SpoolError {
  readonly code: string = 'SPOOL_CORRUPT_RECORD';
  readonly category = 'internal';
}

/*
 * Storage faults: what a store throws when the storage itself fails, whatever the database. A
 * store maps its driver's errors into these (SQLite: persistence/drivers/better-sqlite3/storageFault.ts; the port,
 * src/ports/store.ts, says which call may throw which), so that no driver error reaches a caller.
 * By what the caller should do:
 * - retry later, nothing was changed: {@link StorageFullError}, {@link StorageIoError}, {@link DatabaseBusyError};
 * - fix the configuration (the path, its permissions): {@link StorageAccessError};
 * - check and restore the file (`spool doctor`): {@link DatabaseDamagedError}.
 * (A commit whose outcome is not known is `CommitOutcomeUnknown`, in the port: read it back.)
 */

/**
 * The disk (or the database's size limit) is full: the write was refused and nothing was changed.
 * Free space and try again. `details`: `path`, `freeBytes` (null when it could not be read).
 */
export class StorageFullError extends SpoolError {
  readonly code = 'SPOOL_STORAGE_FULL';
  readonly category = 'retryable';
}

/**
 * The storage failed to read or write (an I/O error, a lost connection): nothing was changed that
 * was acknowledged. Try again; if it persists, check the disk. `details`: `path`, `driverCode`.
 */
export class StorageIoError extends SpoolError {
  readonly code = 'SPOOL_STORAGE_IO';
  readonly category = 'retryable';
}

/** The database stayed locked by another process (or connection) for the whole busy timeout: nothing was changed; try again. */
export class DatabaseBusyError extends SpoolError {
  readonly code = 'SPOOL_DATABASE_BUSY';
  readonly category = 'retryable';
}

/**
 * The database cannot be written or opened as configured: the file or its directory is read-only,
 * or this process may not use it. Fix the path or its permissions (`details.path`); retrying as
 * it is will not help. (Category `bad-input`: the request's configuration is what needs fixing.)
 */
export class StorageAccessError extends SpoolError {
  readonly code = 'SPOOL_STORAGE_ACCESS';
  readonly category = 'bad-input';
}

/**
 * The database file is damaged (SQLite: `SQLITE_CORRUPT`, `SQLITE_NOTADB`, a bad index, a schema
 * that no longer matches). `details`: `path`, and `table`/`row` where known. Check it with
 * `spool doctor`, repair what can be repaired with `spool doctor --repair`, or restore a backup.
 * A {@link CorruptRecordError}, so code that catches damaged records catches a damaged file too.
 */
export class DatabaseDamagedError extends CorruptRecordError {
  override readonly code = 'SPOOL_DATABASE_DAMAGED';
}

/** The runtime or store was closed. */
export class ClosedError extends SpoolError {
  readonly code = 'SPOOL_CLOSED';
  readonly category = 'internal';
}

/** A wait ended before its predicate held. */
export class WaitTimeoutError extends SpoolError {
  readonly code = 'SPOOL_WAIT_TIMEOUT';
  readonly category = 'retryable';
}

/**
 * Backpressure: more events wait to be applied (`backlog`, accepted but not yet applied, in the
 * whole store) than the runtime's `maxBacklog` allows, so `start` or `send` refused the request.
 * Nothing was written: send it again after `retryAfterMs` (a repeat of an event id already
 * accepted is never refused: it returns the first outcome). Internal events (timer firings,
 * activity outcomes, cancel requests) are never refused.
 *
 * @example
 * try { await runtime.send(id, event, { eventId }) }
 * catch (e) { if (e instanceof BackpressureError) setTimeout(retry, e.retryAfterMs) }
 */
export class BackpressureError extends SpoolError {
  readonly code = 'SPOOL_BACKPRESSURE';
  readonly category = 'retryable';
  /** Events accepted but not yet applied, as this runtime last counted them. */
  readonly backlog: number;
  /** The runtime's `maxBacklog`. */
  readonly limit: number;
  /** When to try again, in ms: an estimate from how fast the backlog was last seen to drain. */
  readonly retryAfterMs: number;
  constructor(backlog: number, limit: number, retryAfterMs: number) {
    super(
      `Too much work waiting: ${backlog} events accepted but not yet applied (maxBacklog ${limit}). Nothing was recorded; ` +
        `retry after ${retryAfterMs} ms, and if this persists run more workers or check that one is running (\`spool stats\` shows the backlog).`,
      { backlog, limit, retryAfterMs },
    );
    this.backlog = backlog;
    this.limit = limit;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * `retry` cannot redrive this job: the machine already handled the failure (or there is no
 * failure to redrive, or redriving would repeat an activity marked unsafe to repeat). The message
 * says what to do instead; `details.reason` says why, for tools.
 */
export class RetryRefusedError extends SpoolError {
  readonly code = 'SPOOL_RETRY_REFUSED';
  readonly category = 'conflict';
}

/**
 * Turn anything thrown into stored error details. Never throws: a machine may throw anything (a
 * BigInt, an object that refers to itself, a Proxy, an Error whose getters throw), and the error
 * that records it must still be written.
 */
export function toErrorInfo(error: unknown): { name: string; message: string; code?: string } {
  try {
    if (error instanceof SpoolError) return { name: error.name, message: error.message, code: error.code };
    if (error instanceof Error) return { name: textOf(error.name) || 'Error', message: textOf(error.message) };
    return { name: 'Error', message: textOf(error) };
  } catch {
    return { name: 'Error', message: UNREADABLE };
  }
}

const UNREADABLE = '(a thrown value that cannot be read)';

/**
 * A thrown value (or its `message`) as text: strings as they are, the rest as JSON where it can
 * be, with BigInts written `12n` and a repeated object `[seen]` (so a cycle cannot stop it).
 */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    const seen = new WeakSet<object>();
    const json = JSON.stringify(value, (_key, v: unknown) => {
      if (typeof v === 'bigint') return `${v}n`;
      if (v !== null && typeof v === 'object') {
        if (seen.has(v)) return '[seen]';
        seen.add(v);
      }
      return v;
    });
    if (json !== undefined) return json;
  } catch {
    // A throwing toJSON or getter: fall back to String().
  }
  try {
    return String(value);
  } catch {
    return UNREADABLE;
  }
}

/** A completion token that is unknown, used, malformed, or for an invocation no longer current. */
export class TokenError extends SpoolError {
  readonly code = 'SPOOL_BAD_TOKEN';
  readonly category = 'conflict';
}

/** A remote worker's attempt token that is not one this server hands out (cut, edited, made up): nothing was changed. */
export class AttemptTokenError extends SpoolError {
  readonly code = 'SPOOL_BAD_ATTEMPT_TOKEN';
  readonly category = 'bad-input';
}

/**
 * A remote worker's attempt token for an attempt that is no longer current: its claim expired and
 * another worker took the activity over, the state that invoked it was left, the job ended, or it
 * names no attempt this server knows. Nothing was changed; drop the attempt's result.
 */
export class StaleAttemptError extends SpoolError {
  readonly code = 'SPOOL_STALE_ATTEMPT';
  readonly category = 'conflict';
}

/** The operation needs a finished job. */
export class JobNotFinishedError extends SpoolError {
  readonly code = 'SPOOL_NOT_FINISHED';
  readonly category = 'conflict';
}

/**
 * `redeliver` cannot apply this event again: it did not fail, it carried sensitive fields (no
 * longer stored), or the job has moved on since it failed (then
 * `force` applies it anyway). `details.reason` says which, for tools; nothing was changed.
 */
export class RedeliveryRefusedError extends SpoolError {
  readonly code = 'SPOOL_REDELIVERY_REFUSED';
  readonly category = 'conflict';
}

/**
 * The event was accepted and recorded, but its outcome is `failed` (a guard or an action threw
 * while it was applied; the job did not move). Not thrown by `send`, whose result says `failed`:
 * the CLI (exit 1) and the HTTP server (422) report such an outcome with it. `details.outcome` is
 * the send's result, `details.error` the failure.
 */
export class EventFailedError extends SpoolError {
  readonly code = 'SPOOL_EVENT_FAILED';
  readonly category = 'conflict';
}

/**
 * {@link EventFailedError} for a send-like result (send, startOrSend, redeliver) whose outcome is
 * `failed`, carrying that result (give it redacted); null for any other outcome.
 *
 * @example
 * const failed = eventFailure(result); if (failed) throw failed;
 */
export function eventFailure(result: { jobId: string; eventId: string; status: string; error: { code?: string; name: string; message: string } | null }): EventFailedError | null {
  if (result.status !== 'failed') return null;
  const why = result.error ? `${result.error.code ?? result.error.name}: ${result.error.message}` : 'no error recorded';
  return new EventFailedError(
    `Event ${result.eventId} failed on job ${result.jobId} (${why}); the job did not move. \`spool show ${result.jobId}\` lists it with its way out (redeliver it once the machine is fixed).`,
    { outcome: result, error: result.error },
  );
}
