/**
 * Coverage, gaps and waivers, bounded traversal, sample checks, and the programmatic runner
 * (`runPathTests`) that `spool test` prints.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { assign, createMachine, fromPromise, setup } from 'xstate';
import { z } from 'zod';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  CoverageError,
  PathGenerationError,
  PathMismatchError,
  SampleError,
  assertCoverage,
  compareRuns,
  describeMachinePaths,
  collectPathTests,
  generatePaths,
  isPathTestSubject,
  listTransitions,
  pathTest,
  runPath,
  runPathTests,
  type PathTestProgress,
} from '../src/testing/index.ts';
import { approvalFlow, retryingJob } from '../machines/index.ts';
import { counterMachine, fulfilmentMachine, gappyMachine, impureMachine, ticket } from './fixtures/pathMachines.ts';

const dir = join(process.cwd(), '.vitest-tmp', randomBytes(8).toString('hex'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fireWaiver = { source: 'idle', event: 'FIRE', guard: 'isArmed', target: 'fired', reason: 'arming is not implemented yet' };

describe('static transitions', () => {
  test('every candidate of on, after, onDone (of a parallel state) and always, with guards, fallbacks and targets', () => {
    const labels = listTransitions(fulfilmentMachine).map((t) => t.label);
    expect(labels).toEqual([
      'open --CANCEL--> cancelled',
      'open --xstate.done.state.fulfilment.open--> shipping',
      'open.payment.unpaid --PAY [coversTotal]--> open.payment.paid',
      'open.payment.unpaid --PAY (fallback #2)--> open.payment.declined',
      'open.payment.declined --PAY [coversTotal]--> open.payment.paid',
      'open.payment.declined --PAY (fallback #2)--> (actions only)',
      'open.payment.declined --always [tooManyDeclines]--> cancelled',
      'open.packing.waiting --PACK [lastItem]--> open.packing.packed',
      'open.packing.waiting --PACK (fallback #2)--> (actions only)',
      'shipping --LOST--> lost',
      'shipping --xstate.after.2000.fulfilment.shipping--> delivered',
    ]);
    const pay = listTransitions(fulfilmentMachine).find((t) => t.label.startsWith('open.payment.unpaid --PAY ['))!;
    expect(pay).toEqual({
      id: 'fulfilment.open.payment.unpaid PAY #1',
      source: 'fulfilment.open.payment.unpaid',
      event: 'PAY',
      eventless: false,
      guard: 'coversTotal',
      index: 1,
      targets: ['fulfilment.open.payment.paid'],
      label: 'open.payment.unpaid --PAY [coversTotal]--> open.payment.paid',
    });
  });
});

describe('gaps and waivers', () => {
  test('an event never delivered says how to deliver it, for a plain event and for an outcome', () => {
    const waiting = setup({ actors: { fetch: fromPromise(async () => 1) } }).createMachine({
      id: 'waiting',
      initial: 'idle',
      states: { idle: { on: { GO: 'busy' } }, busy: { invoke: { id: 'fetch', src: 'fetch', onDone: 'done' } }, done: { type: 'final' } },
    });
    const notes = Object.fromEntries(generatePaths(waiting, { events: { GO: [] } }).coverage.gaps.map((g) => [g.event, g.note]));
    expect(notes['GO']).toBe('no generated step delivers GO while in waiting.idle (add a sample, or a timer that leads there; an event given `[]` samples is never sent)');
    expect(notes['xstate.done.actor.fetch']).toMatch(/^state waiting\.busy is never reached/);
  });

  test('a done event that fails on the default null output says where its output comes from', () => {
    const charging = setup({ actors: { charge: fromPromise(async () => ({ chargeId: 'c-1' })) } }).createMachine({
      id: 'charging',
      initial: 'paying',
      context: { chargeId: '' },
      states: {
        paying: {
          invoke: { id: 'charge', src: 'charge', onDone: { target: 'paid', actions: assign({ chargeId: ({ event }) => (event.output as { chargeId: string }).chargeId }) } },
        },
        paid: { type: 'final' },
      },
    });
    const gap = generatePaths(charging).coverage.gaps.find((g) => g.event === 'xstate.done.actor.charge');
    expect(gap?.note).toMatch(/^a xstate\.done\.actor\.charge event failed during exploration: .*chargeId.* \(its output comes from `outputs: \{ charge: … \}`, null when no sample is given\)$/);
    expect(generatePaths(charging, { outputs: { charge: { chargeId: 'c-1' } } }).coverage.gaps).toEqual([]);
  });

  test('a deliberately unreachable transition is reported as an exact gap, and the check fails on it', () => {
    const g = generatePaths(gappyMachine);
    expect(g.coverage.gaps).toEqual([
      {
        id: 'gappy.idle FIRE #1',
        label: 'idle --FIRE [isArmed]--> fired',
        source: 'gappy.idle',
        event: 'FIRE',
        guard: 'isArmed',
        targets: ['gappy.fired'],
        note: 'FIRE was received in gappy.idle, but this candidate was never the one taken (guard false, or an earlier candidate taken)',
      },
    ]);
    expect(g.coverage.covered).toBe(2);
    let error: unknown;
    try {
      assertCoverage(g.coverage);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CoverageError);
    expect((error as Error).message).toContain('1 of 3 transitions of gappy are not covered');
    expect((error as Error).message).toContain('state gappy.idle, event FIRE, guard isArmed, target gappy.fired');
  });

  test('a waiver with a reason is accepted; one without a reason, or one that excuses nothing, is not', () => {
    const waived = generatePaths(gappyMachine, { waive: [fireWaiver] });
    expect(() => assertCoverage(waived.coverage)).not.toThrow();
    expect(waived.coverage).toMatchObject({ covered: 2, waived: 1, gaps: [] });
    expect(waived.coverage.transitions.find((t) => t.event === 'FIRE')).toMatchObject({ covered: false, waived: 'arming is not implemented yet' });

    expect(() => generatePaths(gappyMachine, { waive: [{ source: 'idle', event: 'FIRE', reason: ' ' }] })).toThrow(/needs a reason/);

    const stale = generatePaths(gappyMachine, { waive: [fireWaiver, { source: 'idle', event: 'ARM', reason: 'was flaky once' }] });
    expect(stale.coverage.unusedWaivers).toEqual([{ source: 'idle', event: 'ARM', reason: 'was flaky once' }]);
    expect(() => assertCoverage(stale.coverage)).toThrow(/Waivers that excuse no uncovered transition/);
  });

  test('an always-branch never taken along the paths is a gap; another input takes it', () => {
    const one = generatePaths(retryingJob, { input: { name: 'nightly' }, outputs: { process: { succeeded: 3, failed: 0 } } });
    const alwaysGap = one.coverage.gaps.find((g) => g.event === 'always' && g.source === 'retrying-job.queued');
    expect(alwaysGap).toMatchObject({ guard: 'autoStart', targets: ['retrying-job.processing'] });
    expect(alwaysGap!.note).toMatch(/never the one taken/);
    const both = generatePaths(retryingJob, { inputs: [{ name: 'nightly' }, { name: 'auto', autoStart: true }], outputs: { process: { succeeded: 3, failed: 0 } } });
    expect(both.coverage.gaps.find((g) => g.event === 'always' && g.source === 'retrying-job.queued')).toBeUndefined();
  });

  describeMachinePaths(gappyMachine, { waive: [fireWaiver], dir });
});

describe('bounded traversal', () => {
  test('an unbounded counter hits the limit with an error that says what to do', () => {
    let error: unknown;
    try {
      generatePaths(counterMachine, { limit: 300 });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PathGenerationError);
    expect((error as Error).message).toMatch(/tally explored more than 300 \(state, step\) pairs/);
    expect((error as Error).message).toMatch(/Pass `stateKey` to abstract it/);
  });

  test('with the counter abstracted by stateKey, the graph is finite and every transition is covered', () => {
    const g = generatePaths(counterMachine, { stateKey: ({ value, context }) => ({ value, n: Math.min((context as { n: number }).n, 3) }) });
    expect(g.coverage.gaps).toEqual([]);
    expect(g.paths.map((p) => p.name)).toEqual(['INC → INC → INC → FINISH ⇒ done']);
    expect(g.states).toBe(5);
  });
});

describe('samples', () => {
  test('a sample the event schema rejects is refused with the field and the fix', () => {
    expect(() => generatePaths(approvalFlow, { input: { subject: 'x' }, events: { REMIND: [], APPROVE: { by: '' } } })).toThrow(SampleError);
    expect(() => generatePaths(approvalFlow, { input: { subject: 'x' }, events: { REMIND: [], APPROVE: { by: '' } } })).toThrow(
      /Sample 1 of event APPROVE for machine approval-flow is rejected by its schema \(by: .*\): give a valid one in `events: \{ APPROVE/,
    );
  });

  test('an event with required fields and no sample is reported, not silently skipped', () => {
    expect(() => generatePaths(approvalFlow, { input: { subject: 'x' }, events: { REMIND: [] } })).toThrow(/event APPROVE .* rejected by its schema/);
  });

  test('a sample for an event or activity the machine does not have is a typo, reported as such', () => {
    expect(() => generatePaths(approvalFlow, { input: { subject: 'x' }, events: { REMIND: [], APROVE: { by: 'ann' } } })).toThrow(
      'events.APROVE: machine approval-flow has no event APROVE (its events: APPROVE, CANCEL, REJECT, REMIND).',
    );
    expect(() => generatePaths(retryingJob, { input: { name: 'n' }, outputs: { proces: null } })).toThrow(/outputs\.proces: machine retrying-job invokes no actor/);
    expect(() => generatePaths(retryingJob, { input: { name: 'n' }, failAttempts: { upload: 1 } })).toThrow(/failAttempts\.upload: machine retrying-job has no actor src upload/);
  });

  test('a changed prediction makes the replay on the real runtime fail at that step', async () => {
    const g = generatePaths(approvalFlow, { input: { subject: 'x' }, events: { REMIND: [], APPROVE: { by: 'ann' }, REJECT: { by: 'b', reason: 'r' } } });
    const path = structuredClone(g.paths.find((p) => p.name === 'APPROVE ⇒ approved')!);
    path.steps[0]!.expect.context = { ...(path.steps[0]!.expect.context as object), decidedBy: 'mallory' };
    await expect(runPath(g, path, { dir })).rejects.toThrow(PathMismatchError);
    await expect(runPath(g, path, { dir })).rejects.toThrow(/step 1 \(APPROVE\): the runtime disagrees with the model:\n {2}- context: expected .*"decidedBy":"mallory"/);
  });
});

describe('crash comparison', () => {
  test('a crash run that differs from the uninterrupted run is reported part by part', async () => {
    const g = generatePaths(ticket, { input: { maxLevel: 1 } });
    const path = g.paths[0]!;
    const plain = await runPath(g, path, { dir });
    const restarted = await runPath(g, path, { mode: 'restart', dir });
    expect(() => compareRuns(path, 'restart', plain, restarted)).not.toThrow();
    const tampered = structuredClone(restarted);
    tampered.history.push({ ...tampered.history.at(-1)! });
    expect(() => compareRuns(path, 'restart', plain, tampered)).toThrow(PathMismatchError);
    expect(() => compareRuns(path, 'restart', plain, tampered)).toThrow(/the restart run differs from the uninterrupted run:\n {2}history:/);
  });
});

describe('interrupts', () => {
  test('an in-process crash counts the interrupted attempt, as a killed process does: with one attempt allowed, the crash path ends in onError', async () => {
    const once = setup({ actors: { work: fromPromise(async () => 'ok') } }).createMachine({
      id: 'once',
      initial: 'working',
      states: { working: { invoke: { id: 'work', src: 'work', onDone: 'done', onError: 'failed' } }, done: { type: 'final' }, failed: { type: 'final' } },
    });
    const g = generatePaths({ machine: once, version: 1, activities: { work: { maxAttempts: 1 } } }, { interrupts: 'all', outputs: { work: ['ok'] }, errors: { work: [] } });
    const crash = g.paths.find((p) => p.name.startsWith('crash.work'));
    expect(crash?.name).toBe('crash.work ⇒ failed');
    const run = await runPath(g, crash!, { dir });
    expect(run.job.value).toBe('failed');
  });
});

describe('event types as the runtime takes them', () => {
  test('a schema keyed by a wildcard validates (and fills in) the samples, as the runtime does', async () => {
    const wild = setup({ types: { context: {} as { who: string | null } } }).createMachine({
      id: 'wild',
      context: { who: null },
      initial: 'idle',
      states: { idle: { on: { 'user.login': { target: 'in', actions: assign({ who: ({ event }) => (event as { who?: string }).who ?? null }) } } }, in: { type: 'final' } },
    });
    const def = { machine: wild, version: 1, events: { 'user.*': z.object({ type: z.string(), who: z.string().default('anon') }) } };
    const g = generatePaths(def, { events: { 'user.login': [{}] } });
    expect(g.paths).toHaveLength(1);
    const run = await runPath(g, g.paths[0]!, { dir });
    expect(run.job.context).toEqual({ who: 'anon' });
  });

  test('event types named like Object.prototype members are plain types', async () => {
    const proto = createMachine({ id: 'proto', initial: 'a', states: { a: { on: { constructor: 'b', toString: 'b' } }, b: { type: 'final' } } });
    const g = generatePaths(proto);
    expect(g.paths.map((p) => p.name).sort()).toEqual(['constructor ⇒ b', 'toString ⇒ b']);
    for (const path of g.paths) expect((await runPath(g, path, { dir })).job.value).toBe('b');
  });
});

describe('runPathTests', () => {
  test('collectPathTests reads a machines module: subjects, then definitions no subject covers, with options from a `pathTests` export', async () => {
    const fixtures = collectPathTests(await import('./fixtures/referencePaths.ts'));
    expect(fixtures.every(isPathTestSubject)).toBe(true);
    expect(fixtures).toHaveLength(4);
    const reference = collectPathTests({ ...(await import('../machines/index.ts')), pathTests: { 'approval-flow': { input: { subject: 's' } } } });
    expect(reference).toHaveLength(4);
    expect(reference.filter(isPathTestSubject).map((s) => s.options)).toEqual([{ input: { subject: 's' } }]);
  });

  test('per machine: states, transitions, covered, gaps, paths, runs and failures, with progress events', async () => {
    const progress: PathTestProgress[] = [];
    const result = await runPathTests({
      definitions: [
        pathTest(ticket, { input: { maxLevel: 1 } }),
        gappyMachine,
        pathTest(counterMachine, { limit: 200 }),
        impureMachine,
      ],
      options: { gappy: { events: { ARM: {} } } },
      crash: true,
      sampleChildCrash: 1,
      module: 'test/fixtures/pathMachines.ts',
      dir,
      onProgress: (e) => progress.push(e),
    });
    expect(JSON.parse(JSON.stringify(result))).toEqual(result);
    expect(result.ok).toBe(false);
    const [ticketResult, gappy, counter, impure] = result.machines;

    expect(ticketResult).toMatchObject({ machineId: 'ticket', version: '1', ok: true, gaps: [], failures: [], error: null });
    expect(ticketResult!.covered).toBe(ticketResult!.transitions);
    expect(ticketResult!.runs).toEqual({ plain: ticketResult!.paths, restart: ticketResult!.paths, child: 1, walk: 1 });

    expect(gappy).toMatchObject({ machineId: 'gappy', ok: false, transitions: 3, covered: 2, failures: [], error: null });
    expect(gappy!.gaps.map((g) => g.label)).toEqual(['idle --FIRE [isArmed]--> fired']);

    expect(counter).toMatchObject({ machineId: 'tally', ok: false, paths: 0, runs: { plain: 0, restart: 0, child: 0, walk: 0 } });
    expect(counter!.error).toMatch(/explored more than 200/);

    expect(impure).toMatchObject({ machineId: 'impure', ok: false, gaps: [] });
    expect(impure!.failures).toHaveLength(1);
    expect(impure!.failures[0]).toMatchObject({ path: 1, name: 'STAMP ⇒ stamped', mode: 'plain' });
    expect(impure!.failures[0]!.message).toMatch(/step 1 \(STAMP\): the runtime disagrees with the model:\n {2}- context: expected \{"stamp":0\.\d+\}, got \{"stamp":0\.\d+\}/);
    expect(impure!.failures[0]!.message).toContain('Math.random(), Date.now() or other outside state in an assign or a guard');

    expect(progress.filter((e) => e.type === 'machine.finished')).toHaveLength(4);
    expect(progress.filter((e) => e.type === 'path.finished' && e.machineId === 'ticket' && e.mode === 'child')).toHaveLength(1);
    expect(progress[0]).toEqual({ type: 'machine.started', machineId: 'ticket', version: '1' });
  });
});
