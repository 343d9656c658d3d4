/** Spool's test kit (`spool/testing`). */
export { VirtualClock } from './VirtualClock.ts';
