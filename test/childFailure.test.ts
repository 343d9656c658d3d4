/**
 * A child job that fails (its event's action throws) ends in error and delivers
 * `xstate.error.actor.<id>` to its parent, so the parent's `onError` runs: on the runtime, after a
 * SIGKILL between the child's commit and the parent's, and in the path tests (the model follows
 * the same step). And progress reported by an attempt run again never moves backwards unless the
 * machine sets it lower.
 */
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it, test } from 'vitest';
import { assign, fromPromise, setup } from 'xstate';
import { RetryableError, type ActivityArgs } from '../src/index.ts';
import { describeMachinePaths } from '../src/testing/index.ts';
import { ChildScript } from './helpers/proc.ts';
import { Resources } from './helpers/resources.ts';
import { gate, openRuntime, releaseGates } from './helpers/durable.ts';
import { inspection, inspectionPaths } from './fixtures/childFailureMachines.ts';

const CHILD = fileURLToPath(new URL('./fixtures/childFailureChild.ts', import.meta.url));
const MODULE = 'test/fixtures/childFailureMachines.ts';
const dir = join(fileURLToPath(new URL('..', import.meta.url)), '.vitest-tmp', `child-failure-${randomBytes(6).toString('hex')}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const res = new Resources();
const procs: ChildScript[] = [];
afterEach(async () => {
  releaseGates();
  await Promise.all(procs.splice(0).map((p) => p.kill()));
  await res.dispose();
});

/** What the parent and the child job hold once the child's failure reached the parent. */
async function expectHandled(runtime: Awaited<ReturnType<typeof openRuntime>>['runtime'], parentId: string, childId: string, before: string[][] = []): Promise<void> {
  const parent = await runtime.get(parentId);
  expect(parent).toMatchObject({ value: 'failed', status: 'done', context: { error: { name: 'Error', message: expect.stringContaining('probe exploded on purpose') } } });
  const child = await runtime.get(childId);
  expect(child).toMatchObject({ status: 'error', value: 'running', final: true });
  expect((await runtime.history(childId)).map((h) => [h.eventType, h.outcome])).toEqual([['xstate.init', 'started'], ...before, ['BREAK', 'failed']]);
  const history = await runtime.history(parentId);
  expect(history.at(-1)).toMatchObject({ eventType: 'xstate.error.actor.probe', outcome: 'applied', from: 'inspecting', to: 'failed' });
  const effect = (await runtime.details(parentId)).effects.find((e) => e.id === childId);
  expect(effect).toMatchObject({ kind: 'child', status: 'failed', error: { message: expect.stringContaining('probe exploded') } });
}

describe('a failing child job reaches its parent', () => {
  it("as xstate.error.actor.<id>: the parent's onError runs, the child ends in error", async () => {
    const { runtime } = await openRuntime(res, [inspection]);
    const parent = await runtime.start('inspection', {}, { jobId: 'insp-1' });
    const go = await runtime.send(parent.id, { type: 'GO' });
    const childId = `insp-1~probe~r${go.revision}`;
    await runtime.send(childId, { type: 'PING' });
    const broke = await runtime.send(childId, { type: 'BREAK' });
    expect(broke.status).toBe('failed');
    await runtime.idle();
    await expectHandled(runtime, parent.id, childId, [['PING', 'applied']]);
  });

  it('after a SIGKILL between the child failure commit and the parent applying it', async () => {
    const path = res.dbPath();
    const proc = new ChildScript(CHILD, [path], { SPOOL_CRASH_AT: 'after-commit:2' });
    procs.push(proc);
    const started = await proc.waitFor((l) => l.type === 'started');
    expect(await proc.exited).toMatchObject({ signal: 'SIGKILL' });
    expect(proc.lines.some((l) => l.type === 'sent')).toBe(false);
    const { runtime, store } = await openRuntime(res, [inspection], { path, recover: false });
    // Durable before the kill: the child ended, its parent's error event waits in the parent's inbox.
    expect((await store.getJob(started['child'] as string))?.status).toBe('error');
    expect((await store.pendingEvents(started['parent'] as string, 10)).map((e) => e.type)).toEqual(['xstate.error.actor.probe']);
    await runtime.recover();
    await runtime.idle();
    await expectHandled(runtime, started['parent'] as string, started['child'] as string);
  });
});

describe('path tests of a parent whose child fails', () => {
  const generated = describeMachinePaths(inspectionPaths, { crash: true, childCrash: 1, module: MODULE, dir })!;
  test("cover the parent's onError for the child, none waived", () => {
    expect(generated.coverage.gaps).toEqual([]);
    expect(generated.coverage.waived).toBe(0);
    expect(generated.transitions.map((t) => t.label)).toContain('inspecting --xstate.error.actor.probe--> failed');
    const child = generated.children[0]!;
    expect(child.coverage.gaps).toEqual([]);
    expect(child.coverage.waived).toBe(0); // BREAK's action throws: taken, its failure is what the parent covers
    expect(child.coverage.transitions.find((t) => t.event === 'BREAK')).toMatchObject({ covered: true });
    const broken = generated.paths.find((p) => p.steps.some((s) => s.label === 'BREAK@probe'))!;
    const last = broken.steps.at(-1)!.expect;
    expect(last.value).toBe('failed');
    expect(last.records).toEqual([{ eventType: 'xstate.error.actor.probe', outcome: 'applied', from: 'inspecting', to: 'failed' }]);
    expect(last.children[0]).toMatchObject({ status: 'error', records: [{ eventType: 'BREAK', outcome: 'failed', from: 'running', to: 'running' }] });
  });
});

describe('progress of an attempt run again', () => {
  let reported = gate();
  let finish = gate();
  const render = setup({
    types: { context: {} as { progress: number } },
    actors: {
      render: fromPromise(async (args) => {
        const { attempt, progress } = args as unknown as ActivityArgs<unknown>;
        if (attempt === 1) {
          await progress(60);
          throw new RetryableError('worker lost', { retryAfterMs: 1000 });
        }
        await progress(20); // the second attempt starts from the beginning
        reported.resolve();
        await finish.promise;
        return 'ok';
      }),
    },
  }).createMachine({
    id: 'render',
    context: { progress: 0 },
    initial: 'rendering',
    states: {
      rendering: { invoke: { id: 'render', src: 'render', onDone: { target: 'checking', actions: assign({ progress: 5 }) } } },
      checking: { on: { DONE: 'done' } },
      done: { type: 'final' },
    },
  });

  it('never moves backwards; the machine may set it lower', async () => {
    reported = gate();
    finish = gate();
    const { runtime, clock } = await openRuntime(res, [render]);
    const job = await runtime.start('render', {});
    await runtime.idle();
    expect((await runtime.get(job.id)).progress).toBe(60);
    clock.advance(1000);
    await runtime.tick();
    await reported.promise;
    expect((await runtime.get(job.id)).progress).toBe(60); // attempt 2 reported 20: kept at 60
    await runtime.setProgress(job.id, 30); // the application itself may set it lower
    expect((await runtime.get(job.id)).progress).toBe(30);
    finish.resolve();
    await runtime.idle();
    const after = await runtime.get(job.id);
    expect(after.value).toBe('checking');
    expect(after.progress).toBe(5); // set lower by the machine (context.progress)
    expect((await runtime.details(job.id)).attempts.map((a) => a.attempt)).toEqual([1, 2]);
  });
});
