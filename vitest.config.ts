import { defineConfig } from 'vitest/config';

/** The store contract suites: every store passes them. */
const STORE_CONTRACT_FILES = [
  'test/store.contract.test.ts',
  'test/store.effects.contract.test.ts',
  'test/store.operations.contract.test.ts',
  'test/store.schedules.contract.test.ts',
  'test/store.backlog.contract.test.ts',
  'test/store.claims.contract.test.ts',
];

/**
 * The files run a second time with the SQLite store behind an asynchronous boundary
 * (test/helpers/asyncStore.ts): the store contracts and the runtime's in-process tests. Files that
 * spawn processes or drive the CLI are left out (their stores live in other processes).
 */
const ASYNC_STORE_FILES = [
  ...STORE_CONTRACT_FILES,
  'test/runtime.test.ts',
  'test/effects.test.ts',
  'test/timers.test.ts',
  'test/children.test.ts',
  'test/cancel.test.ts',
  'test/leases.test.ts',
  'test/groupCommit.test.ts',
  'test/recovery.test.ts',
  'test/poison.test.ts',
  'test/operations.test.ts',
  'test/backpressure.test.ts',
  'test/boundedRounds.test.ts',
  'test/hostDriven.test.ts',
  'test/schedules.test.ts',
  'test/sendPath.test.ts',
  'test/startMany.test.ts',
  'test/shutdown.test.ts',
  'test/activityLimits.test.ts',
  'test/wakeups.test.ts',
  'test/outcomeUnknown.test.ts',
];

/**
 * The files run a third time on a PostgresStore (test/helpers/stores.ts), a database per store,
 * on the server `.ci/run` starts (or the globalSetup, when SPOOL_TEST_PG_URL is unset): the
 * Postgres-only tests, the store contracts, and every runtime file of ASYNC_STORE_FILES. A test
 * that must arrange or check a row the port cannot write or read runs raw SQL through
 * test/helpers/rawSql.ts, which speaks to either store (the schemas have the same tables).
 */
const POSTGRES_FILES = [
  'test/postgres.pg.test.ts',
  'test/crash/crashPostgres.pg.test.ts',
  'test/migrateStore.pg.test.ts',
  'test/historyFeed.pg.test.ts',
  'test/pathTests.pg.test.ts',
  'test/leaseClock.pg.test.ts',
  'test/unseenMachines.pg.test.ts',
  'test/claimDue.pg.test.ts',
  'test/schemaDump.pg.test.ts',
  ...STORE_CONTRACT_FILES,
  'test/runtime.test.ts',
  'test/effects.test.ts',
  'test/timers.test.ts',
  'test/children.test.ts',
  'test/cancel.test.ts',
  'test/groupCommit.test.ts',
  'test/recovery.test.ts',
  'test/operations.test.ts',
  'test/backpressure.test.ts',
  'test/schedules.test.ts',
  'test/leases.test.ts',
  'test/poison.test.ts',
  'test/outcomeUnknown.test.ts',
  'test/wakeups.test.ts',
  'test/hostDriven.test.ts',
  'test/shutdown.test.ts',
  'test/activityLimits.test.ts',
  'test/sendPath.test.ts',
  'test/startMany.test.ts',
  'test/boundedRounds.test.ts',
  'test/historyFeed.test.ts',
  'test/cli-tail.test.ts',
  'test/server.streams.test.ts',
];

export default defineConfig({
  test: {
    // A bound on a hang, not a speed check: tests wait on events, and files that drive the `spool`
    // bin or child processes take several times longer on a loaded two-core machine than alone.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Three files at once on this two-core machine: most files wait on child processes, fsync and
    // the Postgres server rather than compute, and the suite runs in about half the time it takes
    // one at a time (vitest's default here: cores - 1 = 1). Tests wait on events, never on time.
    maxWorkers: 3,
    // The `spool` bin runs dist/: built first when a source changed (test/helpers/buildDist.ts).
    globalSetup: ['test/helpers/buildDist.ts'],
    projects: [
      // *.pg.test.ts: Postgres only (they need the server the postgres project starts).
      { extends: true, test: { name: 'sync', include: ['test/**/*.test.ts'], exclude: ['test/**/*.pg.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: POSTGRES_FILES,
          env: { SPOOL_TEST_STORE: 'postgres' },
          globalSetup: ['test/helpers/postgresSetup.ts'],
        },
      },
      // The store contract suites on sqlite-wasm in memory (test/helpers/stores.ts); store.contract.ts's own: test/store.sqliteWasm.contract.test.ts.
      {
        extends: true,
        test: {
          name: 'sqlite-wasm',
          include: STORE_CONTRACT_FILES.filter((f) => f !== 'test/store.contract.test.ts' && f !== 'test/store.backlog.contract.test.ts'),
          env: { SPOOL_TEST_STORE: 'sqlite-wasm' },
        },
      },
      {
        extends: true,
        test: {
          name: 'async-store',
          include: ASYNC_STORE_FILES,
          env: { SPOOL_TEST_STORE: 'async' },
          setupFiles: ['test/helpers/asyncSetup.ts'],
        },
      },
    ],
  },
});
