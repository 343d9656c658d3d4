export { PostgresStore, type PostgresStoreOptions } from './PostgresStore.ts';
export { pgMigrations } from './open.ts';
export { openStore, isPostgresUrl, type OpenedStore, type OpenStoreOptions } from '../openStore.ts';
