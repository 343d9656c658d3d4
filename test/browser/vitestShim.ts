/**
 * What a contract suite imports from 'vitest', for a browser bundle (test/helpers/wasmPage.ts
 * aliases 'vitest' here): `describe`, `it`, `beforeEach`, `afterEach` record the cases, and
 * `expect` is vitest's own (@vitest/expect on chai). {@link runCases} runs them one at a time,
 * each between its hooks, and reports each one's outcome, so a suite written for vitest runs
 * unchanged in a Worker.
 */
import { ASYMMETRIC_MATCHERS_OBJECT, chai, getState, JestAsymmetricMatchers, JestChaiExpect, JestExtend, setState, type ExpectStatic } from '@vitest/expect';

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(JestAsymmetricMatchers);

export const expect = ((value: unknown, message?: string) => {
  setState({ assertionCalls: getState(expect).assertionCalls + 1 }, expect);
  return chai.expect(value, message);
}) as ExpectStatic;
Object.assign(expect, chai.expect);
Object.assign(expect, (globalThis as Record<symbol, unknown>)[ASYMMETRIC_MATCHERS_OBJECT]);
expect.getState = () => getState(expect);
expect.setState = (state) => setState(state, expect);
setState({ assertionCalls: 0, isExpectingAssertions: false, isExpectingAssertionsError: null, expectedAssertionsNumber: null, expectedAssertionsNumberErrorGen: null }, expect);

type Fn = () => unknown;
interface Scope {
  name: string;
  before: Fn[];
  after: Fn[];
}
interface Case {
  name: string;
  scopes: Scope[];
  fn: Fn;
}

const cases: Case[] = [];
const stack: Scope[] = [{ name: '', before: [], after: [] }];

export function describe(name: string, fn: () => void): void {
  stack.push({ name, before: [], after: [] });
  try {
    fn();
  } finally {
    stack.pop();
  }
}

export function it(name: string, fn: Fn): void {
  cases.push({ name: [...stack.map((s) => s.name).filter(Boolean), name].join(' > '), scopes: [...stack], fn });
}
export const test = it;

export function beforeEach(fn: Fn): void {
  stack.at(-1)!.before.push(fn);
}

export function afterEach(fn: Fn): void {
  stack.at(-1)!.after.push(fn);
}

/** One case's outcome. */
export interface CaseResult {
  name: string;
  ok: boolean;
  error?: string;
}

/** Run every case recorded, in order (hooks outermost first before, innermost first after); `report` hears each. */
export async function runCases(report: (result: CaseResult) => void = () => undefined): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const c of cases) {
    let error: unknown;
    try {
      for (const scope of c.scopes) for (const hook of scope.before) await hook();
      await c.fn();
    } catch (e) {
      error = e;
    }
    for (const scope of [...c.scopes].reverse()) {
      for (const hook of scope.after) {
        try {
          await hook();
        } catch (e) {
          error ??= e;
        }
      }
    }
    const result: CaseResult = error === undefined ? { name: c.name, ok: true } : { name: c.name, ok: false, error: error instanceof Error ? `${error.message}\n${error.stack ?? ''}` : String(error) };
    results.push(result);
    report(result);
  }
  return results;
}
