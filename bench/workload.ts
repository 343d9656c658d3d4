import { initialTransition, transition, type AnyMachineSnapshot } from 'xstate';
import { jobLifecycle } from '../machines/index.ts';

/**
 * The one workload every figure uses: a `job-lifecycle` job in `processing` receiving PROGRESS
 * events. PROGRESS stays in the same state and applies an `assign`, so every event is a
 * transition that commits (status `applied`), one event per commit.
 */
export const MACHINE_ID = 'job-lifecycle';
export const JOB_INPUT = { name: 'bench' } as const;
export const WORKLOAD = 'job-lifecycle: one job in `processing`, PROGRESS events (assign, same state), awaited one by one';

export function progressEvent(i: number): { type: 'PROGRESS'; percent: number } {
  return { type: 'PROGRESS', percent: i % 101 };
}

/**
 * The persisted snapshot a Spool job of this workload stores, as an object: the raw limit
 * writes the same JSON (with `context.progress` changing) so both sides move the same bytes.
 */
export function persistedSnapshotTemplate(): Record<string, unknown> & { context: Record<string, unknown> } {
  const machine = jobLifecycle.machine;
  const [s0] = initialTransition(machine, JOB_INPUT);
  const [s1] = transition(machine, s0 as AnyMachineSnapshot, { type: 'START' });
  return JSON.parse(JSON.stringify(machine.getPersistedSnapshot(s1))) as Record<string, unknown> & { context: Record<string, unknown> };
}
