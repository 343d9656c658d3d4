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
import { CrossOriginError, HostNotAllowedError, UnauthorizedError } from './errors.ts';

/** Where the token came from: given (an option or `SPOOL_TOKEN`), or made up at start (then printed). */
export interface ServerToken {
  token: string;
  generated: boolean;
}

/** The token given, else `SPOOL_TOKEN`, else a new random one (32 bytes, base64url). */
export function resolveToken(given: string | undefined, env: NodeJS.ProcessEnv = process.env): ServerToken {
  const token = given ?? env['SPOOL_TOKEN'];
  if (token === undefined || token === '') return { token: randomBytes(32).toString('base64url'), generated: true };
  if (!/^[\x21-\x7e]{16,512}$/.test(token)) throw new ValidationError('The server token must be 16-512 printable ASCII characters without spaces.');
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
 * reads without it too (the dashboard's page and files stay open: they hold no data).
 */
export function requireToken(token: string, reads: boolean): MiddlewareHandler {
  const expected = digest(token);
  return async (c, next) => {
    const read = READS.has(c.req.method);
    if (!read || (reads && c.req.path.startsWith('/api/'))) {
      const given = givenToken(c);
      const what = read ? 'This server needs its token for reads too' : 'This request changes jobs';
      if (given === undefined) throw new UnauthorizedError(`${what}: send the server token as \`Authorization: Bearer <token>\` (printed when the server starts, or set with --token / SPOOL_TOKEN).`);
      // Digests of equal length, compared in constant time.
      if (!timingSafeEqual(digest(given), expected)) throw new UnauthorizedError('Wrong token: this server was started with another one. Nothing was changed.');
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
