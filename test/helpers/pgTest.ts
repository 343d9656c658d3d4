/**
 * What a `*.pg.test.ts` file makes per test, released after each (in reverse order, by the
 * `afterEach` this registers): fresh databases on the run's server and stores open on them.
 */
import { afterEach } from 'vitest';
import { PostgresStore, type PostgresStoreOptions } from '../../persistence/drivers/pg/index.ts';
import { freshDatabase } from './postgres.ts';

export function perTestPostgres(): {
  /** Run after the test (later ones first). */
  cleanups: Array<() => Promise<void>>;
  /** A fresh database's URL, dropped after the test. */
  database: () => Promise<string>;
  /** A store on `url`, closed after the test. */
  open: (url: string, options?: PostgresStoreOptions) => Promise<PostgresStore>;
} {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return {
    cleanups,
    database: async () => {
      const db = await freshDatabase();
      cleanups.push(db.drop);
      return db.url;
    },
    open: async (url, options = {}) => {
      const store = await PostgresStore.open(url, options);
      cleanups.push(() => store.close());
      return store;
    },
  };
}
