import type { SAHPoolUtil, Sqlite3Static } from '@sqlite.org/sqlite-wasm';

/**
 * The OPFS SAH-pool VFS named `name`, installed. A page reloaded a moment ago may still hold the
 * pool's files in the Worker it tore down: the install is tried again (every 100 ms, 5 s at most)
 * until the browser has let them go.
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
