/**
 * `spool export`: machines the project has never seen, exported as createMachine source, load
 * back (evaluated as a module, xstate's createMachine) as machines with the same state nodes and
 * transitions; every inline function is named as dropped, and a named reference stands in for it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { assign, createMachine, fromPromise, type AnyStateMachine } from 'xstate';
import { exportSource, type DroppedFunction } from '../src/views/exportSource.ts';
import { orderDeskMachine } from './fixtures/exportMachines.ts';
import { Resources } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';

const res = new Resources();
afterEach(() => res.dispose());

const FIXTURE = fileURLToPath(new URL('./fixtures/exportMachines.ts', import.meta.url));

/** Not registrable in Spool (inline actor logic), but exportable: the editor does not run it. */
const inlineActors = createMachine({
  id: 'lab',
  initial: 'mixing',
  states: {
    mixing: {
      invoke: { id: 'stir', src: fromPromise(async () => 'stirred'), onDone: { target: 'resting', actions: assign({}) }, onError: 'spilled' },
      after: { 500: { target: 'spilled', guard: function tooLong() { return true; } } },
    },
    resting: { invoke: { src: createMachine({ id: 'timer', initial: 'a', states: { a: {} } }) }, on: { GO: 'done' } },
    spilled: { on: { RETRY: 'mixing' } },
    done: { type: 'final', output: () => ({ ok: true }) },
  },
});

/** The source evaluated as a module, as the editor's import would read it. */
async function reimport(source: string): Promise<AnyStateMachine> {
  const file = join(res.tempDir(), 'exported.mjs');
  writeFileSync(file, source);
  return ((await import(pathToFileURL(file).href)) as { machine: AnyStateMachine }).machine;
}

interface NodeLike {
  id: string;
  type: string;
  history?: string | false;
  initial?: { target?: readonly { id: string }[] };
  states: Record<string, NodeLike>;
  transitions: Map<string, readonly TransitionLike[]>;
  always?: readonly TransitionLike[];
  invoke: readonly { id: string; src: unknown }[];
}
interface TransitionLike {
  target?: readonly { id: string }[] | undefined;
  guard?: unknown;
  reenter?: boolean;
  actions: readonly unknown[];
}

/**
 * Every state node (id, type, history, initial) and its transitions (event, targets, guard,
 * re-entry, how many actions) and invocations. An inline guard or actor and the reference that
 * replaced it both read as `inline`.
 */
