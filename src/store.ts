/**
 * `spool/store`: for store authors. The store port (`JobStore`), its records and rules as data, the
 * clock it is given, and the faults a store throws. The bundled stores (`spool/sqlite`,
 * `spool/postgres`, `spool/memory`) implement this port; docs/store-port.md is its contract.
 *
 * @example
 * import type { JobStore, TransitionCommit, CommitResult } from 'spool/store';
 */
export * from './ports/store.ts';
export { systemClock, type Clock } from './ports/clock.ts';
export {
  SpoolError, type ErrorCategory, StorageFullError, StorageIoError, DatabaseBusyError, StorageAccessError, DatabaseDamagedError,
  CorruptRecordError, SchemaTooNewError,
} from './base/errors.ts';
