/**
 * Diagrams laid out by elkjs (src/views/layout.ts) and drawn as SVG (src/views/svg.ts), on
 * machines the project never tuned a drawing for: the path tests' `fulfilment` (a parallel state
 * of two nested regions, a transition out of a region to the top level) and the `sync` machine,
 * and the kiosk of graph.test.ts. Every state is a box inside its parent's box, parallel regions
 * are regions, every transition is routed; a job's marks and the counts are drawn; and
 * `spool graph --format svg` prints the same drawing.
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { MachineRegistry } from '../src/internal.ts';
import { allEdges } from '../src/views/graph.ts';
import { layoutMachine, type DiagramLayout } from '../src/views/layout.ts';
import { describeMachine, type MachineView, type StateView } from '../src/views/machineView.ts';
import { machineSvg, renderSvg } from '../src/views/svg.ts';
import { fulfilment, sync } from './fixtures/pathMachines.ts';
import { Resources, PROJECT_ROOT } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';

const res = new Resources();
afterEach(() => res.dispose());

function states(node: StateView): StateView[] {
  return node.states.flatMap((s) => [s, ...states(s)]);
}

function inside(layout: DiagramLayout, child: string, parent: string): boolean {
  const c = layout.nodes.find((n) => n.id === child)!;
  const p = layout.nodes.find((n) => n.id === parent)!;
  return c.x >= p.x && c.y >= p.y && c.x + c.width <= p.x + p.width && c.y + c.height <= p.y + p.height;
}

function overlap(a: { x: number; y: number; width: number; height: number }, b: typeof a): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

const views: [string, MachineView][] = new MachineRegistry([fulfilment, sync]).all().map((m) => [m.id, describeMachine(m)]);

describe('diagram layout (elkjs)', () => {
  it.each(views)('%s: every state a box inside its parent, siblings apart, every transition routed', async (_, view) => {
    const layout = await layoutMachine(view);
    expect(layout.width).toBeGreaterThan(0);
    const all = states(view.root);
    for (const s of all) {
      const node = layout.nodes.find((n) => n.id === s.id);
      expect(node, s.id).toBeDefined();
      expect(node!.width * node!.height).toBeGreaterThan(0);
      for (const child of s.states) expect(inside(layout, child.id, s.id), `${child.id} in ${s.id}`).toBe(true);
      const siblings = s.states.map((c) => layout.nodes.find((n) => n.id === c.id)!);
      for (const [i, a] of siblings.entries()) for (const b of siblings.slice(i + 1)) expect(overlap(a, b), `${a.id} / ${b.id}`).toBe(false);
    }
    // Children of a parallel state are its regions; other boxes say what they are.
    for (const s of all) {
      const kind = layout.nodes.find((n) => n.id === s.id)!.kind;
      const parent = all.find((p) => p.states.includes(s)) ?? view.root;
      if (parent.type === 'parallel') expect(kind).toBe('region');
      else if (s.type === 'parallel') expect(kind).toBe('parallel');
      else if (s.type === 'final') expect(kind).toBe('final');
    }
    // Every transition with a target in the tree is drawn, with a route and a label.
    const drawn = layout.edges.filter((e) => !e.initial);
    for (const e of allEdges(view.root)) {
      if (e.source === view.root.id && e.target === null) continue;
      const edge = drawn.find((d) => d.source === e.source && d.event === e.event && d.target === (e.target ?? e.source));
      expect(edge, `${e.source} ${e.event} ${e.target}`).toBeDefined();
      expect(edge!.points.length).toBeGreaterThanOrEqual(2);
      expect(edge!.labelBox).not.toBeNull();
    }
    // Every compound (not parallel) state has an initial dot with an arrow to its initial child.
    for (const s of [view.root, ...all].filter((n) => n.states.length > 0 && n.type !== 'parallel')) {
      const initial = s.states.find((c) => c.key === s.initial)!;
      expect(layout.edges.find((e) => e.initial && e.source === `${s.id}#initial`)?.target).toBe(initial.id);
    }
  });

  it('is deterministic: the same machine gives the same layout', async () => {
    const view = views[0]![1];
    expect(await layoutMachine(view)).toEqual(await layoutMachine(view));
  });
});

describe('diagram SVG', () => {
  const view = views.find(([id]) => id === 'fulfilment')![1];

  it('draws every state and transition with their ids, regions dashed, labels escaped', async () => {
    const svg = await machineSvg(view);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" class="spool-diagram"')).toBe(true);
    for (const s of states(view.root)) expect(svg).toContain(`data-state="${s.id}"`);
    expect(svg).toContain('class="state state-parallel" data-state="fulfilment.open"');
    expect(svg).toContain('class="state state-region" data-state="fulfilment.open.payment"');
    expect(svg).toContain('class="state state-final" data-state="fulfilment.open.payment.paid"');
    expect(svg).toMatch(/<g class="edge" data-source="fulfilment\.open\.payment\.unpaid" data-event="PAY" data-target="fulfilment\.open\.payment\.paid"><path d="M[\d.,LQ -]+"\/>/);
    expect(svg).not.toMatch(/class="[^"]*is-(current|taken)/);
    expect(svg).not.toContain('class="count"');
    // A label with markup in it stays text.
    const layout = await layoutMachine(view);
    const tampered = renderSvg({ ...layout, nodes: layout.nodes.map((n) => (n.id === 'fulfilment.open' ? { ...n, label: '<b>&"open"' } : n)) });
    expect(tampered).toContain('&lt;b&gt;&amp;&quot;open&quot;');
    expect(tampered).not.toContain('<b>');
  });

  it("marks a job's states and taken transitions, and draws the counts", async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines: [fulfilment] });
    const job = await runtime.start('fulfilment', { items: 2, total: 10 });
    await runtime.send(job.id, { type: 'PAY', amount: 10 });
    await runtime.start('fulfilment', { items: 1, total: 5 });
    const now = await runtime.get(job.id);
    const svg = await machineSvg(view, { job: { value: now.value, history: await runtime.history(job.id) } });
    const current = [...svg.matchAll(/class="state [^"]*is-current" data-state="([^"]+)"/g)].map((m) => m[1]).sort();
    expect(current).toEqual(['fulfilment.open', 'fulfilment.open.packing', 'fulfilment.open.packing.waiting', 'fulfilment.open.payment', 'fulfilment.open.payment.paid']);
    expect(svg).toContain('<g class="edge is-taken" data-source="fulfilment.open.payment.unpaid" data-event="PAY" data-target="fulfilment.open.payment.paid">');
    expect(svg.match(/class="edge is-taken"/g)).toHaveLength(1);

    const counted = await machineSvg(view, { stats: (await runtime.stats()).jobs });
    const counts = Object.fromEntries([...counted.matchAll(/class="count" data-state="([^"]+)" data-count="(\d+)"/g)].map((m) => [m[1], Number(m[2])]));
    expect(counts).toEqual({ 'fulfilment.open': 2, 'fulfilment.open.payment': 2, 'fulfilment.open.payment.paid': 1, 'fulfilment.open.payment.unpaid': 1, 'fulfilment.open.packing': 2, 'fulfilment.open.packing.waiting': 2 });
  });

  it('is what `spool graph --format svg` prints, with --job marking the job', async () => {
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    const machines = `${PROJECT_ROOT}test/fixtures/diagramMachines.ts`;
    expect(readFileSync(machines, 'utf8')).toContain('fulfilment');
    const plain = await runCli(['--db', db, '--machines', machines, 'graph', 'fulfilment', '--format', 'svg'], dir);
    expect(plain).toMatchObject({ code: 0, stderr: '' });
    expect(plain.stdout).toBe(await machineSvg(view));
    expect((await runCli(['--db', db, '--machines', machines, 'start', 'fulfilment', '--input', '{"items":1,"total":3}', '--id', 'f1'], dir)).code).toBe(0);
    expect((await runCli(['--db', db, '--machines', machines, 'send', 'f1', 'PACK'], dir)).code).toBe(0);
    const marked = await runCli(['--db', db, '--machines', machines, 'graph', 'fulfilment', '--job', 'f1', '--format', 'svg'], dir);
    expect(marked.code).toBe(0);
    expect(marked.stdout).toContain('class="state state-final is-current" data-state="fulfilment.open.packing.packed"');
    expect(marked.stdout).toContain('class="edge is-taken" data-source="fulfilment.open.packing.waiting" data-event="PACK"');
  });
});
