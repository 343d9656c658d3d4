/**
 * Writes need the server's bearer token (`Authorization: Bearer <token>`). Reads do not: the
 * server listens on 127.0.0.1 unless told otherwise, and what it shows is redacted.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { ValidationError } from '../index.ts';
import { UnauthorizedError } from './errors.ts';

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

/** Refuse every request but a read without the token, before its body is read. */
export function requireTokenForWrites(token: string): MiddlewareHandler {
  const expected = digest(token);
  return async (c, next) => {
    if (!READS.has(c.req.method)) {
      const header = c.req.header('authorization');
      const given = header?.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : undefined;
      if (given === undefined) throw new UnauthorizedError('This request changes jobs: send the server token as `Authorization: Bearer <token>` (printed when the server starts, or set with --token / SPOOL_TOKEN).');
      // Digests of equal length, compared in constant time.
      if (!timingSafeEqual(digest(given), expected)) throw new UnauthorizedError('Wrong token: this server was started with another one. Nothing was changed.');
    }
    await next();
  };
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
