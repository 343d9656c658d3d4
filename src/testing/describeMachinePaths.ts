import type { AnyStateMachine } from 'xstate';
import type { JobDefinition } from '../index.ts';
import { assertCoverage, CoverageError } from './coverage.ts';
import { generatePaths, type GeneratedPaths, type PathPlan } from './paths.ts';
import { childSample, isPathTestSubject, type PathTestOptions, type PathTestSubject } from './runPathTests.ts';
import { compareRuns, runPath, type RunPathOptions, type RunRecord } from './runner.ts';
import { checkGolden, goldenPath } from './golden.ts';
import { runWalks } from './walks.ts';

/** The part of vitest describeMachinePaths uses, typed here so that an app without vitest type-checks. */
interface VitestApi {
  describe(name: string, fn: () => void): void;
  test(name: string, fn: () => unknown, timeout?: number): void;
}

/**
 * vitest, when it is installed: only describeMachinePaths needs it (it registers vitest tests);
 * the rest of `spool/testing` (VirtualClock, generatePaths, runPathTests) loads, and type-checks,
 * without it (the specifier is a variable, so a compiler does not look the module up).
 */
const VITEST = 'vitest';
const vitest = (await import(VITEST).catch(() => undefined)) as VitestApi | undefined;

/** Options of {@link describeMachinePaths}. */
export interface DescribeMachinePathsOptions extends PathTestOptions {
  /** Also replay every path with the runtime closed and reopened between every two steps. Default true. */
  crash?: boolean;
  /** Paths also replayed in child processes SIGKILLed between steps, the ones most worth it first (interrupted attempts, then timers and retries, then most steps). Default 0 (needs `module`). */
  childCrash?: number;
  /** Where the temporary SQLite files go (a fresh directory per run, removed after it). Default: the OS temp directory. */
  dir?: string;
  /** Per-test timeout in ms for the child-process runs. Default 60000. */
  childTimeoutMs?: number;
  /** Write the golden file (`golden`) instead of comparing with it. Default: the environment variable `SPOOL_UPDATE=1`. */
  update?: boolean;
}

/**
 * Generate the paths of a machine and register vitest tests for them (call it at the top level
 * of a test file, or inside a `describe`): one coverage test that fails with the exact gaps, one
 * test per path named by its steps that drives the real runtime (SQLite file, virtual clock,
 * scripted activities), and, by default, the same path with a restart between every two steps.
 * Returns the generated paths and coverage, for further assertions.
 *
 * @example
 * // test/approvalFlow.paths.test.ts
 * import { describeMachinePaths } from 'spool/testing';
 * import { approvalFlow } from '../machines/approvalFlow.ts';
 *
 * describeMachinePaths(approvalFlow, {
 *   input: { subject: 'deploy', remindAfterMs: 1000, deadlineMs: 5000 },
 *   events: { REMIND: [], APPROVE: { by: 'ann' }, REJECT: { by: 'bob', reason: 'no' } },
 *   childCrash: 1,
 *   module: 'machines/approvalFlow.ts',
 * });
 */
export function describeMachinePaths(
  definition: JobDefinition | AnyStateMachine | PathTestSubject,
  options: DescribeMachinePathsOptions = {},
): GeneratedPaths | undefined {
  if (!vitest) throw new Error('describeMachinePaths registers vitest tests: install vitest (npm i -D vitest) and call it in a test file. runPathTests runs the same checks without it.');
  const { describe, test } = vitest;
  const subject = isPathTestSubject(definition) ? definition : { definition, options: {} };
  const opts: DescribeMachinePathsOptions = { ...subject.options, ...options };
  let generated: GeneratedPaths | undefined;
  let failure: unknown;
  try {
    generated = generatePaths(subject.definition, opts);
  } catch (error) {
    failure = error;
  }
  const title = generated ? `${generated.machineId}@${generated.version}: paths` : 'machine paths';
  describe(title, () => {
    if (!generated) {
      test('generates paths', () => {
        throw failure;
      });
      return;
    }
    testCoverage(test, generated);
    testChecks(test, generated, opts);
    testPaths(test, generated, opts);
    testWalks(test, generated, opts);
  });
  return generated;
}

