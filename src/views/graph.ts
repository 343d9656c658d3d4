/**
 * A machine's statechart as text other tools draw: Mermaid (`stateDiagram-v2`), Graphviz dot, or
 * JSON. Nested states are drawn inside their parent, parallel regions side by side. With a job,
 * its current states are highlighted and the transitions its history took are marked.
 */
import type { JsonValue, TransitionRecord } from '../index.ts';
import type { MachineView, StateView } from './machineView.ts';

/** What a job adds to its machine's graph: the state ids it is in, and the edges it took. */
export interface GraphHighlight {
  active: ReadonlySet<string>;
  /** `source id \0 event \0 target id` of each transition the job's history took. */
  taken: ReadonlySet<string>;
}

/** The graph formats `spool graph` writes (svg: laid out by layout.ts, drawn by svg.ts). */
export const GRAPH_FORMATS = ['mermaid', 'dot', 'json', 'svg'] as const;
export type GraphFormat = (typeof GRAPH_FORMATS)[number];

/** The state node ids a state value is in, ancestors included: `{ a: 'b' }` under `m` is `m.a`, `m.a.b`. */
export function activeStateIds(root: StateView, value: JsonValue | null): Set<string> {
  const out = new Set<string>([root.id]);
  const walk = (node: StateView, v: JsonValue | null): void => {
    if (typeof v === 'string') {
      const child = node.states.find((s) => s.key === v);
      if (child) out.add(child.id);
      return;
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return;
    for (const [key, inner] of Object.entries(v)) {
      const child = node.states.find((s) => s.key === key);
      if (!child) continue;
      out.add(child.id);
      walk(child, inner ?? null);
    }
  };
  walk(root, value);
  return out;
}

/**
 * How many jobs are in each state node, ancestors included (a job in `a.b` counts for `a` and
 * `a.b`), from `runtime.stats().jobs` rows of this machine version; the root is left out.
 */
export function stateCounts(view: MachineView, rows: readonly { machineId: string; machineVersion: string; value: JsonValue; count: number }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const row of rows) {
    if (row.machineId !== view.id || row.machineVersion !== view.version) continue;
    for (const id of activeStateIds(view.root, row.value)) if (id !== view.root.id) counts.set(id, (counts.get(id) ?? 0) + row.count);
  }
  return counts;
}

/** The current states of a job and the transitions its history took. */
export function highlightFor(view: MachineView, value: JsonValue, history: readonly TransitionRecord[]): GraphHighlight {
  const taken = new Set<string>();
  const edges = allEdges(view.root);
  for (const row of history) {
    if (row.outcome !== 'applied' || row.from === null) continue;
    const from = activeStateIds(view.root, row.from);
    const to = activeStateIds(view.root, row.to);
    for (const e of edges) {
      if (e.event === row.eventType && from.has(e.source) && (e.target === null ? true : to.has(e.target))) taken.add(edgeKey(e.source, e.event, e.target ?? e.source));
    }
  }
  return { active: activeStateIds(view.root, value), taken };
}

/** Render `view` as text (highlighted for a job when given); svg is async: see `machineSvg` (svg.ts). */
export function renderGraph(view: MachineView, format: Exclude<GraphFormat, 'svg'>, highlight?: GraphHighlight): string {
  if (format === 'json') {
    return `${JSON.stringify({ ...view, ...(highlight ? { active: [...highlight.active], taken: [...highlight.taken].map((k) => k.split('\0')) } : {}) }, null, 2)}\n`;
  }
  return format === 'mermaid' ? mermaid(view, highlight) : dot(view, highlight);
}

/** One transition of the tree: a state, an event, the state it goes to. */
export interface Edge {
  source: string;
  event: string;
  /** null: a transition that stays in its state (an action only). */
  target: string | null;
}

/** Every transition of `node` and its descendants, one per target. */
export function allEdges(node: StateView): Edge[] {
  const own = node.on.flatMap((t): Edge[] => (t.targets.length === 0 ? [{ source: node.id, event: t.event, target: null }] : t.targets.map((target) => ({ source: node.id, event: t.event, target }))));
  return [...own, ...node.states.flatMap(allEdges)];
}

/** How {@link GraphHighlight.taken} names a transition. */
export function edgeKey(source: string, event: string, target: string): string {
  return `${source}\0${event}\0${target}`;
}

