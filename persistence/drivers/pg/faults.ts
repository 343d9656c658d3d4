/**
 * node-postgres errors as Spool's storage faults (src/base/errors.ts), in one place, as
 * persistence/drivers/better-sqlite3/storageFault.ts does for SQLite. By SQLSTATE class, or by the socket error
 * when the connection itself failed:
 *
 * | Postgres                                               | Spool                | the caller |
 * |--------------------------------------------------------|----------------------|------------|
 * | 53100 disk full                                        | StorageFullError     | retries    |
 * | 53300 too many connections, 53200 out of memory, 53xxx  | DatabaseBusyError    | retries    |
 * | connection lost (08xxx, 57P01-03, ECONNRESET, EPIPE...) | StorageIoError       | retries    |
 * | 40001 serialisation failure, 40P01 deadlock            | StorageIoError       | retries    |
 * | 55P03 lock not available, 57014 statement timeout      | DatabaseBusyError    | retries    |
 * | 28xxx auth, 42501 privilege, 25006 read-only, 3D000 no database | StorageAccessError | fixes the configuration |
 * | XX001, XX002 data corrupted                            | DatabaseDamagedError | checks the server |
 */
import { DatabaseBusyError, DatabaseDamagedError, SpoolError, StorageAccessError, StorageFullError, StorageIoError } from '../../../src/base/errors.ts';

/** The SQLSTATE of a server error, or undefined. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

const SOCKET_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** The connection to the server failed or was lost: what was in flight has an unknown outcome. */
export function isConnectionLost(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && SOCKET_CODES.has(code)) return true;
  const state = sqlState(error);
  if (state !== undefined) return state.startsWith('08') || ['57P01', '57P02', '57P03'].includes(state);
  return error instanceof Error && /Connection terminated|connection.*(closed|ended)|Client has encountered a connection error|timeout exceeded when trying to connect/i.test(error.message);
}

/** A transaction another one got in the way of: run it again from the start. */
export function isRetryable(error: unknown): boolean {
  const state = sqlState(error);
  return state === '40001' || state === '40P01';
}

/** A fault of the server or the connection (it fails the whole call), not one write's own refusal (a constraint). */
export function isPgFault(error: unknown): boolean {
  if (isConnectionLost(error)) return true;
  const state = sqlState(error);
  if (state === undefined) return false;
  return /^(53|40|55|57|28|3D|XX)/.test(state) || state === '42501' || state === '25006';
}

/** Any error a Postgres call threw, as Spool's typed error (SpoolErrors as they are; anything unknown, a bug, as it is). */
export function pgFault(error: unknown, where: string, call?: string): unknown {
  if (error instanceof SpoolError) return error;
  const said = (error as Error | null)?.message ?? String(error);
  const state = sqlState(error);
  const at = call ? ` (${call})` : '';
  const details = { database: where, driverCode: state ?? (error as { code?: unknown } | null)?.code ?? null };
  if (isConnectionLost(error) || (state !== undefined && /^(40)/.test(state))) {
    return new StorageIoError(`The connection to ${where} failed${at}: ${said}. Nothing acknowledged was lost; try again.`, details);
  }
  if (state === undefined) return error;
  if (state === '53100') return new StorageFullError(`The server of ${where} is out of disk space${at} (${state}: ${said}). Nothing was changed; free some and try again.`, details);
  if (state.startsWith('53')) {
    const what = state === '53300' ? 'has no connection to spare' : state === '53200' ? 'is out of memory' : 'is out of resources';
    return new DatabaseBusyError(`The server of ${where} ${what}${at} (${state}: ${said}). Nothing was changed; try again, or raise the server's limit if this persists.`, details);
  }
  if (state === '55P03' || state === '57014') return new DatabaseBusyError(`${where} stayed locked past the timeout${at} (${state}: ${said}). Nothing was changed; try again.`, details);
  if (/^(28|3D)/.test(state) || state === '42501' || state === '25006') {
    return new StorageAccessError(`${where} cannot be used${at} (${state}: ${said}): check the URL, the user's rights and that the server accepts writes.`, details);
  }
  if (state.startsWith('XX')) return new DatabaseDamagedError(`The server reports damaged data in ${where}${at} (${state}: ${said}). Check the server and restore from a backup.`, details);
  return error;
}
