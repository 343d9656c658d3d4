/**
 * Who may ask: writes need the server's bearer token (`Authorization: Bearer <token>`); reads
 * need it too when the server listens beyond loopback (or is told to). Every request must name
 * this server in its Host header, and a write from a browser must come from its own origin, so
 * a page elsewhere cannot reach it through DNS rebinding.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { Context, MiddlewareHandler } from 'hono';
import { ValidationError } from '../index.ts';
import { CrossOriginError, ForbiddenError, HostNotAllowedError, UnauthorizedError } from './errors.ts';

/** Where the token came from: given (an option or `SPOOL_TOKEN`), or made up at start (then printed). */
export interface ServerToken {
  token: string;
  generated: boolean;
}

/** A token for remote workers (`--worker-token T` or `T:charge,ship`): the worker routes only, for these activities (null: any). */
export interface WorkerToken {
  token: string;
  activities: readonly string[] | null;
}

const TOKEN_SHAPE = /^[\x21-\x7e]{16,512}$/;

/** `T` or `T:activityA,activityB` as `--worker-token` takes it (the token itself has no `:`). */
export function parseWorkerToken(text: string): WorkerToken {
  const colon = text.indexOf(':');
  const token = colon === -1 ? text : text.slice(0, colon);
  if (!TOKEN_SHAPE.test(token) || token.includes(':')) throw new ValidationError('A worker token must be 16-512 printable ASCII characters without spaces or ":" (then, optionally, ":" and the activities it may run, comma-separated).');
  if (colon === -1) return { token, activities: null };
  const activities = text.slice(colon + 1).split(',').map((a) => a.trim());
  if (activities.some((a) => a === '')) throw new ValidationError(`The worker token's activities "${text.slice(colon + 1)}" must be names separated by commas, e.g. T:charge,ship.`);
  return { token, activities };
}

/** The activities a request's worker token may run (null: any; the admin token too), set by {@link requireToken} on the worker routes. */
const scopes = new WeakMap<Request, readonly string[] | null>();

/** What a request under /api/workers may run (see {@link requireToken}). */
export function activityScope(c: Context): readonly string[] | null {
  const scope = scopes.get(c.req.raw);
  if (scope === undefined) throw new UnauthorizedError('The worker routes need a token.');
  return scope;
}

