import fc from 'fast-check';
import type { CheckViolation } from './checks.ts';
import type { ModelState, PathStep } from './model.ts';
import { checkAlong, planOf, type GeneratedPaths, type PathPlan } from './paths.ts';

/**
 * Random walks over the same model as the paths: events (each sample), timers, activity outcomes
 * and interrupts chosen at random, the invariants and state expectations checked on every
 * committed snapshot. A failing walk is shrunk (fast-check) to the shortest one that still fails.
 */
export interface WalkOptions {
  /** Walks to try. Default 200. */
  runs?: number;
  /** Most steps per walk. Default 20. */
  steps?: number;
  /** The seed: the same seed walks the same way (`spool test --seed`). Default: a new one each run, printed. */
  seed?: number;
  /** Time budget for the walks in ms (shrinking included). Default 2000. */
  timeMs?: number;
  /** Walks also replayed on the real runtime (their first 10 steps), with a restart between every two steps. Default 1. */
  replay?: number;
}

export interface WalkResult {
  seed: number;
  /** Walks tried (fewer than asked when the time budget ran out). */
  runs: number;
  /** The shrunk failing walk, or null. */
  violation: CheckViolation | null;
  /** Walks to replay on the runtime (each a path; ids from 10001). */
  replay: PathPlan[];
}

/** Steps of a walk replayed on the runtime. */
const REPLAY_STEPS = 10;

/** A walk: the input, and one choice per step (an index into the steps possible then). */
type Walk = [number, number[]];

/** The steps a walk takes: each choice picks among the steps possible in the state reached; it stops where none is. */
function stepsOf(generated: GeneratedPaths, [inputIndex, choices]: Walk): PathStep[] {
  const { model } = generated;
  let state: ModelState = model.initial(generated.inputs[inputIndex]);
  const steps: PathStep[] = [];
  for (const choice of choices) {
    const possible = model.steps(state);
    if (possible.length === 0) break;
    const step = possible[choice % possible.length]!;
    state = model.step(state, step);
    steps.push(step);
  }
  return steps;
}

/** Walk the model at random from a seed; shrink a walk that breaks a check. */
export function runWalks(generated: GeneratedPaths, options: WalkOptions = {}): WalkResult {
  const seed = options.seed ?? (Math.random() * 0x7fffffff) | 0;
  const arbitrary = fc.tuple(fc.nat({ max: Math.max(0, generated.inputs.length - 1) }), fc.array(fc.nat({ max: 1_000_000 }), { minLength: 1, maxLength: options.steps ?? 20 }));
  const violationOf = (walk: Walk): CheckViolation | null =>
    checkAlong(generated.model, generated.checker, generated.inputs[walk[0]], stepsOf(generated, walk), undefined, walk[0]);
  let runs = 0;
  let violation: CheckViolation | null = null;
  if (!generated.checker.empty) {
    const details = fc.check(
      fc.property(arbitrary, (walk) => violationOf(walk) === null),
      { seed, numRuns: options.runs ?? 200, interruptAfterTimeLimit: options.timeMs ?? 2000, markInterruptAsFailure: false },
    );
    runs = details.numRuns;
    if (details.failed && details.counterexample) {
      const found = violationOf(details.counterexample[0]);
      if (found) violation = { ...found, message: `random walk (seed ${seed}, shrunk to ${found.steps.length} steps; replay with --seed ${seed}): ${found.message}` };
    }
  }
  const replay = fc.sample(arbitrary, { seed, numRuns: options.replay ?? 1 }).map((walk, i) => {
    // The first REPLAY_STEPS steps only: a runtime replay with restarts costs far more than a model step.
    const steps = stepsOf(generated, [walk[0], walk[1].slice(0, REPLAY_STEPS)]);
    const p = planOf(generated, walk[0], steps, 10_001 + i);
    p.name = `walk ${i + 1} (seed ${seed}): ${p.name}`;
    return p;
  });
  return { seed, runs, violation, replay };
}
