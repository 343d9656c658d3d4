/** `PostgresStore.open`'s options: what they are, and their check (a typed error for a bad one, before anything connects). */
import type { Clock } from '../../../src/ports/clock.ts';
import { ValidationError } from '../../../src/base/errors.ts';

/** Options of {@link PostgresStore.open}. */
export interface PostgresStoreOptions {
  /** Connections in the pool (each in-flight transaction takes one). Default 10. */
  poolSize?: number;
  /** How long a statement may wait for a row lock before it fails as busy, in ms. Default 5000. */
  lockTimeoutMs?: number;
  /** Clock for the store's own bookkeeping (when a migration was applied). Default: real time. */
  clock?: Clock;
  /**
   * The clock leases and activity claims are judged by (src/ports/store.ts, "Lease clocks").
   * `'database'` (the default): the server's, so runtimes on hosts whose clocks disagree never
   * both hold a job. `'caller'`: each call's own `now`, as SQLite judges them; for tests that
   * expire leases by moving an injected clock (the server's clock does not follow it). Never in
   * production with more than one host: a host whose clock runs ahead takes live leases over.
   */
  leaseClock?: 'database' | 'caller';
}

const OPEN_OPTIONS = ['poolSize', 'lockTimeoutMs', 'clock', 'leaseClock'] as const;

/** The URL without its password, for messages. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

/** Refuse a URL that is not a Postgres one, and options that are not {@link PostgresStoreOptions}, with a typed error. */
export function checkOptions(url: unknown, options: unknown): void {
  const refuse = (message: string, option?: string): never => {
    throw new ValidationError(`PostgresStore.open: ${message}.`, option ? { option } : {});
  };
  if (typeof url !== 'string' || !/^postgres(ql)?:\/\//.test(url)) refuse('the URL must be a postgres:// or postgresql:// URL');
  if (options === null || typeof options !== 'object' || Array.isArray(options)) refuse('options must be an object');
  const o = options as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(OPEN_OPTIONS as readonly string[]).includes(k));
  if (unknown.length > 0) refuse(`unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${OPEN_OPTIONS.join(', ')})`, unknown[0]);
  for (const name of ['poolSize', 'lockTimeoutMs'] as const) {
    const v = o[name];
    if (v !== undefined && !(typeof v === 'number' && Number.isSafeInteger(v) && v >= (name === 'poolSize' ? 1 : 0))) refuse(`${name} must be a whole number${name === 'poolSize' ? ', 1 or more' : ' of ms'}`, name);
  }
  if (o['clock'] !== undefined && typeof (o['clock'] as { now?: unknown } | null)?.now !== 'function') refuse('clock must be a Clock: { now(): number }', 'clock');
  if (o['leaseClock'] !== undefined && o['leaseClock'] !== 'database' && o['leaseClock'] !== 'caller') refuse("leaseClock must be 'database' or 'caller'", 'leaseClock');
}
