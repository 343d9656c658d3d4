import { defineConfig } from 'vitest/config';

/**
 * The files run a second time with the SQLite store behind an asynchronous boundary
 * (test/helpers/asyncStore.ts): the store contracts and the runtime's in-process tests. Files that
 * spawn processes or drive the CLI are left out (their stores live in other processes).
 */
const ASYNC_STORE_FILES = [
  'test/store.contract.test.ts',
  'test/store.effects.contract.test.ts',
  'test/store.operations.contract.test.ts',
  'test/store.schedules.contract.test.ts',
  'test/store.backlog.contract.test.ts',
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
  'test/shutdown.test.ts',
  'test/activityLimits.test.ts',
  'test/wakeups.test.ts',
  'test/outcomeUnknown.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The `spool` bin runs dist/: built first when a source changed (test/helpers/buildDist.ts).
    globalSetup: ['test/helpers/buildDist.ts'],
    projects: [
      { extends: true, test: { name: 'sync', include: ['test/**/*.test.ts'] } },
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
