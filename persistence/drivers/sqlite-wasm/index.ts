export { openSqliteWasmStore, SqliteWasmStore, type SqliteWasmStoreOptions } from './SqliteWasmStore.ts';
export { SqliteWasmError } from './statements.ts';
export { installPool } from './pool.ts';
