export { DatabaseBusyError, NotASpoolDatabaseError, SqliteStore, loadMigrations, type SqliteStoreOptions } from './SqliteStore.ts';
