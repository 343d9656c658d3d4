/**
 * vitest globalSetup: a PostgreSQL server for the run when `SPOOL_TEST_PG_URL` is not set (see
 * test/helpers/postgres.ts), stopped at the end. With the variable set (`.ci/run` starts one), nothing.
 */
import { startPostgres } from './postgres.ts';

export default async function setup(): Promise<(() => void) | void> {
  if (process.env['SPOOL_TEST_PG_URL']) return;
  const server = await startPostgres();
  process.env['SPOOL_TEST_PG_URL'] = server.url;
  return () => server.stop();
}
