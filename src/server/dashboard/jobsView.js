// The jobs page: counts by machine and state (from /api/stats), then a filtered, paged table of jobs.
// It reads again every few seconds while the tab is visible.

import { enc, get } from './api.js';
import { ago, card, whenVisible, empty, fill, flagChips, h, link, progressBar, stateChip, stateChips, statePaths, statusChip } from './dom.js';

const STATUSES = ['active', 'done', 'error', 'stopped'];
const FLAGS = { stuck: 'stuck', suspended: 'suspended', quarantined: 'quarantined', exhausted: 'exhausted', cancelRequested: 'cancel requested' };
const PAGE = 25;
const REFRESH_MS = 4000;

export function renderJobs(main, params) {
  const filter = { machine: params.get('machine') ?? '', state: params.get('state') ?? '', status: params.get('status') ?? '', flag: params.get('flag') ?? '' };
  const cursors = [params.get('after') ?? ''];
  const summary = h('div', { class: 'summary' });
  const machines = h('div', { class: 'machine-cards' });
  const table = h('div', { class: 'table-wrap' });
  const pager = h('div', { class: 'pager' });
  const controls = filters(filter, () => {
    cursors.splice(0, cursors.length, '');
    syncAddress(filter, '');
    void refresh();
  });
  fill(main, h('header', { class: 'page-head' }, h('h1', {}, 'Jobs'), h('span', { class: 'muted live-note' }, 'refreshes every few seconds')), summary, machines, card('Jobs', controls, table, pager));

  let stopped = false;
  let timer = {};
  async function refresh() {
    timer.cancel?.();
    try {
      const [stats, page] = await Promise.all([get('/api/stats'), get(`/api/jobs?${query(filter, cursors.at(-1))}`)]);
      if (stopped) return;
      drawSummary(summary, stats);
      drawMachines(machines, stats, filter, () => { cursors.splice(0, cursors.length, ''); syncAddress(filter, ''); void refresh(); controls.sync(); });
      drawTable(table, page.jobs);
      drawPager(pager, page.next, cursors, () => void refresh(), filter);
    } catch (error) {
      fill(table, h('p', { class: 'error-text' }, `Could not read jobs: ${error.message}`));
    }
    if (!stopped) timer = whenVisible(refresh, REFRESH_MS);
  }
  void refresh();
  return () => {
    stopped = true;
    timer.cancel?.();
  };
}

function query(filter, after) {
  const q = new URLSearchParams({ limit: String(PAGE) });
  if (filter.machine) q.set('machine', filter.machine);
  if (filter.state) q.set('state', filter.state);
  if (filter.status) q.set('status', filter.status);
  if (filter.flag) q.set(filter.flag, 'true');
  if (after) q.set('after', after);
  return q.toString();
}

function syncAddress(filter, after) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
  if (after) q.set('after', after);
  history.replaceState(null, '', `/${q.size ? `?${q}` : ''}`);
}

function filters(filter, changed) {
  const machine = h('input', { type: 'search', placeholder: 'machine', value: filter.machine, 'aria-label': 'machine' });
  const state = h('input', { type: 'search', placeholder: 'state (e.g. processing)', value: filter.state, 'aria-label': 'state' });
  const status = h('select', { 'aria-label': 'status' }, h('option', { value: '' }, 'any status'), STATUSES.map((s) => h('option', { value: s, selected: filter.status === s }, s)));
  const flag = h('select', { 'aria-label': 'flag' }, h('option', { value: '' }, 'any flag'), Object.entries(FLAGS).map(([k, v]) => h('option', { value: k, selected: filter.flag === k }, v)));
  const apply = () => {
    Object.assign(filter, { machine: machine.value.trim(), state: state.value.trim(), status: status.value, flag: flag.value });
    changed();
  };
  for (const el of [status, flag]) el.addEventListener('change', apply);
  for (const el of [machine, state]) el.addEventListener('change', apply);
  const clear = h('button', { type: 'button', class: 'ghost', onclick: () => { machine.value = state.value = status.value = flag.value = ''; apply(); } }, 'Clear');
  const bar = h('div', { class: 'filters' }, machine, state, status, flag, clear);
  bar.sync = () => {
    machine.value = filter.machine;
    state.value = filter.state;
  };
  return bar;
}

