/**
 * Checks declared once per machine: invariants over every committed snapshot, expectations for
 * states reached and for named paths, golden files of each path's end. Each catches a mutant
 * that plain coverage lets through.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { runSpool } from './helpers/spoolCli.ts';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { checkGolden, describeMachinePaths, generatePaths, mutationTest, pathTest, runPathTests, runWalks } from '../src/testing/index.ts';
import { approval, approvalChecks, approvalMachine, editor, editorMachine, meterChecks, meterMachine, notes } from './fixtures/checkMachines.ts';

const events = { APPROVE: [{ role: 'manager' as const }, { role: 'peer' as const }] };
const dir = join(process.cwd(), '.vitest-tmp', randomBytes(8).toString('hex'));
mkdirSync(dir, { recursive: true });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The vitest helper takes the same declaration: its checks become a test of their own.
describeMachinePaths(approval, { ...approvalChecks, crash: false, dir });

describe('invariants and expectations', () => {
  test('the machine as written passes its checks, and the named path is replayed on the runtime', async () => {
    const result = await runPathTests({ definitions: [pathTest(approval, approvalChecks)], dir });
    expect(result.machines[0]!.failures).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.machines[0]!.paths).toBe(3);
  });

  test('a threshold off by one covers every transition, and fails the reached expectation naming path, step, snapshot and check', () => {
    const mutant = { ...approval, machine: approvalMachine(1) };
    const g = generatePaths(mutant, { ...approvalChecks, paths: {} });
    expect(g.coverage.gaps).toEqual([]);
    expect(g.violations).toHaveLength(1);
    const v = g.violations[0]!;
    expect(v).toMatchObject({ check: 'reached approved', path: 'APPROVE{role:manager} ⇒ approved', step: 1, label: 'APPROVE{role:manager}', commit: 'APPROVE', snapshot: { value: 'approved', context: { approvals: 1 }, status: 'done', now: 0 } });
    expect(v.message).toBe(
      'reached approved returned false on path "APPROVE{role:manager} ⇒ approved", step 1 (APPROVE{role:manager}), snapshot committed by APPROVE: state "approved", status done, clock start+0 ms, context {"approvals":1}',
    );
  });

  test('an invariant is checked on every explored state, and a named path that cannot be walked fails its expectation', async () => {
    const mutant = { ...approval, machine: approvalMachine(3) };
    const result = await runPathTests({ definitions: [pathTest(mutant, approvalChecks)], dir });
    const m = result.machines[0]!;
    expect(m.gaps).toEqual([]);
    expect(m.ok).toBe(false);
    const checks = m.failures.filter((f) => f.mode === 'check').map((f) => f.message);
    expect(checks).toEqual([
      expect.stringMatching(/^invariant approvals never exceed two returned false on path "APPROVE\{role:manager\} → APPROVE\{role:manager\} → APPROVE\{role:manager\} ⇒ approved", step 3 \(APPROVE\{role:manager\}\), .*context \{"approvals":3\}$/),
      expect.stringMatching(/^path two managers approve returned false on path "«two managers approve» APPROVE\{role:manager\} → APPROVE\{role:manager\} ⇒ pending", step 2/),
    ]);
  });

  test('a check that throws is reported with its message', () => {
    const g = generatePaths(approval, { events, invariants: { 'never rejected': (s) => { if (s.matches('rejected')) throw new Error('rejected!'); } } });
    expect(g.violations.map((v) => v.message)).toEqual([expect.stringMatching(/^invariant never rejected threw: rejected! on path "REJECT ⇒ rejected", step 1/)]);
  });

  test('a misspelt state in `reached` is refused', () => {
    expect(() => generatePaths(approval, { reached: { aproved: () => true } })).toThrow(/reached\.aproved: machine approval has no state aproved \(its states: pending, approved, rejected\)/);
  });
});

describe('golden files', () => {
  test('paths restore each history configuration, so the golden file tells deep history from shallow', () => {
    const file = join(dir, 'editor.json');
    const deep = generatePaths(editor);
    expect(deep.paths.map((p) => p.name)).toContain('NEXT → NEXT → PAUSE → RESUME ⇒ editing.review.second');
    expect(checkGolden(file, deep, true)).toEqual({ written: true, diffs: [] });
    expect(JSON.parse(readFileSync(file, 'utf8')).paths).toHaveLength(deep.paths.length);
    expect(checkGolden(file, generatePaths(editor), false)).toEqual({ written: false, diffs: [] });

    const shallow = generatePaths(editorMachine('shallow'));
    expect(shallow.coverage.gaps).toEqual([]);
    const { diffs } = checkGolden(file, shallow, false);
    expect(diffs.map((d) => d.message)).toContain(
      `golden path "NEXT → NEXT → PAUSE → RESUME ⇒ editing.review.second" ends differently (${file}): state {"editing":{"review":"first"}}, golden {"editing":{"review":"second"}}. Run \`spool test --update\` if the change is intended.`,
    );
  });

  test('runPathTests compares with the golden file, and writes it with update', async () => {
    const file = join(dir, 'approval.json');
    const subject = pathTest(approval, { ...approvalChecks, golden: file });
    const first = await runPathTests({ definitions: [subject], dir, update: true });
    expect(first.machines[0]!.golden).toEqual({ file, written: true });
    const mutant = pathTest({ ...approval, machine: approvalMachine(1) }, { events, golden: file });
    const second = await runPathTests({ definitions: [mutant], dir });
    expect(second.ok).toBe(false);
    expect(second.machines[0]!.failures.filter((f) => f.mode === 'golden').map((f) => f.message)).toContain(
      `golden path "APPROVE{role:manager} → APPROVE{role:manager} ⇒ approved" ends differently (${file}): context {"approvals":1}, golden {"approvals":2}. Run \`spool test --update\` if the change is intended.`,
    );
  });
});

describe('rough edges', () => {
  test('a wildcard sample is used with its own type, and the gap reasons are the true ones', () => {
    const without = generatePaths(notes, { events: { B: [] } });
    const note = (event: string) => without.coverage.gaps.find((g) => g.event === event)?.note;
    expect(note('note.*')).toBe("no generated step delivers note.* while in notes.open (add a sample keyed `'note.*'` with its own `type` (e.g. { type: 'note.something' }))");
    expect(note('always')).toBe('notes.checking was reached, but this candidate was never the one taken (guard retryable false every time)');
    expect(note('xstate.done.state.notes.work')).toBe(
      'notes.work never reaches its final state on the generated steps: xstate.done.state.notes.work is raised then (every region final, for a parallel state); give the samples that lead there',
    );

    const withSample = generatePaths(notes, { stateKey: ({ value, context }) => ({ value, n: Math.min((context as { notes: number }).notes, 1) }), events: { 'note.*': [{ type: 'note.added', text: 'a' }, { type: 'note.added', text: 'b' }] }, waive: [{ source: 'checking', guard: 'retryable', reason: 'never retryable here' }] });
    expect(withSample.coverage.gaps).toEqual([]);
    // Several samples: the path names show the payload value that tells them apart.
    expect(withSample.paths.map((p) => p.name)).toContain('note.added{text:a} ⇒ open');
  });

  test('path names show the payload values that matter; --json lists each transition with its status and paths', async () => {
    const result = await runPathTests({ definitions: [pathTest(approval, { events })], dir });
    const m = result.machines[0]!;
    expect(m.pathList).toEqual([{ id: 1, name: 'APPROVE{role:manager} → APPROVE{role:manager} ⇒ approved' }, { id: 2, name: 'REJECT ⇒ rejected' }]);
    expect(m.coverage).toEqual([
      { id: 'approval.pending APPROVE #1', label: 'pending --APPROVE [byManager]--> pending', status: 'covered', reason: null, paths: [1] },
      { id: 'approval.pending REJECT #1', label: 'pending --REJECT--> rejected', status: 'covered', reason: null, paths: [2] },
      { id: 'approval.pending always #1', label: 'pending --always [enough]--> approved', status: 'covered', reason: null, paths: [1] },
    ]);
  });
});

describe('random walks', () => {
  test('a bound off by one that the abstracted graph never reaches is found by a seeded walk, shrunk, and replayed the same with the seed', () => {
    const mutant = generatePaths(meterMachine(5), meterChecks);
    expect(mutant.coverage.gaps).toEqual([]);
    expect(mutant.violations).toEqual([]);
    const first = runWalks(mutant, { seed: 42, runs: 300, steps: 20, timeMs: 120_000 });
    expect(first.violation?.message).toBe(
      'random walk (seed 42, shrunk to 5 steps; replay with --seed 42): invariant at most four returned false on path "TICK → TICK → TICK → TICK → TICK ⇒ idle", step 5 (TICK), snapshot committed by TICK: state "idle", status active, clock start+0 ms, context {"n":5}',
    );
    expect(runWalks(mutant, { seed: 42, runs: 300, steps: 20, timeMs: 120_000 }).violation?.message).toBe(first.violation?.message);
    expect(runWalks(generatePaths(meterMachine(), meterChecks), { seed: 42, runs: 300, steps: 20, timeMs: 120_000 }).violation).toBeNull();
  });

  test('runPathTests runs the walks (seed in the result) and replays one on the runtime with a restart between every two steps', async () => {
    const ok = await runPathTests({ definitions: [pathTest(meterMachine(), meterChecks)], dir });
    expect(ok.machines[0]).toMatchObject({ ok: true, walks: { seed: 42, runs: 300, replayed: 1 }, runs: { walk: 1 } });
    const bad = await runPathTests({ definitions: [pathTest(meterMachine(5), meterChecks)], dir, seed: 7 });
    expect(bad.machines[0]!.walks!.seed).toBe(7);
    expect(bad.machines[0]!.failures.map((f) => [f.mode, f.name])).toEqual([['walk', 'TICK → TICK → TICK → TICK → TICK ⇒ idle']]);
  });
});

describe('mutation testing', () => {
  test('mutants of a machine: killed by coverage, checks, walks; the survivors named with their change', () => {
    const result = mutationTest(approval, approvalChecks, null);
    expect(result.error).toBeNull();
    expect(result.kills.map((k) => `${k.mutation} <- ${k.by}`)).toEqual([
      'retarget on.APPROVE from pending to approved <- coverage',
      'negate guard of on.APPROVE <- path two managers approve',
      'drop action 1 of on.APPROVE <- coverage',
      'retarget on.REJECT from rejected to approved <- reached approved',
      'retarget always from approved to rejected <- path two managers approve',
      'drop guard of always <- coverage',
      'negate guard of always <- coverage',
    ]);
    expect(result).toMatchObject({ machine: 'approval', total: 10, killed: 7 });
    // The checks as written let a peer's approval count, and never look at the job's status.
    expect(result.survived).toEqual([
      { machine: 'approval', mutation: 'drop guard of on.APPROVE', location: 'approval.pending on.APPROVE' },
      { machine: 'approval', mutation: 'approval.approved no longer final', location: 'approval.approved' },
      { machine: 'approval', mutation: 'approval.rejected no longer final', location: 'approval.rejected' },
    ]);
    // Without the checks, plain coverage kills fewer.
    expect(mutationTest(approval, { events }, null).killed).toBe(4);
  });

  test('deep history switched to shallow survives plain coverage and is killed by the golden file', () => {
    const plain = mutationTest(editor, {}, null);
    expect(plain.survived.map((s) => s.mutation)).toContain('history deep → shallow');
    const withGolden = mutationTest(editor, { golden: true }, { file: join(dir, 'no-such-golden.json') });
    expect(withGolden.kills).toContainEqual({ mutation: 'history deep → shallow', location: 'editor.editing.hist', by: 'golden' });
    expect(withGolden.survived).toEqual([]);
  });

  test('a dropped guard that only a long run of events exposes is killed by the walks', () => {
    const result = mutationTest(meterMachine(), meterChecks, null);
    expect(result.kills).toContainEqual({ mutation: 'drop guard of on.TICK', location: 'meter.idle on.TICK', by: 'walk' });
  });
});

/** What a user writes: a machine, and its checks as plain data in `pathTests` (no Spool import). */
const USER_MODULE = `
import { assign, setup } from 'xstate';
export const approval = setup({
  types: { context: {} as { approvals: number }, events: {} as { type: 'APPROVE'; role: string } | { type: 'REJECT' } },
  guards: { byManager: ({ event }) => event.type === 'APPROVE' && event.role === 'manager', enough: ({ context }) => context.approvals >= 2 },
}).createMachine({
  id: 'approval',
  context: { approvals: 0 },
  initial: 'pending',
  states: {
    pending: {
      always: { guard: 'enough', target: 'approved' },
      on: { APPROVE: { guard: 'byManager', actions: assign({ approvals: ({ context }) => context.approvals + 1 }) }, REJECT: 'rejected' },
    },
    approved: { type: 'final' },
    rejected: { type: 'final' },
  },
});
export const pathTests = {
  approval: {
    events: { APPROVE: [{ role: 'manager' }, { role: 'peer' }] },
    reached: { approved: (s: { context: { approvals: number } }) => s.context.approvals >= 2 },
    golden: true,
    walks: { runs: 50, timeMs: 120_000 },
  },
};
`;

