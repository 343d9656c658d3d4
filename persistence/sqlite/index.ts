export { NotASpoolDatabaseError, SqliteStore, loadMigrations, type SqliteStoreOptions } from './SqliteStore.ts';
