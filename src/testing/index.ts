/**
 * Spool's test kit (`spool/testing`): a virtual clock, and exhaustive path testing of job
 * machines on the real runtime.
 *
 * @example
 * import { describeMachinePaths, runPathTests, generatePaths, VirtualClock } from 'spool/testing';
 */
export { VirtualClock } from './VirtualClock.ts';
export { listTransitions, guardName, type StaticTransition } from './transitions.ts';
export { coverageReport, assertCoverage, CoverageError, type CoverageReport, type CoverageEntry, type CoverageGap, type Waiver } from './coverage.ts';
export type { PathStep, PredictedRecord, StateView, Samples } from './model.ts';
export { SampleError } from './model.ts';
export {
  generatePaths,
  PathGenerationError,
  type PathOptions,
  type ChildPathOptions,
  type ChildMachinePaths,
  type PredictedChild,
  type GeneratedPaths,
  type PathPlan,
  type PlannedStep,
  type PredictedState,
} from './paths.ts';
export { runPath, compareRuns, PathMismatchError, type RunMode, type RunPathOptions, type RunRecord, type JobRunRecord } from './runner.ts';
export {
  runPathTests,
  pathTest,
  pathTestOptions,
  type TypedPathTestOptions,
  type SnapshotOf,
  collectPathTests,
  isPathTestSubject,
  type PathTestOptions,
  type PathTestSubject,
  type RunPathTestsOptions,
  type PathTestsResult,
  type MachinePathResult,
  type ChildMachineResult,
  type PathFailure,
  type PathTestProgress,
} from './runPathTests.ts';
export { valueMatches, type CheckedSnapshot, type Check, type CheckViolation, type NamedPath, type PathChecks, type StepSpec } from './checks.ts';
export { goldenPath, goldenOf, compareGolden, checkGolden, GOLDEN_DIR, type GoldenFile, type GoldenPath } from './golden.ts';
export { runWalks, type WalkOptions, type WalkResult } from './walks.ts';
export { mutantsOf, mutationTest, type Mutant, type MutationResult } from './mutate.ts';
export { describeMachinePaths, type DescribeMachinePathsOptions } from './describeMachinePaths.ts';