describe('spool test', () => {
  test('writes the golden file next to the module, prints the walk seed; --mutate reports killed and surviving mutants', async () => {
    const cliDir = join(dir, 'cli');
    mkdirSync(cliDir, { recursive: true });
    writeFileSync(join(cliDir, 'machines.ts'), USER_MODULE);
    // On CI (env CI), a missing golden file is a failure, not a file written.
    const onCi = await runSpool(['--machines', './machines.ts', 'test', '--no-crash', '--child-crash', '0', '--seed', '5'], cliDir, undefined, { CI: 'true' });
    expect(onCi.code).toBe(1);
    expect(onCi.stdout).toContain(`approval: golden failed: No golden file ${join(cliDir, '__paths__', 'approval.json')}: run \`spool test --update\``);
    expect(existsSync(join(cliDir, '__paths__'))).toBe(false);
    const run = await runSpool(['--machines', './machines.ts', 'test', '--no-crash', '--child-crash', '0', '--seed', '5'], cliDir);
    expect(run.stdout).toMatch(/^approval@1\s.*\bok\s+\d+\.\d s$/m);
    expect(run.stdout).toContain(`approval: golden file written: ${join(cliDir, '__paths__', 'approval.json')}`);
    expect(run.stdout).toContain('approval: 50 random walks, 1 replayed with restarts, seed 5 (`--seed 5` walks them again)');
    expect(run.code).toBe(0);
    expect(JSON.parse(readFileSync(join(cliDir, '__paths__', 'approval.json'), 'utf8')).paths.map((p: { name: string }) => p.name)).toEqual([
      'APPROVE{role:manager} → APPROVE{role:manager} ⇒ approved',
      'REJECT ⇒ rejected',
    ]);

    const mutate = await runSpool(['--machines', './machines.ts', 'test', '--mutate', '--json'], cliDir);
    expect(mutate.code).toBe(0);
    const { mutation } = JSON.parse(mutate.stdout) as { mutation: { total: number; killed: number; survived: unknown[] } };
    expect(mutation).toMatchObject({ total: 9, killed: 8 });
    // The golden file sees the job's status (the unfinaled states die); a peer's approval counting survives: no check says it must not.
    expect(mutation.survived).toEqual([{ machine: 'approval', mutation: 'drop guard of on.APPROVE', location: 'approval.pending on.APPROVE' }]);
  }, 180_000);
});
