import { join } from 'node:path';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { Resources } from './helpers/resources.ts';
import { storeContract } from './store.contract.ts';
import { storeUnderTest } from './helpers/asyncStore.ts';
import { ON_POSTGRES, postgresContractStore } from './helpers/stores.ts';

storeContract(ON_POSTGRES ? 'PostgresStore' : 'SqliteStore (file)', async () => {
  if (ON_POSTGRES) return postgresContractStore();
  const res = new Resources();
  const store = storeUnderTest(await SqliteStore.open(join(res.tempDir(), 'contract.db')));
  return {
    store,
    dispose: async () => {
      if (store.db.open) throw new Error('the contract suite left the SQLite store open');
      await res.dispose();
    },
  };
});
