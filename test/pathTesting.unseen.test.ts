/**
 * Path tests of machines the project never saw: nested and parallel states, guards on context
 * and events, delayed transitions with computed delays and re-entry, an invoked activity that
 * Spool retries (and exhausts) under a timeout, self-sends and delayed raises. All covered, all
 * passing on the real runtime, with a restart between every two steps, and samples in
 * SIGKILLed child processes.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { collectPathTests, describeMachinePaths, generatePaths, runPath } from '../src/testing/index.ts';
import { fulfilment, relayMachine, sync, ticket } from './fixtures/pathMachines.ts';

const MODULE = 'test/fixtures/pathMachines.ts';
const dir = join(process.cwd(), '.vitest-tmp', randomBytes(8).toString('hex'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const syncOptions = { input: { expected: 10 }, failAttempts: { upload: 2 }, outputs: { upload: [{ count: 10 }, { count: 4 }] }, errors: { upload: { message: 'quota exceeded' } } };

const generated = {
  fulfilment: describeMachinePaths(fulfilment, { input: { items: 2, total: 50 }, events: { PAY: [{ amount: 100 }, { amount: 10 }] }, dir }),
  ticket: describeMachinePaths(ticket, { input: { maxLevel: 2 }, childCrash: 1, module: MODULE, dir }),
  sync: describeMachinePaths(sync, { ...syncOptions, childCrash: 1, module: MODULE, dir }),
  // PING and LATE only come from the machine itself (a self-send, a delayed raise): never sent from outside.
  relay: describeMachinePaths(relayMachine, { events: { PING: [], LATE: [] }, dir }),
  syncExhausted: describeMachinePaths(sync, {
    input: { expected: 10 },
    failAttempts: { upload: 3 },
    // Every attempt fails, so the activity never waits for an outcome: these cannot be taken.
    waive: [
      { source: 'syncing', event: 'xstate.done.actor.upload', reason: 'every attempt fails in this scenario' },
      { source: 'syncing', event: 'xstate.after.60000.sync.syncing', reason: 'retries are exhausted long before the timeout' },
      { source: 'partial', reason: 'partial needs a done output' },
    ],
    dir,
  }),
};

describe('options the path tests do not know', () => {
  test('are refused by name, at every level, and a pathTests key that names no machine too', () => {
    expect(() => generatePaths(sync, { ...syncOptions, waiver: [] } as never)).toThrow(/Path-test options for sync: unknown option waiver \(known: .*waive/);
    expect(() => generatePaths(sync, { ...syncOptions, children: { helper: { evnts: {} } } } as never)).toThrow('Path-test options for sync child helper: unknown option evnts');
    expect(() => collectPathTests({ sync, pathTests: { syncs: syncOptions } })).toThrow("pathTests names syncs, which the module does not export (its machines: sync).");
    expect(collectPathTests({ sync, pathTests: { sync: syncOptions } })).toHaveLength(1);
  });
});

describe('what the generated paths exercise', () => {
  test('every transition of each new machine is covered', () => {
    for (const g of [generated.fulfilment, generated.ticket, generated.sync, generated.relay]) {
      expect(g).toBeDefined();
      expect(g!.coverage.gaps).toEqual([]);
      expect(g!.coverage.covered).toBe(g!.transitions.length);
    }
    expect(generated.syncExhausted!.coverage.gaps).toEqual([]);
    expect(generated.syncExhausted!.coverage.waived).toBe(4);
  });

  test('an event schema that names no type (z.object strips it) is sampled, predicted and replayed as an event of its type', async () => {
    const machine = setup({ types: {} as { context: { by: string | null }; events: { type: 'APPROVE'; by: string } | { type: 'REOPEN' } } }).createMachine({
      id: 'untyped-schemas',
      initial: 'open',
      context: { by: null },
      states: {
        open: { on: { APPROVE: { target: 'approved', actions: assign({ by: ({ event }) => event.by }) } } },
        approved: { on: { REOPEN: 'open' } },
      },
    });
    const g = generatePaths(
      { machine, version: '1', events: { APPROVE: z.object({ by: z.string() }), REOPEN: z.object({}) } },
      { events: { APPROVE: { by: 'ann' } }, stateKey: ({ value }) => value },
    );
    expect(g.coverage.gaps).toEqual([]);
    const sent = g.paths.flatMap((p) => p.steps.flatMap(({ step }) => (step.via === 'send' ? [step.event] : [])));
    expect(sent).toContainEqual({ type: 'APPROVE', by: 'ann' });
    expect(sent).toContainEqual({ type: 'REOPEN' });
    const reopened = g.paths.find((p) => p.name.endsWith('⇒ open'))!;
    // The runtime agrees with the model at every step (runPath throws on a mismatch), across restarts.
    const record = await runPath(g, reopened, { mode: 'restart', dir });
    expect(record.history.map((h) => `${h.eventType} ${String(h.to)}`)).toEqual(['xstate.init open', 'APPROVE approved', 'REOPEN open']);
    expect(record.job.context).toEqual({ by: 'ann' });
  });

  test('parallel regions and nested states: predicted values are the full parallel value, and the done.state transition is covered', () => {
    const g = generated.fulfilment!;
    const values = g.paths.flatMap((p) => p.steps.map((s) => JSON.stringify(s.expect.value)));
    expect(values).toContain(JSON.stringify({ open: { payment: 'paid', packing: 'waiting' } }));
    const doneState = g.coverage.transitions.find((t) => t.event === 'xstate.done.state.fulfilment.open')!;
    expect(doneState).toMatchObject({ covered: true, targets: ['fulfilment.shipping'] });
    const always = g.coverage.transitions.find((t) => t.eventless)!;
    expect(always).toMatchObject({ source: 'fulfilment.open.payment.declined', guard: 'tooManyDeclines', covered: true });
    // The path that takes the always-branch says so at the step where it happens.
    const viaAlways = g.paths.find((p) => p.steps.some((s) => s.expect.taken.includes(always.id)))!;
    expect(viaAlways.name).toBe('PAY{amount:10} → PAY{amount:10} ⇒ cancelled');
  });

  test('delayed transitions: escalation timers grow with the level and fire in due order', () => {
    const g = generated.ticket!;
    const expiry = g.paths.find((p) => p.name.endsWith('⇒ expired'))!;
    expect(expiry.steps.map((s) => s.label)).toEqual(['time+1s[after.escalate]', 'time+2s[after.escalate]', 'time+3s[after.escalate]']);
    expect(expiry.steps.map((s) => (s.expect.context as { level: number }).level)).toEqual([1, 2, 2]);
  });

  test('an activity with retries: two scripted failures, backoff 1 s then 2 s, the third attempt settles; attempts are recorded by the runtime', async () => {
    const g = generatePaths(sync, syncOptions);
    const path = g.paths.find((p) => p.name.endsWith('⇒ synced'))!;
    expect(path.name).toBe('SYNC → time+1s[retry] → time+2s[retry] → done.upload{count:10} ⇒ synced');
    const record = await runPath(g, path, { mode: 'restart', dir });
    expect(record.attempts).toEqual([
      { effectId: 'path-test~upload~r2', attempt: 1, outcome: 'failed' },
      { effectId: 'path-test~upload~r2', attempt: 2, outcome: 'failed' },
      { effectId: 'path-test~upload~r2', attempt: 3, outcome: 'succeeded' },
    ]);
    expect(record.job).toMatchObject({ value: 'synced', context: { synced: 10 } });
  });

  test('a self-send is applied in the same step, right after the event that sent it; the delayed raise fires later', () => {
    const [path] = generated.relay!.paths;
    expect(path!.name).toBe('GO → time+500ms[LATE] ⇒ done');
    expect(path!.steps[0]!.expect.records.map((r) => `${r.eventType} ${String(r.from)}→${String(r.to)}`)).toEqual(['GO idle→sent', 'PING sent→pinged']);
  });

  test('retries exhausted: the runtime delivers the error by itself after the third failure', () => {
    const g = generated.syncExhausted!;
    const failed = g.paths.find((p) => p.name.endsWith('⇒ failed'))!;
    expect(failed.name).toBe('SYNC → time+1s[retry] → time+2s[error.upload] ⇒ failed');
    expect(failed.steps.at(-1)!.expect.context).toMatchObject({ error: 'scripted failure of upload (attempt 3)' });
  });
});
