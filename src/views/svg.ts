/**
 * A laid-out statechart (layout.ts) drawn as standalone SVG: states as rounded boxes, nested and
 * parallel states as boxes around their children (regions dashed), transitions as routed arrows
 * with their event. What a job or a count adds is CSS classes and a badge, so a page can restyle
 * it or move the marks live: `is-current` on the states a job is in, `is-taken` on the
 * transitions its history took, a `.count` badge with the jobs in a state. Every state carries
 * `data-state="<id>"`, every transition `data-source`, `data-event`, `data-target`.
 */
import { edgeKey, highlightFor, stateCounts, type GraphHighlight } from './graph.ts';
import { layoutMachine, type DiagramLayout, type LayoutEdge, type LayoutNode } from './layout.ts';
import type { MachineView } from './machineView.ts';
import type { JsonValue, TransitionRecord } from '../index.ts';

/** What to mark on the drawing. */
export interface SvgMarks {
  /** State ids a job is in (ancestors included), as graph.ts's `highlightFor` gives them. */
  active?: ReadonlySet<string>;
  /** `edgeKey`s of the transitions a job took. */
  taken?: ReadonlySet<string>;
  /** Jobs per state id (graph.ts's `stateCounts`); states with none get no badge. */
  counts?: ReadonlyMap<string, number>;
}

/** The diagram's own stylesheet, scoped to `.spool-diagram`; a page may override any of it. */
export const DIAGRAM_CSS = `
.spool-diagram { font-family: ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; font-size: 12px; }
.spool-diagram text { pointer-events: none; }
.spool-diagram .state rect.box { fill: #ffffff; stroke: #cbd5e1; stroke-width: 1.2; transition: fill .25s, stroke .25s; }
.spool-diagram .state text.label { fill: #0f172a; font-weight: 500; }
.spool-diagram .state-compound > rect.box { fill: #f8fafc; }
.spool-diagram .state-compound > text.label, .spool-diagram .state-parallel > text.label { font-weight: 600; fill: #334155; }
.spool-diagram .state-parallel > rect.box { fill: #faf5ff; stroke: #a78bfa; }
.spool-diagram .state-parallel > text.tag { fill: #7c3aed; font-size: 10px; }
.spool-diagram .state-region > rect.box { fill: none; stroke: #a78bfa; stroke-dasharray: 5 4; }
.spool-diagram .state-region > text.label { fill: #6d28d9; font-style: italic; font-weight: 500; }
.spool-diagram .state-final rect.inner { fill: none; stroke: #94a3b8; stroke-width: 1; }
.spool-diagram .state-any rect.box { fill: #f1f5f9; stroke: #94a3b8; stroke-dasharray: 3 3; }
.spool-diagram .state-any text.label { fill: #475569; font-style: italic; }
.spool-diagram .state-initial circle { fill: #334155; }
.spool-diagram .state.is-current > rect.box { fill: #fef3c7; stroke: #f59e0b; stroke-width: 2.4; }
.spool-diagram .state-compound.is-current > rect.box, .spool-diagram .state-parallel.is-current > rect.box { fill: #fffbeb; }
.spool-diagram .state-region.is-current > rect.box { fill: none; stroke: #f59e0b; }
.spool-diagram .edge path { fill: none; stroke: #94a3b8; stroke-width: 1.4; marker-end: url(#spool-arrow); transition: stroke .25s; }
.spool-diagram .edge.is-initial path { stroke: #334155; marker-end: url(#spool-arrow-initial); }
.spool-diagram .edge rect.label-bg { fill: #ffffff; fill-opacity: .92; }
.spool-diagram .edge text { fill: #475569; font-size: 11px; }
.spool-diagram .edge.is-taken path { stroke: #d97706; stroke-width: 2; marker-end: url(#spool-arrow-taken); }
.spool-diagram .edge.is-taken text { fill: #b45309; font-weight: 600; }
.spool-diagram .count rect { fill: #2563eb; }
.spool-diagram .count text { fill: #ffffff; font-size: 10px; font-weight: 700; }
`;

/** Draw `layout` as an SVG document, with a job's or the counts' marks. */
export function renderSvg(layout: DiagramLayout, marks: SvgMarks = {}): string {
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="spool-diagram" viewBox="0 0 ${layout.width} ${layout.height}" width="${layout.width}" height="${layout.height}" role="img" aria-label="${esc(`statechart of ${layout.machineId}@${layout.version}`)}" data-machine="${esc(layout.machineId)}" data-version="${esc(layout.version)}">`,
    `<title>${esc(`${layout.machineId}@${layout.version}`)}</title>`,
    `<style>${DIAGRAM_CSS}</style>`,
    '<defs>',
    arrow('spool-arrow', '#94a3b8'),
    arrow('spool-arrow-taken', '#d97706'),
    arrow('spool-arrow-initial', '#334155'),
    '</defs>',
  ];
  for (const node of layout.nodes) out.push(drawNode(node, marks));
  for (const edge of layout.edges) out.push(drawEdge(edge, marks));
  for (const node of layout.nodes) {
    const count = marks.counts?.get(node.id);
    if (count !== undefined && count > 0) out.push(drawCount(node, count));
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * A machine version as SVG, laid out here: with a job's value and history, its states and
 * transitions marked; with stats rows, the jobs in each state as badges.
 */
export async function machineSvg(view: MachineView, marks: { job?: { value: JsonValue; history: readonly TransitionRecord[] }; stats?: Parameters<typeof stateCounts>[1] } = {}): Promise<string> {
  return renderSvg(await layoutMachine(view), svgMarks(view, marks));
}

/** The marks of a job (graph.ts's highlight) or of stats rows (counts), for {@link renderSvg}. */
export function svgMarks(view: MachineView, marks: { job?: { value: JsonValue; history: readonly TransitionRecord[] }; stats?: Parameters<typeof stateCounts>[1] }): SvgMarks {
  const highlight: GraphHighlight | undefined = marks.job ? highlightFor(view, marks.job.value, marks.job.history) : undefined;
  return {
    ...(highlight ? { active: highlight.active, taken: highlight.taken } : {}),
    ...(marks.stats ? { counts: stateCounts(view, marks.stats) } : {}),
  };
}

/**
 * A job's marks as plain lists (JSON, or a message to a page): the states it is in and the
 * transitions it took as `[source, event, target]`, what the dashboard's `applyMarks` (diagram.js)
 * moves on a drawing.
 */
export function markLists(marks: SvgMarks): { active: string[]; taken: [string, string, string][] } {
  return { active: [...(marks.active ?? [])], taken: [...(marks.taken ?? [])].map((k) => k.split('\0') as [string, string, string]) };
}

function arrow(id: string, colour: string): string {
  return `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,1 L9,5 L0,9 z" fill="${colour}"/></marker>`;
}