/** The coverage test, named by its counts (the child machines' too): it fails with every gap. */
function testCoverage(test: VitestApi['test'], g: GeneratedPaths): void {
  const childCounts = g.children.map((c) => `; ${c.machineId} ${c.coverage.covered}/${c.transitions.length}${c.coverage.waived ? ` (+${c.coverage.waived} waived)` : ''}`).join('');
  test(`covers every transition (${g.coverage.covered}/${g.transitions.length} covered, ${g.coverage.waived} waived, ${g.states} states${childCounts})`, () => {
    // The machine's own transitions, then each child machine's: one error naming every gap.
    const errors: CoverageError[] = [];
    for (const report of [g.coverage, ...g.children.map((c) => c.coverage)]) {
      try {
        assertCoverage(report);
      } catch (error) {
        if (!(error instanceof CoverageError)) throw error;
        errors.push(error);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new Error(errors.map((e) => e.message).join('\n'));
  });
}

/** The invariants and expectations (when declared), and the golden file (with `golden`). */
function testChecks(test: VitestApi['test'], g: GeneratedPaths, opts: DescribeMachinePathsOptions): void {
  if (!g.checker.empty || opts.paths !== undefined) {
    test('invariants and expectations hold on every explored state and path', () => {
      if (g.violations.length > 0) throw new Error(g.violations.map((v) => v.message).join('\n'));
    });
  }
  if (opts.golden !== undefined && opts.golden !== false) {
    const golden = opts.golden;
    test('paths end as the golden file says', () => {
      const file = goldenPath(golden, g.machineId, opts.module);
      const { diffs } = checkGolden(file, g, opts.update ?? process.env['SPOOL_UPDATE'] === '1');
      if (diffs.length > 0) throw new Error(diffs.map((d) => d.message).join('\n'));
    });
  }
}

/** Random walks (a failing one shrunk), and the replayed ones with a restart between steps. Seed: `walks.seed`, or env `SPOOL_SEED`. */
function testWalks(test: VitestApi['test'], g: GeneratedPaths, opts: DescribeMachinePathsOptions): void {
  if (opts.walks === false) return;
  const seed = process.env['SPOOL_SEED'] !== undefined ? Number(process.env['SPOOL_SEED']) : undefined;
  const walks = runWalks(g, { ...(opts.walks ?? {}), ...(seed !== undefined ? { seed } : {}) });
  if (!g.checker.empty) {
    // Names without the seed (it changes every run): the failure message says it.
    test('random walks keep the invariants', () => {
      if (walks.violation) throw new Error(walks.violation.message);
    });
  }
  for (const [i, walk] of walks.replay.entries()) {
    test(`random walk ${i + 1}, restart between steps`, async () => {
      await runPath(g, walk, { ...(opts.dir !== undefined ? { dir: opts.dir } : {}), ...(opts.compareContext !== undefined ? { compareContext: opts.compareContext } : {}), mode: 'restart' });
    });
  }
}

/**
 * A test per path, the same path with a restart between steps (unless `crash: false`), and the
 * child-crash sample; a crash run compares with the path's uninterrupted run, made once.
 */
function testPaths(test: VitestApi['test'], g: GeneratedPaths, opts: DescribeMachinePathsOptions): void {
  const runOptions: RunPathOptions = {
    ...(opts.dir !== undefined ? { dir: opts.dir } : {}),
    ...(opts.compareContext !== undefined ? { compareContext: opts.compareContext } : {}),
    ...(opts.synchronous !== undefined ? { synchronous: opts.synchronous } : {}),
  };
  const plainRuns = new Map<number, Promise<RunRecord>>();
  const plain = (path: PathPlan): Promise<RunRecord> => {
    let run = plainRuns.get(path.id);
    if (!run) {
      run = runPath(g, path, { ...runOptions, mode: 'plain' });
      run.catch(() => undefined);
      plainRuns.set(path.id, run);
    }
    return run;
  };
  const uninterrupted = async (path: PathPlan): Promise<RunRecord> => {
    try {
      return await plain(path);
    } catch (error) {
      throw new Error(`The uninterrupted run of path ${path.id} failed, so there is nothing to compare with: ${(error as Error).message}`);
    }
  };

  for (const path of g.paths) {
    test(`path ${path.id}: ${path.name}`, async () => {
      await plain(path);
    });
    if (opts.crash ?? true) {
      test(`path ${path.id}, restart between steps: ${path.name}`, async () => {
        const before = await uninterrupted(path);
        compareRuns(path, 'restart', before, await runPath(g, path, { ...runOptions, mode: 'restart' }));
      });
    }
  }
  const sample = childSample(g.paths, opts.childCrash ?? 0);
  for (const path of sample) {
    test(
      `path ${path.id}, child process SIGKILLed between steps: ${path.name}`,
      async () => {
        if (!opts.module) throw new Error('childCrash needs `module`: the module that exports this definition, for the child processes to import.');
        const before = await uninterrupted(path);
        compareRuns(path, 'child', before, await runPath(g, path, { ...runOptions, mode: 'child', module: opts.module }));
      },
      opts.childTimeoutMs ?? 60_000,
    );
  }
}
