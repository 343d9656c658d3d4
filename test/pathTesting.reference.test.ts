/**
 * Exhaustive path tests of the reference machines: every transition covered, every path driven
 * through the real runtime, again with a restart between every two steps, and a sample in
 * child processes SIGKILLed between steps.
 */
import { expect, test } from 'vitest';
import { describeMachinePaths } from '../src/testing/index.ts';
import { jobLifecyclePaths, referencePaths } from './fixtures/referencePaths.ts';

for (const subject of referencePaths) {
  // One path per machine in SIGKILLed child processes, where it has time, retries or an interrupted
  // attempt (job-lifecycle has neither: its restart runs cover it, and spawning costs ~1 s a step).
  const childCrash = subject === jobLifecyclePaths ? 0 : 1;
  const generated = describeMachinePaths(subject, { crash: true, childCrash, module: 'test/fixtures/referencePaths.ts' });

  test(`${generated?.machineId ?? 'a reference machine'}: 100% of its transitions are covered, none waived`, () => {
    expect(generated).toBeDefined();
    const { coverage, transitions } = generated!;
    expect(coverage.gaps).toEqual([]);
    expect(coverage.waived).toBe(0);
    expect(coverage.covered).toBe(transitions.length);
    expect(transitions.length).toBeGreaterThan(4);
  });
}
