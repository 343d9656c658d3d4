// Small DOM helpers: elements built from data (text is always text: nothing is parsed as HTML), chips, times.

/** `h('a', { href, class }, child, ...)`: attributes starting with `on` are listeners; children are nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Every leaf state path of a state value: `{ open: { pay: 'paid' } }` is `open.pay.paid`. */
export function statePaths(value, prefix = '') {
  if (typeof value === 'string') return [prefix + value];
  if (value === null || typeof value !== 'object') return [prefix || '?'];
  const out = [];
  for (const [k, v] of Object.entries(value)) out.push(...statePaths(v, `${prefix}${k}.`));
  return out.length ? out : [prefix.slice(0, -1) || '?'];
}

/** A colour per state name (the same name has the same colour on every page). */
function hue(text) {
  let n = 0;
  for (const ch of text) n = (n * 31 + ch.codePointAt(0)) % 360;
  return n;
}

export function stateChip(path) {
  return h('span', { class: 'chip state-chip', style: `--hue:${hue(path)}`, title: path }, path);
}

export function stateChips(value) {
  return h('span', { class: 'chips' }, statePaths(value).map(stateChip));
}

const STATUS_TEXT = { active: 'active', done: 'done', error: 'error', stopped: 'stopped' };

export function statusChip(status) {
  return h('span', { class: `chip status status-${status}` }, STATUS_TEXT[status] ?? status);
}

/** The flags a job may carry, as small chips. */
export function flagChips(job, extra = {}) {
  return [
    job.suspended && h('span', { class: 'chip flag flag-suspended', title: job.suspended.reason ?? '' }, 'suspended'),
    job.quarantine && h('span', { class: 'chip flag flag-quarantined', title: job.quarantine }, 'quarantined'),
    job.cancel && !job.cancel.completed && h('span', { class: 'chip flag flag-cancel' }, 'cancel requested'),
    extra.stuck && h('span', { class: 'chip flag flag-stuck', title: 'nothing recorded will move this job' }, 'stuck'),
  ];
}

export function progressBar(progress) {
  if (progress === null || progress === undefined) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'progress', title: `${progress}%` }, h('span', { class: 'bar', style: `width:${Math.max(0, Math.min(100, progress))}%` }), h('span', { class: 'pct' }, `${progress}%`));
}

/** `3 min ago`, `in 20 s`: relative to now; the exact time is in the title. */
export function ago(ms) {
  if (ms === null || ms === undefined) return h('span', { class: 'muted' }, '—');
  const d = ms - Date.now();
  const a = Math.abs(d);
  const [n, unit] = a < 60e3 ? [a / 1e3, 's'] : a < 3600e3 ? [a / 60e3, 'min'] : a < 86400e3 ? [a / 3600e3, 'h'] : [a / 86400e3, 'd'];
  const text = `${Math.round(n)} ${unit}`;
  return h('time', { datetime: new Date(ms).toISOString(), title: new Date(ms).toLocaleString() }, d > 1000 ? `in ${text}` : a < 1500 ? 'just now' : `${text} ago`);
}

/** A JSON value, pretty-printed. */
export function jsonBlock(value) {
  return h('pre', { class: 'json' }, value === undefined ? '—' : JSON.stringify(value, null, 2));
}

export function card(title, ...body) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...body);
}

export function empty(text) {
  return h('p', { class: 'muted empty' }, text);
}

/** A message at the bottom right for a few seconds. */
export function toast(message, kind = 'ok') {
  const el = h('div', { class: `toast toast-${kind}` }, message);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

export function link(href, ...children) {
  return h('a', { href, 'data-link': true }, ...children);
}

/** Run `work` after `ms`, or once the tab is visible again if it is hidden then; `cancel()` stops it. */
export function whenVisible(work, ms) {
  let id = 0;
  const onVisible = () => {
    if (document.visibilityState !== 'visible') return;
    document.removeEventListener('visibilitychange', onVisible);
    void work();
  };
  id = setTimeout(() => {
    if (document.visibilityState === 'visible') void work();
    else document.addEventListener('visibilitychange', onVisible);
  }, ms);
  return {
    cancel() {
      clearTimeout(id);
      document.removeEventListener('visibilitychange', onVisible);
    },
  };
}
