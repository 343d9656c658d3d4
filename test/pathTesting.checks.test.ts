/**
 * Checks declared once per machine: invariants over every committed snapshot, expectations for
 * states reached and for named paths, golden files of each path's end. Each catches a mutant
 * that plain coverage lets through.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { checkGolden, describeMachinePaths, generatePaths, pathTest, runPathTests } from '../src/testing/index.ts';
import { approval, approvalChecks, approvalMachine, editor, editorMachine } from './fixtures/checkMachines.ts';

const events = { APPROVE: [{ role: 'manager' }, { role: 'peer' }] };
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
    expect(v).toMatchObject({ check: 'reached approved', path: 'APPROVE ⇒ approved', step: 1, label: 'APPROVE', commit: 'APPROVE', snapshot: { value: 'approved', context: { approvals: 1 }, status: 'done', now: 0 } });
    expect(v.message).toBe(
      'reached approved returned false on path "APPROVE ⇒ approved", step 1 (APPROVE), snapshot committed by APPROVE: state "approved", status done, clock start+0 ms, context {"approvals":1}',
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
      expect.stringMatching(/^invariant approvals never exceed two returned false on path "APPROVE → APPROVE → APPROVE ⇒ approved", step 3 \(APPROVE\), .*context \{"approvals":3\}$/),
      expect.stringMatching(/^path two managers approve returned false on path "«two managers approve» APPROVE → APPROVE ⇒ pending", step 2/),
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
      `golden path "APPROVE → APPROVE ⇒ approved" ends differently (${file}): context {"approvals":1}, golden {"approvals":2}. Run \`spool test --update\` if the change is intended.`,
    );
  });
});
