import type { SAHPoolUtil, Sqlite3Static } from '@sqlite.org/sqlite-wasm';

/**
 * The OPFS SAH-pool VFS named `name`, installed (for {@link openSqliteWasmStore}'s `pool`). A page
 * reloaded a moment ago may still hold the pool's files in the Worker it tore down (one holder at
 * a time): the install is tried again, every 100 ms for 5 s at most, until the browser has let
 * them go. Another tab that keeps them open makes it throw sqlite-wasm's error after that.
 *
 * @example
 * // In a Worker:
 * const sqlite3 = await sqlite3InitModule();
 * const store = await openSqliteWasmStore({ sqlite3, pool: await installPool(sqlite3, 'my-app'), path: '/spool.db' });
 */
export async function installPool(sqlite3: Sqlite3Static, name: string): Promise<SAHPoolUtil> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await sqlite3.installOpfsSAHPoolVfs({ name });
    } catch (error) {
      if (attempt >= 50) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
