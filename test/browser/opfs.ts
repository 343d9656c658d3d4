/**
 * In a test or bench Worker: sqlite-wasm's module and the OPFS SAH pool `name`, made on first use
 * and kept (the pool's install waits out a reloaded page's old Worker: installPool).
 */
import sqlite3InitModule, { type SAHPoolUtil, type Sqlite3Static } from '@sqlite.org/sqlite-wasm';
import { installPool } from '../../persistence/drivers/sqlite-wasm/pool.ts';

/** A function giving the module and the pool, each made once (the module: `made`, when given one the caller timed). */
export function opfsOnce(name: string): (made?: Sqlite3Static) => Promise<{ sqlite3: Sqlite3Static; pool: SAHPoolUtil }> {
  let sqlite3: Sqlite3Static | undefined;
  let pool: SAHPoolUtil | undefined;
  return async (made) => {
    sqlite3 ??= made ?? (await sqlite3InitModule());
    pool ??= await installPool(sqlite3, name);
    return { sqlite3, pool };
  };
}
