/** Spool's reference job machines. Each is a plain definition: pure XState + zod. */
export { jobLifecycle } from './jobLifecycle.ts';
export { retryingJob } from './retryingJob.ts';
export { exportJob } from './exportJob.ts';
export { approvalFlow } from './approvalFlow.ts';
export { pathTests } from './pathTests.ts';
