export { SqliteStore, loadMigrations, type SqliteStoreOptions } from './SqliteStore.ts';
