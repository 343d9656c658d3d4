// A machine's page: its diagram with the count of jobs in each state drawn on it (read again every
// few seconds), its events and their fields, and a form that starts a job from its input schema.

import { enc, get, post, token } from './api.js';
import { askToken, navigate } from './shell.js';
import { loadDiagram } from './diagram.js';
import { card, empty, fill, h, link, toast, whenVisible } from './dom.js';
import { schemaForm } from './schemaForm.js';

const REFRESH_MS = 5000;

export function renderMachine(main, machineId) {
  const head = h('header', { class: 'page-head' }, h('h1', {}, machineId));
  const diagram = h('div', { class: 'diagram', id: 'machine-diagram' }, empty('Drawing…'));
  const side = h('div', { class: 'side' });
  fill(main, h('nav', { class: 'crumbs' }, link('/', 'Jobs'), ' / ', machineId), head,
    h('div', { class: 'job-grid' }, h('div', { class: 'job-main' }, card('Jobs in each state', h('p', { class: 'muted small' }, 'Click a state to list its jobs.'), diagram)), side));
  let stopped = false;
  let timer = {};
  let version;

  const draw = async () => {
    timer.cancel?.();
    try {
      await loadDiagram(diagram, `/api/machines/${enc(machineId)}/diagram?counts=true&version=${enc(version)}`, (stateId) => {
        const path = stateId.startsWith(`${machineId}.`) ? stateId.slice(machineId.length + 1) : stateId;
        navigate(`/?machine=${enc(machineId)}&state=${enc(path)}`);
      });
    } catch (error) {
      fill(diagram, h('p', { class: 'error-text' }, error.message));
    }
    if (!stopped) timer = whenVisible(draw, REFRESH_MS);
  };

  get(`/api/machines/${enc(machineId)}`).then(({ versions }) => {
    if (stopped) return;
    const show = (v) => {
      version = v.version;
      fill(head, h('h1', {}, machineId), h('span', { class: 'chip' }, `version ${v.version}`), versions.length > 1 ? versionPicker(versions, v, show) : null, v.description ? h('p', { class: 'muted description' }, v.description) : null);
      fill(side, startCard(machineId, v), eventsCard(v), card('Jobs', link(`/?machine=${enc(machineId)}`, `All ${machineId} jobs →`)));
      void draw();
    };
    show(versions.at(-1));
  }, (error) => fill(head, h('h1', {}, machineId), h('p', { class: 'error-text' }, error.message)));

  return () => {
    stopped = true;
    timer.cancel?.();
  };
}

function versionPicker(versions, current, show) {
  const select = h('select', { 'aria-label': 'version', onchange: () => show(versions.find((v) => v.version === select.value)) }, versions.map((v) => h('option', { value: v.version, selected: v.version === current.version }, v.version)));
  return select;
}

function eventsCard(v) {
  if (v.events.length === 0) return card('Events', empty('No events from outside.'));
  return card('Events', h('ul', { class: 'event-list' }, v.events.map((e) => {
    const props = Object.entries(e.schema?.properties ?? {}).filter(([k]) => k !== 'type');
    return h('li', {}, h('strong', { class: 'mono' }, e.type), props.length ? h('span', { class: 'muted' }, ` { ${props.map(([k, p]) => `${k}${(e.schema.required ?? []).includes(k) ? '' : '?'}: ${p.type ?? 'json'}`).join(', ')} }`) : null);
  })));
}

function startCard(machineId, v) {
  const form = schemaForm(v.input ?? { type: 'object', properties: {} }, { idPrefix: 'input' });
  const jobId = h('input', { type: 'text', placeholder: 'job id (optional)', 'aria-label': 'job id' });
  const problem = h('p', { class: 'error-text' });
  return card('Start a job', h('form', {
    class: 'start-form',
    onsubmit: async (event) => {
      event.preventDefault();
      problem.textContent = '';
      let input;
      try {
        input = form.read();
      } catch (error) {
        problem.textContent = error.message;
        return;
      }
      if (token() === null && !(await askToken())) return;
      try {
        const r = await post(`/api/machines/${enc(machineId)}/jobs`, { input, ...(jobId.value.trim() ? { jobId: jobId.value.trim() } : {}) });
        toast(r.created ? `started ${r.job.id}` : `${r.job.id} already exists`);
        navigate(`/jobs/${enc(r.job.id)}`);
      } catch (error) {
        problem.textContent = error.message;
      }
    },
  }, form.fields, h('label', { class: 'field' }, h('span', {}, 'job id'), jobId), problem, h('div', { class: 'row end' }, h('button', { class: 'primary' }, 'Start'))));
}