function drawSummary(el, stats) {
  const by = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  for (const row of stats.jobs) by[row.status] = (by[row.status] ?? 0) + row.count;
  const total = Object.values(by).reduce((a, b) => a + b, 0);
  const tile = (label, n, cls = '') => h('div', { class: `tile ${cls}` }, h('div', { class: 'n' }, String(n)), h('div', { class: 'label' }, label));
  fill(el, tile('jobs', total), STATUSES.map((s) => tile(s, by[s], `tile-${s}`)), tile('suspended', stats.suspended, 'tile-warn'), tile('quarantined', stats.quarantined, 'tile-bad'), tile('stuck', stats.stuck, 'tile-warn'), tile('waiting for input', stats.waitingForInput));
}

/** One card per machine: its jobs by (leaf) state, each a link that filters the table. */
function drawMachines(el, stats, filter, changed) {
  const per = new Map();
  for (const row of stats.jobs) {
    const m = per.get(row.machineId) ?? new Map();
    for (const path of statePaths(row.value)) m.set(path, (m.get(path) ?? 0) + row.count);
    per.set(row.machineId, m);
  }
  if (per.size === 0) return fill(el, empty('No jobs yet. Start one with `spool start <machine>` or from a machine\'s page.'));
  fill(el, [...per].map(([machine, states]) => {
    const total = [...states.values()].reduce((a, b) => a + b, 0);
    return h('div', { class: 'machine-card' },
      h('div', { class: 'row between' }, link(`/machines/${enc(machine)}`, h('strong', {}, machine)), h('span', { class: 'muted' }, `${total} job${total === 1 ? '' : 's'}`)),
      h('div', { class: 'state-counts' }, [...states].map(([path, n]) => h('button', {
        type: 'button', class: `count-chip${filter.machine === machine && filter.state === path ? ' selected' : ''}`,
        onclick: () => { Object.assign(filter, { machine, state: path }); changed(); },
      }, stateChip(path), h('span', { class: 'n' }, String(n))))));
  }));
}

function drawTable(el, jobs) {
  if (jobs.length === 0) return fill(el, empty('No job matches these filters.'));
  fill(el, h('table', { class: 'jobs' },
    h('thead', {}, h('tr', {}, ['Job', 'Machine', 'State', 'Status', 'Progress', 'Updated', 'Created'].map((t) => h('th', {}, t)))),
    h('tbody', {}, jobs.map((j) => h('tr', { dataset: { job: j.id } },
      h('td', {}, link(`/jobs/${enc(j.id)}`, h('span', { class: 'mono' }, j.id))),
      h('td', {}, link(`/machines/${enc(j.machineId)}`, j.machineId), h('span', { class: 'muted' }, ` @${j.machineVersion}`)),
      h('td', {}, stateChips(j.value)),
      h('td', {}, statusChip(j.status), ' ', flagChips(j)),
      h('td', {}, progressBar(j.progress)),
      h('td', {}, ago(j.updatedAt)),
      h('td', {}, ago(j.createdAt)))))));
}

function drawPager(el, next, cursors, go, filter) {
  const prev = h('button', { type: 'button', class: 'ghost', disabled: cursors.length < 2, onclick: () => { cursors.pop(); syncAddress(filter, cursors.at(-1)); go(); } }, '← Previous');
  const more = h('button', { type: 'button', class: 'ghost', disabled: !next, onclick: () => { cursors.push(next); syncAddress(filter, next); go(); } }, 'Next →');
  fill(el, prev, h('span', { class: 'muted' }, `page ${cursors.length}`), more);
}
