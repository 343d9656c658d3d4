/**
 * `spool/server`: Spool's HTTP API and event streams over a runtime, for embedding (the `spool
 * serve` command uses the same). `createApp` is the Hono app alone, for any fetch host.
 *
 * @example
 * import { createServer } from 'spool/server';
 * const server = await createServer({ runtime, port: 0 });
 */
export { createServer, STREAM_DEFAULTS, type ServerOptions, type SpoolServer } from './server.ts';
export { createApp, type AppOptions } from './app.ts';
export type { StreamOptions, StreamState } from './sse.ts';
export { parseWorkerToken, type WorkerToken } from './auth.ts';
export { RouteNotFoundError, MethodNotAllowedError, UnauthorizedError, HostNotAllowedError, CrossOriginError, BadJsonError, BodyTooLargeError, MachineUnavailableError, TooManyStreamsError, ForbiddenError, statusOf } from './errors.ts';
