/**
 * What a refused HTTP request gets: `{ error: { code, category, message, ...details } }` with the
 * runtime's stable code and an HTTP status chosen from it. The errors only HTTP has (an unknown
 * route, a wrong method, a missing token, a body that is not JSON) are Spool errors too, with
 * codes of their own.
 */
import { BackpressureError, SpoolError, type ErrorCategory } from '../index.ts';
import { MethodNotAllowedError } from '../base/httpErrors.ts';

export { RouteNotFoundError, MethodNotAllowedError, UnauthorizedError, HostNotAllowedError, CrossOriginError, BadJsonError, BodyTooLargeError, MachineUnavailableError, TooManyStreamsError, ForbiddenError } from '../base/httpErrors.ts';

/** Codes whose status is not their category's. */
const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  SPOOL_UNAUTHORIZED: 401,
  SPOOL_HOST_NOT_ALLOWED: 403,
  SPOOL_CROSS_ORIGIN: 403,
  SPOOL_FORBIDDEN: 403,
  SPOOL_METHOD_NOT_ALLOWED: 405,
  SPOOL_PAYLOAD_TOO_LARGE: 413,
  SPOOL_UNKNOWN_MACHINE: 404,
  SPOOL_BACKPRESSURE: 503,
  SPOOL_EVENT_FAILED: 422,
  SPOOL_TOO_MANY_STREAMS: 503,
};

const STATUS_BY_CATEGORY: Readonly<Record<ErrorCategory, number>> = {
  'bad-input': 400,
  'not-found': 404,
  conflict: 409,
  terminal: 409,
  retryable: 503,
  internal: 500,
};

/** The HTTP status of an error. */
export function statusOf(error: SpoolError): number {
  return STATUS_BY_CODE[error.code] ?? STATUS_BY_CATEGORY[error.category];
}

/**
 * The response for anything a route threw: a Spool error as itself; anything else as
 * `SPOOL_INTERNAL` (500) without its message, which may quote stored values.
 */
export function errorResponse(error: unknown): Response {
  if (!(error instanceof SpoolError)) {
    const body = { error: { code: 'SPOOL_INTERNAL', category: 'internal', message: 'An unexpected error; the server log has it.' } };
    return Response.json(body, { status: 500 });
  }
  const headers = new Headers();
  if (error instanceof MethodNotAllowedError) headers.set('Allow', error.allow.join(', '));
  if (error instanceof BackpressureError) headers.set('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
  return Response.json({ error: error.toJSON() }, { status: statusOf(error), headers });
}
