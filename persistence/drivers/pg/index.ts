export { PostgresStore } from './PostgresStore.ts';
export type { PostgresStoreOptions } from './options.ts';
export { pgMigrations } from './open.ts';
export { openStore, isPostgresUrl, type OpenedStore, type OpenStoreOptions } from '../../openStore.ts';