function drawNode(n: LayoutNode, marks: SvgMarks): string {
  const current = marks.active?.has(n.id) ? ' is-current' : '';
  const attrs = `class="state state-${n.kind}${current}" data-state="${esc(n.id)}"`;
  const { x, y, width: w, height: h } = n;
  if (n.kind === 'initial') return `<g ${attrs}><circle cx="${x + w / 2}" cy="${y + h / 2}" r="5"/></g>`;
  if (n.kind === 'compound' || n.kind === 'parallel' || n.kind === 'region') {
    const tag = n.kind === 'parallel' ? `<text class="tag" x="${x + w - 10}" y="${y + 19}" text-anchor="end">parallel ∥</text>` : '';
    return `<g ${attrs}><rect class="box" x="${x}" y="${y}" width="${w}" height="${h}" rx="10"/><text class="label" x="${x + 12}" y="${y + 19}">${esc(n.label)}</text>${tag}</g>`;
  }
  const rx = n.kind === 'any' ? h / 2 : 8;
  const inner = n.kind === 'final' ? `<rect class="inner" x="${x + 3.5}" y="${y + 3.5}" width="${w - 7}" height="${h - 7}" rx="5"/>` : '';
  return `<g ${attrs}><rect class="box" x="${x}" y="${y}" width="${w}" height="${h}" rx="${rx}"/>${inner}<text class="label" x="${x + w / 2}" y="${y + h / 2}" text-anchor="middle" dominant-baseline="central">${esc(n.label)}</text></g>`;
}

function drawEdge(e: LayoutEdge, marks: SvgMarks): string {
  const taken = marks.taken?.has(edgeKey(e.source, e.event, e.target)) ? ' is-taken' : '';
  const cls = `edge${e.initial ? ' is-initial' : ''}${taken}`;
  const label = e.labelBox
    ? `<rect class="label-bg" x="${e.labelBox.x}" y="${e.labelBox.y}" width="${e.labelBox.width}" height="${e.labelBox.height}" rx="4"/><text x="${e.labelBox.x + e.labelBox.width / 2}" y="${e.labelBox.y + e.labelBox.height / 2}" text-anchor="middle" dominant-baseline="central">${esc(e.label)}</text>`
    : '';
  return `<g class="${cls}" data-source="${esc(e.source)}" data-event="${esc(e.event)}" data-target="${esc(e.target)}"><path d="${roundedPath(e.points)}"/>${label}</g>`;
}

function drawCount(n: LayoutNode, count: number): string {
  const text = String(count);
  const w = Math.max(20, text.length * 7 + 10);
  const x = n.x + n.width - w / 2 - 4;
  const y = n.y - 9;
  return `<g class="count" data-state="${esc(n.id)}" data-count="${count}"><rect x="${x}" y="${y}" width="${w}" height="18" rx="9"/><text x="${x + w / 2}" y="${y + 9}" text-anchor="middle" dominant-baseline="central">${text}</text></g>`;
}

/** A polyline with its corners rounded (radius up to 6, less on short segments). */
function roundedPath(points: readonly { x: number; y: number }[]): string {
  if (points.length === 0) return '';
  const f = (n: number) => Math.round(n * 10) / 10;
  const parts = [`M${f(points[0]!.x)},${f(points[0]!.y)}`];
  for (let i = 1; i < points.length - 1; i += 1) {
    const [a, b, c] = [points[i - 1]!, points[i]!, points[i + 1]!];
    const r = Math.min(6, Math.hypot(b.x - a.x, b.y - a.y) / 2, Math.hypot(c.x - b.x, c.y - b.y) / 2);
    const before = toward(b, a, r);
    const after = toward(b, c, r);
    parts.push(`L${f(before.x)},${f(before.y)}`, `Q${f(b.x)},${f(b.y)} ${f(after.x)},${f(after.y)}`);
  }
  const last = points.at(-1)!;
  parts.push(`L${f(last.x)},${f(last.y)}`);
  return parts.join(' ');
}

function toward(from: { x: number; y: number }, to: { x: number; y: number }, distance: number): { x: number; y: number } {
  const length = Math.hypot(to.x - from.x, to.y - from.y) || 1;
  return { x: from.x + ((to.x - from.x) / length) * distance, y: from.y + ((to.y - from.y) / length) * distance };
}

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
