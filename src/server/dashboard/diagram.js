// A diagram drawn by the server (views/svg.ts) put in the page, and a job's marks moved on it live.

import { svg } from './api.js';

/** Fetch the SVG at `path` into `container` (parsed as SVG, never as HTML). `onState(id)` on a click on a state. */
export async function loadDiagram(container, path, onState) {
  const text = await svg(path);
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const root = doc.documentElement;
  if (root.nodeName !== 'svg') throw new Error('the diagram could not be read');
  const el = document.importNode(root, true);
  el.removeAttribute('width');
  el.removeAttribute('height');
  // Up to 1.4 times its drawn size where there is room: labels stay readable on a wide screen.
  el.style.maxWidth = `${Number(root.getAttribute('width')) * 1.4}px`;
  container.replaceChildren(el);
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
