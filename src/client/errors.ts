/**
 * A refused request's error body (`{ error: { code, category, message, ...details } }`, what
 * src/server/errors.ts sends) rethrown as the class the server threw: the one table from code to
 * class is here. An unknown code (a newer server) is a {@link RemoteError} with that code; a body
 * that is no Spool error (a proxy's page) is one with code `SPOOL_HTTP`.
 */
import {
  BackpressureError,
  ClosedError,
  CorruptRecordError,
  DatabaseBusyError,
  DatabaseDamagedError,
  EventFailedError,
  IdempotencyConflictError,
  JobNotFinishedError,
  JobNotFoundError,
  JobQuarantined,
  JobTerminalError,
  MachineDefinitionError,
  PayloadTooLargeError,
  RedeliveryRefusedError,
  RetryRefusedError,
  RevisionConflictError,
  SchemaTooNewError,
  SpoolError,
  StorageAccessError,
  StorageFullError,
  StorageIoError,
  TokenError,
  AttemptTokenError,
  StaleAttemptError,
  UnknownEventError,
  UnknownMachineError,
  ValidationError,
  WaitTimeoutError,
  type ErrorCategory,
} from '../base/errors.ts';
import {
  BadJsonError,
  CrossOriginError,
  ForbiddenError,
  HostNotAllowedError,
  MachineUnavailableError,
  MethodNotAllowedError,
  RouteNotFoundError,
  TooManyStreamsError,
  UnauthorizedError,
} from '../base/httpErrors.ts';

/** An error whose code this client has no class for, or a response that carried no Spool error. */
export class RemoteError extends SpoolError {
  readonly code: string;
  readonly category: ErrorCategory;
  /** The HTTP status of the response (0: no response, the server could not be reached). */
  readonly status: number;
  constructor(code: string, category: ErrorCategory, message: string, status: number, details: Record<string, unknown> = {}) {
    super(message, details);
    this.code = code;
    this.category = category;
    this.status = status;
  }
}

type Details = Record<string, unknown>;
type Make = (message: string, details: Details) => SpoolError;

/** A class whose constructor is `(message, details)`, as most are. */
const plain =
  (Class: new (message: string, details?: Details) => SpoolError): Make =>
  (message, details) =>
    new Class(message, details);

const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

/** Every code a Spool server sends, by the class it was thrown as. */
const CLASSES: Readonly<Record<string, Make>> = {
  SPOOL_INVALID: plain(ValidationError),
  SPOOL_UNKNOWN_MACHINE: plain(UnknownMachineError),
  SPOOL_UNKNOWN_EVENT: plain(UnknownEventError),
  // The runtime's and the HTTP body limit share the code; the class is the runtime's.
  SPOOL_PAYLOAD_TOO_LARGE: plain(PayloadTooLargeError),
  SPOOL_BAD_MACHINE: plain(MachineDefinitionError),
  SPOOL_NOT_FOUND: (_m, d) => new JobNotFoundError(String(d['jobId'] ?? '')),
  SPOOL_TERMINAL: plain(JobTerminalError),
  SPOOL_QUARANTINED: plain(JobQuarantined),
  SPOOL_IDEMPOTENCY_CONFLICT: plain(IdempotencyConflictError),
  SPOOL_REVISION_CONFLICT: plain(RevisionConflictError),
  SPOOL_SCHEMA_TOO_NEW: plain(SchemaTooNewError),
  SPOOL_CORRUPT_RECORD: plain(CorruptRecordError),
  SPOOL_STORAGE_FULL: plain(StorageFullError),
  SPOOL_STORAGE_IO: plain(StorageIoError),
  SPOOL_DATABASE_BUSY: plain(DatabaseBusyError),
  SPOOL_STORAGE_ACCESS: plain(StorageAccessError),
  SPOOL_DATABASE_DAMAGED: plain(DatabaseDamagedError),
  SPOOL_CLOSED: plain(ClosedError),
  SPOOL_WAIT_TIMEOUT: plain(WaitTimeoutError),
  SPOOL_BACKPRESSURE: (_m, d) => new BackpressureError(num(d['backlog']), num(d['limit']), num(d['retryAfterMs'])),
  SPOOL_RETRY_REFUSED: plain(RetryRefusedError),
  SPOOL_BAD_TOKEN: plain(TokenError),
  SPOOL_BAD_ATTEMPT_TOKEN: plain(AttemptTokenError),
  SPOOL_STALE_ATTEMPT: plain(StaleAttemptError),
  SPOOL_FORBIDDEN: plain(ForbiddenError),
  SPOOL_NOT_FINISHED: plain(JobNotFinishedError),
  SPOOL_REDELIVERY_REFUSED: plain(RedeliveryRefusedError),
  SPOOL_EVENT_FAILED: plain(EventFailedError),
  SPOOL_ROUTE_NOT_FOUND: plain(RouteNotFoundError),
  SPOOL_METHOD_NOT_ALLOWED: (_m, d) => new MethodNotAllowedError('', '', Array.isArray(d['allow']) ? d['allow'].map(String) : []),
  SPOOL_UNAUTHORIZED: plain(UnauthorizedError),
  SPOOL_HOST_NOT_ALLOWED: plain(HostNotAllowedError),
  SPOOL_CROSS_ORIGIN: plain(CrossOriginError),
  SPOOL_BAD_JSON: plain(BadJsonError),
  SPOOL_MACHINE_UNAVAILABLE: plain(MachineUnavailableError),
  SPOOL_TOO_MANY_STREAMS: plain(TooManyStreamsError),
};

const CATEGORIES: readonly ErrorCategory[] = ['bad-input', 'not-found', 'conflict', 'terminal', 'retryable', 'internal'];

/**
 * The error a response with `status` and body `text` stands for: the class of its code, with the
 * server's message and details; else a {@link RemoteError}.
 */
export function errorFromResponse(status: number, text: string): SpoolError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = (body as { error?: unknown } | undefined)?.error;
  if (error === null || typeof error !== 'object' || typeof (error as { code?: unknown }).code !== 'string') {
    const category: ErrorCategory = status >= 500 ? 'retryable' : 'bad-input';
    return new RemoteError('SPOOL_HTTP', category, `The server answered ${status} without a Spool error body: ${text.slice(0, 200)}`, status);
  }
  const { code, category, message, ...details } = error as { code: string; category?: unknown; message?: unknown };
  const said = typeof message === 'string' ? message : `${code} (no message)`;
  const make = CLASSES[code];
  if (make === undefined) {
    const known = CATEGORIES.includes(category as ErrorCategory) ? (category as ErrorCategory) : 'internal';
    return new RemoteError(code, known, said, status, details);
  }
  const made = make(said, details);
  // Classes that build their own message (not found, backpressure) get the server's, and its details.
  made.message = said;
  Object.assign(made.details, details);
  return made;
}

/** The server could not be reached (refused, reset, DNS): nothing is known to have been done. */
export function unreachable(url: string, cause: unknown): RemoteError {
  const why = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
  return new RemoteError('SPOOL_UNREACHABLE', 'retryable', `Could not reach the Spool server at ${url} (${why}). Check that \`spool serve\` runs there, then try again; a write may or may not have landed, so send it again with the same id.`, 0);
}
