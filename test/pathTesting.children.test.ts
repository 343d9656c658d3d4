/**
 * Path tests of a machine that invokes a child machine: the child runs as a child job with its
 * own `after` timer (fired through the clock) and activity (answered with complete/fail,
 * retried, interrupted), talks back with `sendParent`, settles the parent's invocation when it
 * ends, and is stopped when the parent leaves the invoking state. Every transition of the parent
 * and of the child is covered; every path passes plainly, with a restart between every two
 * steps, and (a sample) in SIGKILLed child processes; and through `spool test`.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runSpool, type CliRun } from './helpers/spoolCli.ts';
import {
  PathMismatchError,
  SampleError,
  collectPathTests,
  describeMachinePaths,
  generatePaths,
  isPathTestSubject,
  runPath,
  runPathTests,
  type PathPlan,
  type PathTestProgress,
} from '../src/testing/index.ts';
import * as childMachines from './fixtures/childPathMachines.ts';
import { checker, reviewFlow, reviewFlowDefinition, reviewFlowPaths, teamPaths, worker } from './fixtures/childPathMachines.ts';

const MODULE = 'test/fixtures/childPathMachines.ts';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = join(ROOT, '.vitest-tmp', `children-${randomBytes(6).toString('hex')}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Coverage, one test per path, the same path with a restart between every two steps, and the two
// paths most worth it (the interrupted child attempt first) in SIGKILLed child processes.
const generated = describeMachinePaths(reviewFlowPaths, { crash: true, childCrash: 2, module: MODULE, dir })!;
// Two child jobs of one child machine at once, their timers due at the same instant.
const team = describeMachinePaths(teamPaths, { crash: true, childCrash: 1, module: MODULE, dir })!;

const stepNames = (p: PathPlan) => p.steps.map((s) => s.label);
const pathWith = (label: string) => generated.paths.find((p) => stepNames(p).includes(label));

describe('what the generated paths of a machine with a child machine exercise', () => {
  test('every transition of the parent and of the child machine is covered, none waived', () => {
    expect(generated.coverage.gaps).toEqual([]);
    expect(generated.coverage.waived).toBe(0);
    expect(generated.coverage.covered).toBe(generated.transitions.length);
    expect(generated.children.map((c) => c.machineId)).toEqual(['review-flow.checker']);
    const child = generated.children[0]!;
    expect(child.src).toBe('checker');
    expect(child.coverage.gaps).toEqual([]);
    expect(child.coverage.waived).toBe(0);
    expect(child.coverage.covered).toBe(child.transitions.length);
    expect(child.transitions.map((t) => t.label)).toEqual([
      'linting --xstate.done.actor.lint [lintOk]--> reading',
      'linting --xstate.done.actor.lint (fallback #2)--> rejected',
      'linting --xstate.error.actor.lint [indeterminate]--> rejected',
      'linting --xstate.error.actor.lint (fallback #2)--> rejected',
      'reading --NOTE--> (actions only)',
      'reading --APPROVE--> approved',
      'reading --REJECT--> rejected',
      'reading --xstate.after.1000.checker.reading--> (actions only)',
    ]);
  });

  test('the child job is created in the parent commit, with its id, its first record and its retried activity', () => {
    const path = generated.paths[0]!;
    const submit = path.steps[0]!;
    expect(submit.label).toBe('SUBMIT');
    expect(submit.expect.children).toEqual([
      {
        path: 'check',
        jobId: 'path-test~check~r2',
        machineId: 'review-flow.checker',
        value: 'linting',
        context: { doc: 'spec', notes: 0, approved: false, lost: false },
        status: 'active',
        records: [{ eventType: 'xstate.init', outcome: 'started', from: null, to: 'linting' }],
        taken: [],
      },
    ]);
    // Its first lint attempt fails (failAttempts: 1): the retry is the next wake-up of the runtime.
    expect(path.steps[1]!.label).toBe('time+300ms[retry]');
  });

  test("the child's after timer fires through the clock, and its sendParent reaches the parent", () => {
    const path = pathWith('time+1s[after.1000@check, REMINDER]')!;
    expect(path).toBeDefined();
    const step = path.steps.find((s) => s.label === 'time+1s[after.1000@check, REMINDER]')!;
    expect(step.expect.records).toEqual([{ eventType: 'REMINDER', outcome: 'applied', from: 'reviewing', to: 'reviewing' }]);
    expect(step.expect.context).toMatchObject({ reminded: 1 });
    expect(step.expect.children[0]!.records).toEqual([{ eventType: 'xstate.after.1000.checker.reading', outcome: 'applied', from: 'reading', to: 'reading' }]);
  });

  test("the child's activity is answered on the child job, and the parent forwards notes with sendTo", () => {
    const done = pathWith('done.lint{ok:true}@check')!;
    const step = done.steps.find((s) => s.label === 'done.lint{ok:true}@check')!;
    expect(step.step).toMatchObject({ via: 'done', actorId: 'lint', child: 'check', output: { ok: true } });
    expect(step.expect.records).toEqual([{ eventType: 'LINTED', outcome: 'applied', from: 'reviewing', to: 'reviewing' }]);
    const forward = generated.paths.find((p) => stepNames(p).join(' ') === 'SUBMIT time+300ms[retry] done.lint{ok:true}@check FORWARD')!;
    const last = forward.steps.at(-1)!.expect;
    expect(last.records.map((r) => r.eventType)).toEqual(['FORWARD', 'NOTED']);
    expect(last.children[0]!.records).toEqual([{ eventType: 'NOTE', outcome: 'applied', from: 'reading', to: 'reading' }]);
    expect(last.context).toMatchObject({ noted: 1 });
  });

  test('an interrupted attempt of the child activity is recovered as indeterminate (unsafe to repeat)', () => {
    const path = pathWith('crash.lint@check')!;
    const step = path.steps.at(-1)!;
    expect(step.step).toEqual({ via: 'interrupt', type: 'spool.interrupt', actorId: 'lint', child: 'check' });
    expect(step.expect.children[0]!).toMatchObject({ value: 'rejected', status: 'done', context: { lost: true } });
    expect(step.expect.records).toEqual([{ eventType: 'xstate.done.actor.check', outcome: 'applied', from: 'reviewing', to: 'draft' }]);
  });

  test("the child's final state settles the parent's invocation with its output", () => {
    const path = pathWith('APPROVE@check')!;
    const last = path.steps.at(-1)!.expect;
    expect(last.value).toBe('published');
    expect(last.context).toMatchObject({ result: { approved: true, notes: 0, lost: false } });
    expect(last.records).toEqual([{ eventType: 'xstate.done.actor.check', outcome: 'applied', from: 'reviewing', to: 'published' }]);
    expect(last.children[0]!).toMatchObject({ status: 'done', value: 'approved' });
  });

  test('leaving the invoking state stops the child job (withdrawn, or expired by the parent timer)', () => {
    const withdrawn = pathWith('WITHDRAW')!.steps.at(-1)!.expect;
    expect(withdrawn.children[0]!).toMatchObject({ status: 'stopped', records: [{ eventType: 'xstate.stop', outcome: 'applied', from: 'linting', to: 'linting' }] });
    const expired = generated.paths.find((p) => p.name.endsWith('⇒ expired'))!.steps.at(-1)!;
    expect(expired.label).toBe('time+4700ms[after.5000]');
    expect(expired.expect.children[0]!).toMatchObject({ status: 'stopped' });
  });

  test('on the runtime, a stopped child job keeps nothing running: its waiting activity is cancelled', async () => {
    const path = generated.paths.find((p) => p.name.endsWith('⇒ expired'))!;
    const record = await runPath(generated, path, { dir });
    expect(record.children.map((c) => [c.id, c.machineId, c.job.status])).toEqual([['path-test~check~r2', 'review-flow.checker', 'stopped']]);
    const child = record.children[0]!;
    expect(child.effects.map((e) => [e.actorId, e.status, e.active])).toEqual([['lint', 'cancelled', false]]);
    expect(child.history.map((h) => h.eventType)).toEqual(['xstate.init', 'xstate.stop']);
    expect(record.effects.map((e) => [e.id, e.status])).toEqual([['path-test~check~r2', 'cancelled']]);
  });

  test('a changed prediction for the child job makes the replay on the real runtime fail, naming the child job', async () => {
    const path = pathWith('APPROVE@check')!;
    const tampered: PathPlan = structuredClone(path);
    const last = tampered.steps.at(-1)!;
    last.expect.children[0]!.value = 'rejected';
    const error = await runPath(generated, tampered, { dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PathMismatchError);
    expect((error as Error).message).toContain('child job check (path-test~check~r2): state: expected rejected, the runtime is in approved');
    const dropped: PathPlan = structuredClone(path);
    dropped.steps[0]!.expect.children = [];
    const missing = await runPath(generated, dropped, { dir }).catch((e: unknown) => e);
    expect((missing as Error).message).toContain('child jobs: expected [], the store has [path-test~check~r2]');
  });
});

describe('two child jobs of the same child machine', () => {
  test('every transition is covered; the workers are told apart by their invoke ids', () => {
    expect(team.coverage.gaps).toEqual([]);
    expect(team.coverage.covered).toBe(team.transitions.length);
    expect(team.children.map((c) => [c.machineId, c.coverage.covered, c.transitions.length, c.coverage.gaps.length])).toEqual([['team.worker', 5, 5, 0]]);
    const both = team.paths.find((p) => p.name.endsWith('⇒ complete'))!;
    expect(both.steps.map((s) => s.label)).toEqual([
      'START',
      'time+1s[after.1000@a, after.1000@b, PING, PING, PONG@a, PONG@b]',
      'time+1s[after.1000@a, after.1000@b, PING, PING, PONG@a, PONG@b]',
      expect.stringMatching(/^done\.fetch@[ab]$/),
      expect.stringMatching(/^done\.fetch@[ab]$/),
    ]);
  });

  test('halting stops both child jobs with their timers pending: the runtime cancels every one of them', async () => {
    const halt = team.paths.find((p) => p.steps.map((s) => s.label).join(' ') === 'START HALT')!;
    expect(halt.steps[1]!.expect.children.map((c) => [c.path, c.status])).toEqual([
      ['a', 'stopped'],
      ['b', 'stopped'],
    ]);
    const record = await runPath(team, halt, { dir });
    expect(record.children.map((c) => [c.id, c.job.status, c.timers.map((t) => [t.key, t.status])])).toEqual([
      ['path-test~a~r2', 'stopped', [['xstate.after.1000.worker.waiting', 'cancelled']]],
      ['path-test~b~r2', 'stopped', [['xstate.after.1000.worker.waiting', 'cancelled']]],
    ]);
  });
});

describe('options for child machines', () => {
  test('a typo in child options, or activity samples for a child machine, is reported as such', () => {
    const options = reviewFlowPaths.options;
    expect(() => generatePaths(reviewFlowDefinition, { ...options, children: { chcker: {} } })).toThrow(
      new SampleError('children.chcker: machine review-flow has no child machine chcker (it has: checker).'),
    );
    expect(() => generatePaths(reviewFlowDefinition, { ...options, children: { checker: { events: { NOPE: {} } } } })).toThrow(
      /^children\.checker\.events\.NOPE: machine review-flow\.checker has no event NOPE/,
    );
    expect(() => generatePaths(reviewFlowDefinition, { ...options, outputs: { check: { approved: true } } })).toThrow(/outputs\.check: "check" is a child machine of review-flow/);
  });

  test("a child machine's transition can be waived by its own state names, under children.<src>.waive", () => {
    const g = generatePaths(reviewFlowDefinition, {
      ...reviewFlowPaths.options,
      children: { checker: { outputs: { lint: { ok: true } }, stateKey: ({ value }) => value, waive: [{ source: 'linting', guard: null, event: 'xstate.done.actor.lint', reason: 'every lint passes here' }] } },
    });
    const child = g.children[0]!.coverage;
    expect(child.gaps).toEqual([]);
    expect(child.waived).toBe(1);
    expect(child.unusedWaivers).toEqual([]);
  });

  test('a bare child machine exported next to its parent is tested with the parent, not on its own', () => {
    const items = collectPathTests(childMachines as unknown as Record<string, unknown>);
    expect(items.map((i) => (isPathTestSubject(i) ? i.definition : i))).toEqual([reviewFlowDefinition, team.definition.machine]);
    expect(items).not.toContain(checker);
    expect(items).not.toContain(worker);
    expect(items).not.toContain(reviewFlow);
  });

  test('runPathTests reports the child machine and fails on its gaps', async () => {
    const events: PathTestProgress[] = [];
    const result = await runPathTests({
      definitions: [{ definition: reviewFlowDefinition, options: { ...reviewFlowPaths.options, children: { checker: { outputs: { lint: { ok: false } }, stateKey: ({ value }) => value } } } }],
      dir,
      onProgress: (e) => events.push(e),
    });
    const [m] = result.machines;
    expect(result.ok).toBe(false);
    expect(m!.failures).toEqual([]);
    expect(m!.children).toEqual([
      expect.objectContaining({ machineId: 'review-flow.checker', transitions: 8, gaps: expect.arrayContaining([expect.objectContaining({ source: 'checker.reading', event: 'NOTE' })]) }),
    ]);
    // The parent's own transitions that need an approving child are gaps too; the child's are listed with them.
    expect(m!.gaps.some((g) => g.source === 'checker.reading')).toBe(true);
    expect(events.filter((e) => e.type === 'path.finished').every((e) => e.type === 'path.finished' && e.ok)).toBe(true);
  });
});

// ------------------------------------------------------------------ through the CLI

const CLI_DIR = join(dir, 'cli');
const CLI_MODULE = join(CLI_DIR, 'review.ts');
const CLI_OVERWAIVED = join(CLI_DIR, 'overwaived-review.ts');

/** What a new user writes: a parent and its child machine, and path-test options as plain data (no Spool import). */
const userModule = (lintOutputs: string) => `
import { assign, fromPromise, sendParent, sendTo, setup } from 'xstate';

const proofread = setup({
  types: { context: {} as { typos: number }, input: {} as { pages: number } },
  actors: { scan: fromPromise(async ({ input }: { input: { pages: number } }) => ({ pages: input.pages })) },
}).createMachine({
  id: 'proofread',
  context: { typos: 0 },
  initial: 'scanning',
  states: {
    scanning: { invoke: { id: 'scan', src: 'scan', input: { pages: 3 }, onDone: 'marking', onError: 'gaveUp' } },
    marking: {
      after: { 2000: { actions: sendParent({ type: 'STILL_MARKING' }) } },
      on: { TYPO: { actions: [assign({ typos: ({ context }) => context.typos + 1 }), sendParent({ type: 'FOUND' })] }, FINISH: 'finished' },
    },
    finished: { type: 'final' },
    gaveUp: { type: 'final' },
  },
  output: ({ context }) => ({ typos: context.typos }),
});

export const article = {
  machine: setup({
    types: { context: {} as { found: number; nudges: number; typos: number | null } },
    actors: { proofread },
  }).createMachine({
    id: 'article',
    context: { found: 0, nudges: 0, typos: null },
    initial: 'writing',
    states: {
      writing: { on: { SEND: 'proofreading' } },
      proofreading: {
        invoke: { id: 'proof', src: 'proofread', onDone: { target: 'printed', actions: assign({ typos: ({ event }) => (event.output as { typos: number }).typos }) } },
        on: {
          FOUND: { actions: assign({ found: ({ context }) => context.found + 1 }) },
          STILL_MARKING: { actions: assign({ nudges: ({ context }) => context.nudges + 1 }) },
          POINT_OUT: { actions: sendTo('proof', { type: 'TYPO' }) },
          RECALL: 'writing',
        },
      },
      printed: { type: 'final' },
    },
  }),
  activities: { scan: { maxAttempts: 2 } },
};

export const pathTests = {
  article: {
    events: { FOUND: [], STILL_MARKING: [] },
    stateKey: ({ value, context }: { value: unknown; context: { found: number; nudges: number; typos: number | null } }) => ({ value, found: Math.min(context.found, 1), nudges: Math.min(context.nudges, 1), typos: context.typos === null ? null : Math.min(context.typos, 1) }),
    children: {
      proofread: {
        events: { TYPO: [] },
        outputs: { scan: ${lintOutputs} },
        stateKey: ({ value, context }: { value: unknown; context: { typos: number } }) => ({ value, typos: Math.min(context.typos, 1) }),
        ${lintOutputs === 'undefined' ? "waive: [{ source: 'marking', event: 'TYPO', reason: 'no typo in this scenario' }]," : ''}
      },
    },
  },
};
`;

