import { PostgresStore } from './PostgresStore.ts';

/** `openStore`'s registration of this driver: a `postgres://` URL. */
export async function openPostgres(url: string, options: { poolSize?: number; leaseClock?: 'database' | 'caller' }): Promise<PostgresStore> {
  const { poolSize, leaseClock } = options;
  return PostgresStore.open(url, { ...(poolSize !== undefined ? { poolSize } : {}), ...(leaseClock ? { leaseClock } : {}) });
}
