// A diagram drawn by views/svg.ts (on the server, or in examples/browser's Worker) put in the page, and a job's marks moved on it live.

import { svg } from './api.js';
import { h } from './dom.js';

const ZOOMS = [0.5, 0.75, 1, 1.5, 2, 3];

/**
 * Fit (the card's width, up to 1.4 times the drawn size) or a zoom of the drawn size, scrolled
 * (panned) inside the card, so a large chart's labels stay readable at any card width.
 */
function zoomBar(el, drawnWidth) {
  let zoom = null; // null: fit
  const shown = h('span', { class: 'zoom-level muted small' });
  const apply = () => {
    el.style.width = zoom === null ? '' : `${drawnWidth * zoom}px`;
    el.style.maxWidth = zoom === null ? `${drawnWidth * 1.4}px` : 'none';
    shown.textContent = zoom === null ? 'fit' : `${Math.round(zoom * 100)}%`;
  };
  const step = (dir) => {
    const now = zoom ?? (el.getBoundingClientRect().width || drawnWidth) / drawnWidth;
    zoom = dir > 0 ? (ZOOMS.find((z) => z > now + 0.01) ?? ZOOMS.at(-1)) : ([...ZOOMS].reverse().find((z) => z < now - 0.01) ?? ZOOMS[0]);
    apply();
  };
  apply();
  return h('div', { class: 'zoom-bar' },
    h('button', { type: 'button', class: 'ghost', title: 'zoom out', dataset: { zoom: 'out' }, onclick: () => step(-1) }, '−'),
    shown,
    h('button', { type: 'button', class: 'ghost', title: 'zoom in', dataset: { zoom: 'in' }, onclick: () => step(1) }, '+'),
    h('button', { type: 'button', class: 'ghost', title: 'fit the card', dataset: { zoom: 'fit' }, onclick: () => { zoom = null; apply(); } }, 'Fit'),
    h('button', { type: 'button', class: 'ghost', title: 'drawn size', dataset: { zoom: 'actual' }, onclick: () => { zoom = 1; apply(); } }, '1:1'));
}

/** Fetch the SVG at `path` into `container` (parsed as SVG, never as HTML). `onState(id)` on a click on a state. */
export async function loadDiagram(container, path, onState) {
  return showDiagram(container, await svg(path), onState);
}

/**
 * Put a drawing of views/svg.ts (its text, from the server or drawn in the page's own Worker)
 * into `container` (parsed as SVG, never as HTML), with the zoom bar. `onState(id)` on a click on a state.
 */
export function showDiagram(container, text, onState) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const root = doc.documentElement;
  if (root.nodeName !== 'svg') throw new Error('the diagram could not be read');
  const el = document.importNode(root, true);
  el.removeAttribute('width');
  el.removeAttribute('height');
  container.replaceChildren(zoomBar(el, Number(root.getAttribute('width'))), h('div', { class: 'diagram-view' }, el));
  if (onState) {
    el.addEventListener('click', (event) => {
      const state = event.target.closest('.state[data-state]');
      if (state && !state.classList.contains('state-initial') && !state.classList.contains('state-any')) onState(state.dataset.state);
    });
  }
  return el;
}

/** Put `is-current` on the states in `active` and `is-taken` on the transitions in `taken` ([source, event, target]), off the rest. */
export function applyMarks(el, marks) {
  const active = new Set(marks.active);
  for (const s of el.querySelectorAll('.state[data-state]')) s.classList.toggle('is-current', active.has(s.dataset.state));
  const taken = new Set(marks.taken.map((t) => t.join('\u0000')));
  for (const e of el.querySelectorAll('.edge[data-source]')) e.classList.toggle('is-taken', taken.has(`${e.dataset.source}\u0000${e.dataset.event}\u0000${e.dataset.target}`));
}