function spool(args: readonly string[]): Promise<CliRun> {
  return runSpool(args, CLI_DIR);
}

describe('spool test on a module with a child machine', () => {
  beforeAll(() => {
    mkdirSync(CLI_DIR, { recursive: true });
    writeFileSync(CLI_MODULE, userModule('{ pages: 3 }'));
    // A waiver that excuses a transition the paths do cover: an unused waiver fails the run.
    writeFileSync(CLI_OVERWAIVED, userModule('undefined'));
  });

  test('covers the parent and the child machine, and passes plain, restart and child-process replays', async () => {
    const run = await spool(['--machines', CLI_MODULE, 'test', '--child-crash', '1', '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as {
      ok: boolean;
      machines: Array<{
        machineId: string;
        transitions: number;
        covered: number;
        gaps: unknown[];
        failures: unknown[];
        children: Array<{ machineId: string; transitions: number; covered: number; gaps: unknown[]; coverage: Array<{ status: string; paths: number[] }> }>;
        runs: { plain: number; restart: number; child: number };
      }>;
    };
    expect(result.ok).toBe(true);
    expect(result.machines.map((m) => m.machineId)).toEqual(['article']);
    const [m] = result.machines;
    expect(m!.covered).toBe(m!.transitions);
    expect(m!.gaps).toEqual([]);
    expect(m!.failures).toEqual([]);
    expect(m!.children).toMatchObject([{ machineId: 'article.proofread', transitions: 5, covered: 5, waived: 0, gaps: [], unusedWaivers: [] }]);
    expect(m!.children[0]!.coverage.every((t) => t.status === 'covered' && t.paths.length > 0)).toBe(true);
    expect(m!.runs.plain).toBeGreaterThan(0);
    expect(m!.runs.restart).toBe(m!.runs.plain);
    expect(m!.runs.child).toBe(1);
  });

  test('a child machine waiver that excuses nothing fails the run, named in the output', async () => {
    const run = await spool(['--machines', CLI_OVERWAIVED, 'test', '--child-crash', '0', '--json']);
    expect(run.code).toBe(1);
    const result = JSON.parse(run.stdout) as { ok: boolean; machines: Array<{ unusedWaivers: unknown[]; children: Array<{ unusedWaivers: unknown[] }> }> };
    expect(result.ok).toBe(false);
    expect(result.machines[0]!.children[0]!.unusedWaivers).toEqual([{ source: 'marking', event: 'TYPO', reason: 'no typo in this scenario' }]);
    expect(result.machines[0]!.unusedWaivers).toEqual([{ source: 'marking', event: 'TYPO', reason: 'no typo in this scenario' }]);
  });
});