function shapeOf(machine: AnyStateMachine, dropped: readonly DroppedFunction[]): string[] {
  const replaced = new Set(dropped.map((d) => d.replacedBy));
  // XState names inline actor logic xstate.invoke.<n>.<state id>.
  const ref = (v: unknown) => (typeof v === 'string' ? (replaced.has(v) || v.startsWith('xstate.invoke.') ? 'inline' : v) : v === undefined ? '-' : typeof v === 'function' || typeof v === 'object' ? 'inline' : String(v));
  const guard = (g: unknown) => (g !== null && typeof g === 'object' && 'type' in g ? ref((g as { type: unknown }).type) : ref(g));
  const edge = (event: string, t: TransitionLike) => `${event} -> [${(t.target ?? []).map((s) => s.id).join(',')}] guard=${guard(t.guard)} reenter=${t.reenter ?? false} actions=${t.actions.length}`;
  const out: string[] = [];
  const walk = (node: NodeLike) => {
    out.push(`${node.id} ${node.type} history=${node.history || '-'} initial=${node.initial?.target?.map((t) => t.id).join(',') || '-'}`);
    for (const [event, ts] of node.transitions) for (const t of ts) out.push(`  ${node.id}: ${edge(event, t)}`);
    for (const t of node.always ?? []) out.push(`  ${node.id}: ${edge('(always)', t)}`);
    for (const i of node.invoke) out.push(`  ${node.id}: invoke ${i.id} src=${ref(i.src)}`);
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(machine.root as unknown as NodeLike);
  return out;
}

describe('exportSource', () => {
  it('writes a nested, parallel, delayed, guarded, invoking machine that re-imports with the same states and transitions', async () => {
    const { source, dropped } = exportSource(orderDeskMachine);
    expect(source).toMatch(/^import \{ createMachine \} from 'xstate';$/m);
    const code = source.split('\n').filter((l) => !l.startsWith('//')).join('\n');
    expect(code).not.toMatch(/=>|function/);
    const back = await reimport(source);
    expect(back.id).toBe('order-desk');
    const shape = shapeOf(orderDeskMachine, dropped);
    expect(shapeOf(back, dropped)).toEqual(shape);
    // The shape is not trivially equal: it has every kind of node and transition asked for.
    expect(shape).toEqual(
      expect.arrayContaining([
        'order-desk.fulfilling parallel history=- initial=-',
        'order-desk.open.hist history history=deep initial=-',
        'order-desk.closed final history=- initial=-',
        '  order-desk.open.browsing: CHECKOUT -> [order-desk.paying] guard=hasItems reenter=false actions=0',
        '  order-desk.open.browsing: CHECKOUT -> [order-desk.open.empty] guard=inline reenter=false actions=0',
        '  order-desk.open.browsing: xstate.after.patience.order-desk.open.browsing -> [order-desk.open.idle] guard=- reenter=false actions=0',
        '  order-desk.open.empty: (always) -> [order-desk.open.browsing] guard=hasItems reenter=false actions=0',
        '  order-desk.paying: invoke charge src=charge',
        '  order-desk.paying: xstate.error.actor.charge -> [order-desk.open.hist] guard=- reenter=false actions=0',
        '  order-desk.open: RESET -> [order-desk.open] guard=- reenter=true actions=0',
      ]),
    );
    expect(JSON.stringify(back.config.states?.["open"]?.states?.["idle"]?.meta)).toBe('{"hint":"wakes after a second"}');
    // Named references stay; every inline function is named.
    expect(dropped.map((d) => [d.path, d.kind, d.replacedBy])).toEqual([
      ['context', 'value', null],
      ['states.open.states.browsing.on.ADD.actions', 'action', 'assign@states.open.states.browsing.on.ADD.actions'],
      ['states.open.states.browsing.on.CHECKOUT[1].guard', 'guard', 'inline.guard@states.open.states.browsing.on.CHECKOUT[1].guard'],
      ['states.paying.invoke.input', 'value', null],
      ['states.closed.entry[0]', 'action', 'raise@states.closed.entry[0]'],
      ['states.closed.entry[1]', 'action', 'thankYou'],
    ]);
    for (const d of dropped) expect(source).toContain(`//   ${d.path} (${d.kind})`);
  });

  it('replaces inline actors with named references, keeping every invocation and transition', async () => {
    const { source, dropped } = exportSource(inlineActors);
    const back = await reimport(source);
    expect(shapeOf(back, dropped)).toEqual(shapeOf(inlineActors, dropped));
    expect(dropped.filter((d) => d.kind === 'actor').map((d) => d.replacedBy)).toEqual(['inline.actor@states.mixing.invoke.src', 'timer']);
    expect(dropped.find((d) => d.kind === 'guard')?.replacedBy).toBe('tooLong');
    expect(dropped.some((d) => d.path === 'states.done.output')).toBe(true);
  });
});

describe('spool export', () => {
  it('prints the source and names what it dropped on stderr; --json gives both in one document', async () => {
    const dir = res.tempDir();
    const run = await runCli(['--machines', FIXTURE, 'export', 'order-desk'], dir);
    expect(run.stderr).toContain('spool export: dropped 6 inline functions');
    expect(run.stderr).toContain('states.open.states.browsing.on.CHECKOUT[1].guard (guard)');
    expect(run.code).toBe(0);
    expect(shapeOf(await reimport(run.stdout), exportSource(orderDeskMachine).dropped)).toEqual(shapeOf(orderDeskMachine, exportSource(orderDeskMachine).dropped));

    const json = await runCli(['--machines', FIXTURE, '--json', 'export', 'order-desk'], dir);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as { machine: string; version: string; source: string; dropped: DroppedFunction[] };
    expect(doc).toMatchObject({ machine: 'order-desk', version: 1, source: run.stdout });
    expect(doc.dropped).toHaveLength(6);

    const missing = await runCli(['--machines', FIXTURE, 'export', 'order-dsk'], dir);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('No machine "order-dsk"');
  });
});
