/**
 * `spool/sql`: the SQL store written once, for driver authors. A driver (persistence/drivers/<name>
 * is the model: better-sqlite3 is synchronous, pg asynchronous) implements {@link SqlDriver} over
 * its database library (run a statement or a {@link Program}, in a write transaction or one
 * snapshot; map its faults to Spool's), migrates with {@link migrationsOf}, and passes itself to
 * {@link SqlStore}, which is the whole store port. Nothing here imports a Node built-in: a driver
 * over a WebAssembly SQLite runs the engine in a browser Worker.
 *
 * @example
 * import { SqlStore, SQLITE, migrationsOf, statementsSql, type SqlDriver } from 'spool/sql';
 */
export { SqlStore } from './SqlStore.ts';
export { andThen, locksOfCreate, jobsOfCreate, jobsOfCommit, type MaybePromise, type Locks, type WriteOptions, type WriteTx, type SqlDriver } from './driver.ts';
export { run, write, get, all, runSync, runAsync, type Call, type Program, type SyncStatement } from './program.ts';
export { statementsSql, dueClaimPickSql, type StatementName } from './statements.ts';
export { SQLITE, POSTGRES, type SqlDialect } from './predicates.ts';
export { migrationsOf, NotASpoolDatabaseError, tooNew, type Migration, type Dialect } from './migrations.ts';
export { damageReason, toEffectRecord, type Row } from './records.ts';
export { claimIn, commitOutcomeUnknown } from './commit.ts';
export { dueClaimCounts, dueClaimParams } from './dueClaims.ts';
export { failure, outcomeOf, unlessLeaseHeld, RunIsolated, LeaseHeld } from './outcomes.ts';
export { feedPageOf } from './feed.ts';
export { CHECK } from './faults.ts';
// What a synchronous SQLite driver shares with better-sqlite3's and sqlite-wasm's (node:sqlite, bun:sqlite…).
export { isSqliteFault, outcomeUnknownAtCommit, sqliteCode, sqliteStorageFault, type FaultContext } from './sqliteFaults.ts';
export { migrate as migrateSqlite, refuseForeignDatabase, refuseNewerSchema, type SqliteConnection } from './sqliteOpen.ts';
export { batchTxs, runBatch, feedPage, SQLITE_FEED_SQL } from './syncDriver.ts';
