/**
 * The errors only HTTP has (an unknown route, a wrong method, a missing token, a body that is not
 * JSON, a machine the server does not run, too many streams): Spool errors with codes of their
 * own. The server throws them (src/server/errors.ts); the HTTP client (src/client) rethrows them
 * from a response's error body, so they live here, below both.
 */
import { SpoolError } from './errors.ts';

/** No route has this path. */
export class RouteNotFoundError extends SpoolError {
  readonly code = 'SPOOL_ROUTE_NOT_FOUND';
  readonly category = 'not-found';
}

/** The path exists, but not for this method. */
export class MethodNotAllowedError extends SpoolError {
  readonly code = 'SPOOL_METHOD_NOT_ALLOWED';
  readonly category = 'bad-input';
  /** The methods the path takes (the `Allow` header). */
  readonly allow: readonly string[];
  constructor(method: string, path: string, allow: readonly string[]) {
    super(`${path} does not take ${method}; it takes ${allow.join(', ')}.`, { allow });
    this.allow = allow;
  }
}

/** A write without the server's bearer token, or with another one. */
export class UnauthorizedError extends SpoolError {
  readonly code = 'SPOOL_UNAUTHORIZED';
  readonly category = 'bad-input';
}

/**
 * The Host header names neither the address the server listens on nor a host allowed with
 * `--allowed-host`: a page that rebinds a name of its own to this machine gets nothing.
 */
export class HostNotAllowedError extends SpoolError {
  readonly code = 'SPOOL_HOST_NOT_ALLOWED';
  readonly category = 'bad-input';
}

/** A write sent by a page of another origin (its `Origin` header is not this server's). */
export class CrossOriginError extends SpoolError {
  readonly code = 'SPOOL_CROSS_ORIGIN';
  readonly category = 'bad-input';
}

/** The request body is not JSON, or not the JSON object the route takes. */
export class BadJsonError extends SpoolError {
  readonly code = 'SPOOL_BAD_JSON';
  readonly category = 'bad-input';
}

/** The request body is larger than the server's limit. */
export class BodyTooLargeError extends SpoolError {
  readonly code = 'SPOOL_PAYLOAD_TOO_LARGE';
  readonly category = 'bad-input';
}

/** A write to a job whose machine version this server does not register: running it would quarantine the job. */
export class MachineUnavailableError extends SpoolError {
  readonly code = 'SPOOL_MACHINE_UNAVAILABLE';
  readonly category = 'conflict';
}

/** Too many event streams are open at once. */
export class TooManyStreamsError extends SpoolError {
  readonly code = 'SPOOL_TOO_MANY_STREAMS';
  readonly category = 'retryable';
}

/** A token that may not do this: a worker token (`--worker-token`) outside the worker routes, or for an activity it was not given. */
export class ForbiddenError extends SpoolError {
  readonly code = 'SPOOL_FORBIDDEN';
  readonly category = 'bad-input';
}
