/**
 * A machine's statechart laid out for drawing, in one place: elkjs (the Eclipse Layout Kernel's
 * layered algorithm, compound nodes with `INCLUDE_CHILDREN`) places every state as a box, nested
 * and parallel states as boxes inside their parent, and routes every transition, hierarchy
 * crossings included. The result is plain positioned boxes and polylines in one coordinate space
 * (the diagram's), which svg.ts draws for the dashboard and `spool graph --format svg`.
 */
import elkModule from 'elkjs/lib/elk.bundled.js';
import type { ELK, ELKConstructorArguments, ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import { allEdges, edgeKey, eventLabel } from './graph.ts';
import type { MachineView, StateView } from './machineView.ts';

/**
 * What a box is: a leaf state (`atomic`, `final`, `history`), a state with children
 * (`compound`, `parallel`), a region (a child of a parallel state, drawn dashed), or a marker:
 * `initial` (the dot before a compound state's initial child) and `any` (the source of the
 * machine's own transitions, taken from whatever state the job is in).
 */
export type LayoutNodeKind = 'atomic' | 'final' | 'history' | 'compound' | 'parallel' | 'region' | 'initial' | 'any';

/** A positioned box; `x`, `y` are its top-left corner in the diagram's coordinates. */
export interface LayoutNode {
  /** The state node's id (markers: `<parent id>#initial`, `<root id>#any`). */
  id: string;
  label: string;
  kind: LayoutNodeKind;
  /** The id of the box it is drawn in (null: the diagram). */
  parent: string | null;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A routed transition (or an initial marker's arrow). */
export interface LayoutEdge {
  /** `source`, `event`, `target` as graph.ts's `edgeKey` joins them; an initial arrow's event is `''` and `initial` is true. */
  source: string;
  event: string;
  target: string;
  initial: boolean;
  label: string;
  /** The route: start, bends, end. */
  points: { x: number; y: number }[];
  /** Where the label goes (top-left), or null for no label. */
  labelBox: { x: number; y: number; width: number; height: number } | null;
}

/** A laid-out machine version: boxes parents first, then edges. */
export interface DiagramLayout {
  machineId: string;
  version: string;
  width: number;
  height: number;
  nodes: LayoutNode[];
  edges: LayoutEdge[];
}

/** Sizes the layout reserves: text is measured by an average glyph width of the diagram's font. */
const CHAR_WIDTH = 7.2;
const LABEL_CHAR_WIDTH = 6.4;
const STATE_HEIGHT = 36;
const LABEL_HEIGHT = 16;
const HEADER = 30;
const MARKER = 14;

const ROOT_OPTIONS: Record<string, string> = {
  'elk.algorithm': 'layered',
  'elk.direction': 'RIGHT',
  'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
  'elk.edgeRouting': 'ORTHOGONAL',
  'elk.layered.spacing.nodeNodeBetweenLayers': '48',
  'elk.layered.spacing.edgeNodeBetweenLayers': '20',
  'elk.spacing.nodeNode': '28',
  'elk.spacing.edgeNode': '16',
  'elk.spacing.edgeEdge': '12',
  'elk.spacing.edgeLabel': '4',
  'elk.spacing.componentComponent': '28',
  'elk.edgeLabels.placement': 'CENTER',
  'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
  // The machine's own order of states and transitions decides where a cycle is broken: the initial state comes first.
  'elk.layered.cycleBreaking.strategy': 'MODEL_ORDER',
  'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
  'elk.padding': '[top=16,left=16,bottom=16,right=16]',
  'org.eclipse.elk.json.edgeCoords': 'ROOT',
  'org.eclipse.elk.json.shapeCoords': 'ROOT',
};

/** elkjs is CommonJS with an ES-style `export default` in its types: the module (or its `default`) is the constructor. */
type ElkConstructor = new (args?: ELKConstructorArguments) => ELK;
const loaded = elkModule as unknown as ElkConstructor & { default?: ElkConstructor };
const elk = new (loaded.default ?? loaded)();

/** Markers (an initial dot, "any state") go in the first layer of their box: where reading starts. */
const FIRST = { 'elk.layered.layering.layerConstraint': 'FIRST' };

/**
 * Lay out a machine version: every state a box (its children inside it), an initial dot in each
 * compound state, an "any state" marker for the machine's own transitions, every transition routed.
 * Deterministic: the same view gives the same layout (callers may cache it per version).
 */
export async function layoutMachine(view: MachineView): Promise<DiagramLayout> {
  const meta: Meta = { kinds: new Map(), labels: new Map(), parents: new Map() };
  const edges: Omit<LayoutEdge, 'points' | 'labelBox'>[] = [];
  const box = (node: StateView, parentType: string, parentId: string | null): ElkNode => {
    note(meta, node.id, stateKind(node, parentType), node.key, parentId);
    if (node.states.length === 0) return { id: node.id, width: boxWidth(node.key), height: STATE_HEIGHT };
    const children = node.states.map((s) => box(s, node.type, node.id));
    const marker = initialMarker(node, node.id, meta, edges);
    return { id: node.id, layoutOptions: { 'elk.padding': `[top=${HEADER},left=14,bottom=14,right=14]` }, children: marker ? [marker, ...children] : children };
  };
  const root = view.root;
  const children = root.states.map((s) => box(s, root.type, null));
  const rootMarker = initialMarker(root, null, meta, edges);
  if (rootMarker) children.unshift(rootMarker);
  const anyId = `${root.id}#any`;
  const seen = new Set(edges.map((e) => edgeKey(e.source, e.event, e.target)));
  for (const e of allEdges(root)) {
    if (e.source === root.id && e.target === null) continue; // the machine's own actions: nothing to draw
    const target = e.target ?? e.source;
    const key = edgeKey(e.source, e.event, target);
    if (seen.has(key) || !meta.kinds.has(target)) continue;
    seen.add(key);
    if (e.source === root.id && !meta.kinds.has(anyId)) {
      note(meta, anyId, 'any', 'any state', null);
      children.unshift({ id: anyId, width: boxWidth('any state'), height: 26, layoutOptions: FIRST });
    }
    edges.push({ source: e.source, event: e.event, target, initial: false, label: eventLabel(e.event) });
  }
  const graph: ElkNode = {
    id: '__diagram',
    layoutOptions: ROOT_OPTIONS,
    children,
    edges: edges.map((e, i): ElkExtendedEdge => ({
      id: `e${i}`,
      sources: [e.source === root.id ? anyId : e.source],
      targets: [e.target],
      ...(e.initial ? {} : { labels: [{ id: `e${i}l`, text: e.label, width: Math.ceil(e.label.length * LABEL_CHAR_WIDTH) + 10, height: LABEL_HEIGHT }] }),
    })),
  };
  return collect(view, await elk.layout(graph), edges, meta);
}

/** What the layout knows of each box beside ELK's geometry. */
interface Meta {
  kinds: Map<string, LayoutNodeKind>;
  labels: Map<string, string>;
  parents: Map<string, string | null>;
}

function note(meta: Meta, id: string, kind: LayoutNodeKind, label: string, parent: string | null): void {
  meta.kinds.set(id, kind);
  meta.labels.set(id, label);
  meta.parents.set(id, parent);
}

function stateKind(node: StateView, parentType: string): LayoutNodeKind {
  if (parentType === 'parallel') return 'region';
  if (node.type === 'parallel') return 'parallel';
  if (node.states.length > 0) return 'compound';
  if (node.type === 'final') return 'final';
  if (node.type === 'history') return 'history';
  return 'atomic';
}

/** The initial dot of a compound (not parallel) state and its arrow, drawn in `parent`; none for a parallel state or one without an initial child. */
function initialMarker(node: StateView, parent: string | null, meta: Meta, edges: Omit<LayoutEdge, 'points' | 'labelBox'>[]): ElkNode | undefined {
  const initial = node.type === 'parallel' ? undefined : node.states.find((s) => s.key === node.initial);
  if (!initial) return undefined;
  const id = `${node.id}#initial`;
  note(meta, id, 'initial', '', parent);
  edges.push({ source: id, event: '', target: initial.id, initial: true, label: '' });
  return { id, width: MARKER, height: MARKER, layoutOptions: FIRST };
}

function boxWidth(label: string): number {
  return Math.max(84, Math.ceil(label.length * CHAR_WIDTH) + 32);
}

/** ELK's result (root coordinates) as the layout's flat lists. */
function collect(
  view: MachineView,
  laid: ElkNode,
  edges: Omit<LayoutEdge, 'points' | 'labelBox'>[],
  meta: Meta,
): DiagramLayout {
  const nodes: LayoutNode[] = [];
  const walk = (n: ElkNode): void => {
    for (const c of n.children ?? []) {
      nodes.push({ id: c.id, label: meta.labels.get(c.id) ?? c.id, kind: meta.kinds.get(c.id) ?? 'atomic', parent: meta.parents.get(c.id) ?? null, x: c.x ?? 0, y: c.y ?? 0, width: c.width ?? 0, height: c.height ?? 0 });
      walk(c);
    }
  };
  walk(laid);
  const routed = (laid.edges ?? []).map((e, i) => {
    const section = e.sections?.[0];
    const points = section ? [section.startPoint, ...(section.bendPoints ?? []), section.endPoint].map((p) => ({ x: p.x, y: p.y })) : [];
    const label = e.labels?.[0];
    const labelBox = label && label.x !== undefined && label.y !== undefined ? { x: label.x, y: label.y, width: label.width ?? 0, height: label.height ?? 0 } : null;
    return { ...edges[i]!, points, labelBox };
  });
  return { machineId: view.id, version: view.version, width: Math.ceil(laid.width ?? 0), height: Math.ceil(laid.height ?? 0), nodes, edges: routed };
}