/** The token given, else `SPOOL_TOKEN`, else a new random one (32 bytes, base64url). */
export function resolveToken(given: string | undefined, env: NodeJS.ProcessEnv = process.env): ServerToken {
  const token = given ?? env['SPOOL_TOKEN'];
  if (token === undefined || token === '') return { token: randomBytes(32).toString('base64url'), generated: true };
  if (!TOKEN_SHAPE.test(token)) throw new ValidationError('The server token must be 16-512 printable ASCII characters without spaces.');
  return { token, generated: false };
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The token of `Authorization: Bearer <token>` (the scheme in any case, RFC 7235), else of `?access_token=` on a read (RFC 6750; an EventSource sends no header). */
function givenToken(c: Context): string | undefined {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(c.req.header('authorization') ?? '');
  if (match) return match[1];
  return READS.has(c.req.method) ? c.req.query('access_token') : undefined;
}

/**
 * Refuse a write without the token, before its body is read; with `reads`, refuse the API's
 * reads without it too (the dashboard's page and files stay open: they hold no data). The
 * worker routes (/api/workers/...) take the token or a worker token, always; a worker token is
 * refused (403) anywhere else. Every token is compared in constant time, each one every time.
 */
export function requireToken(token: string, reads: boolean, workers: readonly WorkerToken[] = []): MiddlewareHandler {
  const expected = digest(token);
  const scoped = workers.map((w) => ({ digest: digest(w.token), activities: w.activities }));
  return async (c, next) => {
    const read = READS.has(c.req.method);
    const given = givenToken(c);
    const d = given === undefined ? undefined : digest(given);
    // Digests of equal length, compared in constant time; every worker token compared, whichever matches.
    const admin = d !== undefined && timingSafeEqual(d, expected);
    let worker: { activities: readonly string[] | null } | undefined;
    for (const w of scoped) if (d !== undefined && timingSafeEqual(d, w.digest) && worker === undefined) worker = w;
    if (c.req.path === '/api/workers' || c.req.path.startsWith('/api/workers/')) {
      if (given === undefined) throw new UnauthorizedError('The worker routes need a token: send a worker token (`spool serve --worker-token`) or the server token as `Authorization: Bearer <token>`.');
      if (!admin && worker === undefined) throw new UnauthorizedError('Wrong token: it is neither this server\'s token nor one of its worker tokens. Nothing was changed.');
      scopes.set(c.req.raw, admin ? null : worker!.activities);
      return next();
    }
    if (worker !== undefined && !admin) throw new ForbiddenError('A worker token may only call the worker routes (/api/workers/...); use the server token for the rest of the API. Nothing was read or changed.');
    if (!read || (reads && c.req.path.startsWith('/api/'))) {
      const what = read ? 'This server needs its token for reads too' : 'This request changes jobs';
      if (given === undefined) throw new UnauthorizedError(`${what}: send the server token as \`Authorization: Bearer <token>\` (printed when the server starts, or set with --token / SPOOL_TOKEN).`);
      if (!admin) throw new UnauthorizedError('Wrong token: this server was started with another one. Nothing was changed.');
    }
    await next();
  };
}

/** Where a server listens, for the Host check: known once it listens. */
export interface ListenAddress {
  host: string;
  port: number;
}

const LOOPBACK_NAMES = new Set(['127.0.0.1', 'localhost', '[::1]']);
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** True for the addresses only this machine reaches. */
export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.has(host.toLowerCase()) || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Refuse a request whose `Host` is not this server's address (or one of `allowed`: `name` for
 * any port, `name:port` for one), and a write whose `Origin` is another site's. A page that
 * rebinds a name of its own to this machine sends that name as Host, so it reads nothing. On a
 * wildcard address any IP literal is this server's (a rebinding needs a name); without an
 * address (the app in another host) the loopback names on any port are.
 */
export function guardHost(allowed: readonly string[], address: () => ListenAddress | undefined): MiddlewareHandler {
  const names = new Set(allowed.map((a) => a.toLowerCase()));
  return async (c, next) => {
    const host = (c.req.header('host') ?? '').toLowerCase();
    if (!hostAllowed(host, names, address())) {
      throw new HostNotAllowedError(`Host "${host.slice(0, 100)}" is not an address of this server; open it by the address it prints, or start it with --allowed-host <name> to allow that name. Nothing was read or changed.`);
    }
    const origin = c.req.header('origin');
    if (origin !== undefined && !READS.has(c.req.method) && origin.toLowerCase() !== `http://${host}` && origin.toLowerCase() !== `https://${host}`) {
      throw new CrossOriginError(`A write from ${origin.slice(0, 100)}, another origin than this server's (http://${host}), is refused. Send it from the dashboard or without an Origin header (curl, the CLI). Nothing was changed.`);
    }
    await next();
  };
}

function hostAllowed(host: string, names: ReadonlySet<string>, address: ListenAddress | undefined): boolean {
  const split = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(host);
  if (!split) return false;
  const name = split[1]!;
  const port = split[2] === undefined ? 80 : Number(split[2]);
  if (names.has(host) || names.has(name)) return true;
  if (address === undefined) return LOOPBACK_NAMES.has(name);
  if (port !== address.port) return false;
  const listening = address.host.includes(':') && !address.host.startsWith('[') ? `[${address.host}]` : address.host.toLowerCase();
  if (name === listening) return true;
  if (WILDCARDS.has(listening)) return LOOPBACK_NAMES.has(name) || isIP(name.replace(/^\[|\]$/g, '')) !== 0;
  return isLoopback(listening) && LOOPBACK_NAMES.has(name);
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
