export { PostgresStore, type PostgresStoreOptions } from './PostgresStore.ts';
export { pgMigrations } from './open.ts';