/** An event as a label: `after 5000ms` (`after deadline` for a named delay), `done` (a state's onDone), `done: charge`, `always`, or the type itself. */
export function eventLabel(event: string): string {
  if (event === '') return 'always';
  const after = /^xstate\.after\.([^.]+)\./.exec(event);
  if (after) return /^\d+$/.test(after[1]!) ? `after ${after[1]}ms` : `after ${after[1]}`;
  if (event.startsWith('xstate.done.state.')) return 'done';
  if (event.startsWith('xstate.done.actor.')) return `done: ${event.slice('xstate.done.actor.'.length)}`;
  if (event.startsWith('xstate.error.actor.')) return `error: ${event.slice('xstate.error.actor.'.length)}`;
  return event;
}

/** A node id both Mermaid and dot take: the state's id with every other character as `_`. */
function nodeId(id: string): string {
  return `s_${id.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

function mermaid(view: MachineView, highlight?: GraphHighlight): string {
  const lines = ['stateDiagram-v2'];
  const inner = (node: StateView, depth: number): void => {
    const pad = '  '.repeat(depth);
    const regions = node.type === 'parallel' ? node.states.map((s) => [s]) : [node.states];
    regions.forEach((states, i) => {
      if (i > 0) lines.push(`${pad}--`);
      const initial = node.type === 'parallel' ? undefined : states.find((s) => s.key === node.initial);
      if (initial) lines.push(`${pad}[*] --> ${nodeId(initial.id)}`);
      for (const s of states) {
        lines.push(`${pad}state "${s.key.replace(/"/g, "'")}" as ${nodeId(s.id)}`);
        if (s.states.length > 0) {
          lines.push(`${pad}state ${nodeId(s.id)} {`);
          inner(s, depth + 1);
          lines.push(`${pad}}`);
        }
        if (s.type === 'final') lines.push(`${pad}${nodeId(s.id)} --> [*]`);
      }
    });
  };
  inner(view.root, 1);
  for (const e of allEdges(view.root)) {
    if (e.source === view.root.id && e.target === null) continue;
    const target = e.target ?? e.source;
    const mark = highlight?.taken.has(edgeKey(e.source, e.event, target)) ? ' ✓' : '';
    lines.push(`  ${nodeId(e.source === view.root.id ? target : e.source)} --> ${nodeId(target)} : ${eventLabel(e.event)}${mark}`);
  }
  if (highlight) {
    lines.push('  classDef current fill:#fde68a,stroke:#b45309,stroke-width:2px');
    for (const id of highlight.active) if (id !== view.root.id) lines.push(`  class ${nodeId(id)} current`);
  }
  return `${lines.join('\n')}\n`;
}

function dot(view: MachineView, highlight?: GraphHighlight): string {
  const lines = [`digraph "${view.id}@${view.version}" {`, '  compound=true; rankdir=LR;', '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];'];
  const compound = new Set<string>();
  const node = (s: StateView, depth: number): void => {
    const pad = '  '.repeat(depth);
    const current = highlight?.active.has(s.id) ? ', fillcolor="#fde68a", penwidth=2' : '';
    if (s.states.length === 0) {
      lines.push(`${pad}${nodeId(s.id)} [label="${s.key}"${s.type === 'final' ? ', peripheries=2' : ''}${current}];`);
      return;
    }
    compound.add(s.id);
    lines.push(`${pad}subgraph cluster_${nodeId(s.id)} {`, `${pad}  label="${s.key}${s.type === 'parallel' ? ' (parallel)' : ''}"; style="rounded${current ? ',filled' : ''}"; ${current ? 'fillcolor="#fef3c7";' : ''}`);
    lines.push(`${pad}  ${nodeId(s.id)} [shape=point, style=invis];`);
    for (const child of s.states) node(child, depth + 1);
    lines.push(`${pad}}`);
  };
  for (const s of view.root.states) node(s, 1);
  const initial = view.root.states.find((s) => s.key === view.root.initial);
  if (initial) lines.push(`  start [shape=point]; start -> ${nodeId(initial.id)};`);
  for (const e of allEdges(view.root)) {
    if (e.source === view.root.id && e.target === null) continue;
    const target = e.target ?? e.source;
    const source = e.source === view.root.id ? target : e.source;
    const attrs = [`label="${eventLabel(e.event)}"`];
    if (compound.has(source)) attrs.push(`ltail=cluster_${nodeId(source)}`);
    if (compound.has(target)) attrs.push(`lhead=cluster_${nodeId(target)}`);
    if (highlight?.taken.has(edgeKey(e.source, e.event, target))) attrs.push('color="#b45309"', 'penwidth=2');
    lines.push(`  ${nodeId(source)} -> ${nodeId(target)} [${attrs.join(', ')}];`);
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
