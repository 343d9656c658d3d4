/**
 * Setup file of the `async-store` test project (see vitest.config.ts): before each test, the
 * asynchronous store boundary draws its hops from that test's seeds, and a failed test prints the
 * seed that replays it.
 */
import { beforeEach } from 'vitest';
import { ASYNC_SEED, enterTest } from './asyncStore.ts';

beforeEach((context) => {
  enterTest(context.task.fullName);
  context.onTestFailed(() => {
    console.error(`async store: replay "${context.task.fullName}" with SPOOL_ASYNC_SEED=${ASYNC_SEED}`);
  });
});
