/** Spool's reference job machines. Each is a plain definition: pure XState + zod. */
export { jobLifecycle } from './jobLifecycle.ts';
