/**
 * Child machines: an invoked (or spawned) child machine with an explicit id runs as a child job,
 * created in the same commit as the parent's transition, persisted and restored on its own, its
 * end settling the parent's invocation (`xstate.done.actor.<id>`), `sendTo`/`sendParent` carried
 * through the inboxes, and stopped when the parent leaves the invoking state.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, createMachine, fromPromise, sendParent, sendTo, setup } from 'xstate';
import { MachineDefinitionError, MachineRegistry } from '../src/internal.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { rawAt, rawRun } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';

const reviewer = setup({
  types: { context: {} as { notes: number; doc: string }, input: {} as { doc: string } },
  actors: { lint: fromPromise(async ({ input }: { input: { doc: string } }) => ({ ok: input.doc.length > 0 })) },
}).createMachine({
  id: 'reviewer',
  context: ({ input }) => ({ notes: 0, doc: input.doc }),
  initial: 'linting',
  states: {
    linting: { invoke: { id: 'lint', src: 'lint', input: ({ context }) => ({ doc: context.doc }), onDone: 'reading' } },
    reading: {
      after: { 1000: { actions: sendParent({ type: 'REMINDER' }) } },
      on: {
        NOTE: { actions: [assign({ notes: ({ context }) => context.notes + 1 }), sendParent({ type: 'NOTED' })] },
        DONE: 'finished',
      },
    },
    finished: { type: 'final' },
  },
  output: ({ context }) => ({ notes: context.notes }),
});

const publish = setup({
  types: { context: {} as { noted: number; reminders: number; result: unknown } },
  actors: { reviewer },
}).createMachine({
  id: 'publish',
  context: { noted: 0, reminders: 0, result: null },
  initial: 'draft',
  states: {
    draft: { on: { SUBMIT: 'review' } },
    review: {
      invoke: { id: 'review', src: 'reviewer', input: { doc: 'hello' }, onDone: { target: 'published', actions: assign({ result: ({ event }) => event.output }) } },
      on: {
        NOTED: { actions: assign({ noted: ({ context }) => context.noted + 1 }) },
        REMINDER: { actions: assign({ reminders: ({ context }) => context.reminders + 1 }) },
        FORWARD_NOTE: { actions: sendTo('review', { type: 'NOTE' }) },
        FORWARD_DONE: { actions: sendTo('review', { type: 'DONE' }) },
        WITHDRAW: 'draft',
      },
    },
    published: { type: 'final' },
  },
});

const resources = new Resources();
afterEach(() => resources.dispose());

async function open(path: string, clock: VirtualClock) {
  return resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [publish], clock });
}

describe('child machines', () => {
  it('run as child jobs: created in the parent commit, talking through inboxes, settling the parent on their end, across restarts', async () => {
    const path = resources.dbPath();
    const clock = new VirtualClock();
    let runtime = await open(path, clock);
    await runtime.start('publish', {}, { jobId: 'p' });
    await runtime.send('p', { type: 'SUBMIT' });
    await runtime.idle();
    const childId = 'p~review~r2';
    let child = await runtime.get(childId);
    expect(child.machineId).toBe('publish.reviewer');
    expect(child.value).toBe('reading'); // its own activity ran after its commit
    expect((await runtime.details('p')).effects.map((e) => [e.kind, e.status])).toEqual([['child', 'waiting']]);

    await runtime.send('p', { type: 'FORWARD_NOTE' });
    await runtime.idle();
    expect((await runtime.get(childId)).context).toMatchObject({ notes: 1 });
    expect((await runtime.get('p')).context).toMatchObject({ noted: 1 });

    // The child's own timer survives a restart of everything and reaches the parent.
    await runtime.close();
    runtime = await open(path, clock);
    clock.advance(1000);
    await runtime.tick();
    await runtime.idle();
    expect((await runtime.get('p')).context).toMatchObject({ reminders: 1 });

    await runtime.send('p', { type: 'FORWARD_DONE' });
    await runtime.idle();
    child = await runtime.get(childId);
    expect(child.final).toBe(true);
    const parent = await runtime.get('p');
    expect(parent.value).toBe('published');
    expect(parent.context).toMatchObject({ result: { notes: 1 } });
    const history = (await runtime.history('p')).map((h) => `${h.eventType}:${h.outcome}`);
    expect(history).toEqual(['xstate.init:started', 'SUBMIT:applied', 'FORWARD_NOTE:applied', 'NOTED:applied', 'REMINDER:applied', 'FORWARD_DONE:applied', 'xstate.done.actor.review:applied']);
  });

  it('are stopped when the parent leaves the invoking state; a late message from them is harmless', async () => {
    const clock = new VirtualClock();
    const runtime = await open(resources.dbPath(), clock);
    await runtime.start('publish', {}, { jobId: 'q' });
    await runtime.send('q', { type: 'SUBMIT' });
    await runtime.idle();
    // The reviewer handles no CANCEL: the parent is the one to stop it, and the refusal says so.
    await expect(runtime.cancel('q~review~r2')).rejects.toThrow('it is a child job of q: cancel that job (or send it an event that leaves the invoking state) to stop it');
    await runtime.send('q', { type: 'WITHDRAW' });
    await runtime.idle();
    const child = await runtime.get('q~review~r2');
    expect(child.status).toBe('stopped');
    expect(child.final).toBe(true);
    const details = await runtime.details('q~review~r2');
    expect(details.timers.every((t) => t.status === 'cancelled')).toBe(true);
    expect((await runtime.details('q')).effects.map((e) => e.status)).toEqual(['cancelled']);
    // Its timer never fires into the parent.
    clock.advance(5000);
    expect((await runtime.tick()).timersFired).toBe(0);
    expect((await runtime.get('q')).context).toMatchObject({ reminders: 0 });
  });

  it('an orphan (its parent left the invoking state, and the process died before stopping it) is stopped by the next recovery', async () => {
    const clock = new VirtualClock();
    const path = resources.dbPath();
    const first = await open(path, clock);
    await first.start('publish', {}, { jobId: 'o' });
    await first.send('o', { type: 'SUBMIT' });
    await first.idle();
    await first.close();
    // What the parent's WITHDRAW commit writes before its process stops the child: the invocation ends.
    expect(await rawRun(await rawAt(resources, path), "UPDATE effects SET active = 0, status = 'cancelled' WHERE id = 'o~review~r2'")).toBe(1);
    const logs: string[] = [];
    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [publish], clock, log: (e) => logs.push(e.msg) });
    const child = await second.get('o~review~r2');
    expect(child).toMatchObject({ status: 'stopped', final: true });
    expect((await second.details('o~review~r2')).timers.every((t) => t.status === 'cancelled')).toBe(true);
    expect(logs).toContain('orphaned child job stopped');
    // Its timer never fires into the parent.
    clock.advance(5000);
    expect((await second.tick()).timersFired).toBe(0);
  });

  it('are registered with their parent, and a child machine with inline logic is refused', () => {
    const ids = new MachineRegistry([publish]).all().map((m) => `${m.id}@${m.version}`);
    expect(ids).toEqual(['publish@1', 'publish.reviewer@1']);
    const inline = setup({ actors: { reviewer: createMachine({ id: 'r', initial: 'a', states: { a: { invoke: { id: 'x', src: fromPromise(async () => 1) } } } }) } }).createMachine({
      id: 'bad',
      initial: 'a',
      states: { a: { invoke: { id: 'r', src: 'reviewer' } } },
    });
    expect(() => new MachineRegistry([inline])).toThrow(MachineDefinitionError);
    expect(() => new MachineRegistry([inline])).toThrow(/inline logic/);
  });
});

describe('child machines invoked by the initial state', () => {
  const greeter = createMachine({
    id: 'greeter',
    initial: 'waiting',
    entry: sendParent({ type: 'HELLO' }),
    states: { waiting: { on: { BYE: 'gone' } }, gone: { type: 'final' } },
    output: { said: 'bye' },
  });
  const host = setup({ types: { context: {} as { hellos: number; said: unknown } }, actors: { greeter } }).createMachine({
    id: 'host',
    context: { hellos: 0, said: null },
    initial: 'hosting',
    states: {
      hosting: {
        invoke: { id: 'greeter', src: 'greeter', onDone: { target: 'over', actions: assign({ said: ({ event }) => event.output }) } },
        on: { HELLO: { actions: assign({ hellos: ({ context }) => context.hellos + 1 }) }, DISMISS: { actions: sendTo('greeter', { type: 'BYE' }) } },
      },
      over: { type: 'final' },
    },
  });

  it('are created with the parent, and their entry sendParent arrives', async () => {
    const clock = new VirtualClock();
    const runtime = await resources.runtime({ store: await resources.sqlite(resources.dbPath(), { clock }), machines: [host], clock });
    await runtime.start('host', {}, { jobId: 'h' });
    await runtime.idle();
    expect((await runtime.get('h~greeter~r1')).value).toBe('waiting');
    expect((await runtime.get('h')).context).toMatchObject({ hellos: 1 });
    await runtime.send('h', { type: 'DISMISS' });
    await runtime.idle();
    expect((await runtime.get('h')).value).toBe('over');
    expect((await runtime.get('h')).context).toMatchObject({ said: { said: 'bye' } });
  });
});
