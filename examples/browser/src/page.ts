/**
 * The example's page: a start form, the jobs, and the watched job with its live statechart. The
 * runtime runs in the Worker (worker.ts); the page draws what it streams with the dashboard's own
 * modules (src/server/dashboard: the diagram and its marks, the chips). The watched job is kept in
 * the address (`#job=<id>`), so a reload shows it again, as the Worker's database kept it.
 */
import { applyMarks, showDiagram } from '../../../src/server/dashboard/diagram.js';
import { card, empty, fill, h, jsonBlock, stateChips, statusChip, toast } from '../../../src/server/dashboard/dom.js';
import type { Job } from '../../../src/index.ts';
import type { Call, MachineInfo, Marks, Message, Request } from './protocol.ts';

const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });

const pending = new Map<number, { resolve: (jobId: string | null) => void; reject: (error: Error) => void }>();
let nextCall = 1;

/** Ask the Worker; resolves with the job id its reply names, or rejects with its error's message. */
function call(request: Request): Promise<string | null> {
  const id = nextCall++;
  worker.postMessage({ ...request, id } satisfies Call);
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

const main = document.getElementById('main')!;
const status = h('p', { id: 'status', class: 'muted' }, 'Opening the database…');
const startCard = h('div', { id: 'start' });
const jobsList: HTMLElement = h('div', { id: 'jobs' }, empty('No jobs yet.'));
const jobHead = h('div', { id: 'job-head' }, empty('Start a job, or pick one.'));
const diagram = h('div', { class: 'diagram', id: 'job-diagram' });
const sendForm = h('div', { id: 'send' });
const contextView = h('div', { id: 'job-context' });
main.append(
  h('div', { class: 'page-head' }, h('h1', {}, 'Spool in the browser'),
    h('p', { class: 'description muted' }, 'Durable jobs in a Worker, on SQLite in this origin\'s private file system: reload the page and they are still here.')),
  status,
  h('div', { class: 'example-grid' },
    h('div', {}, card('Start a job', startCard), card('Jobs', jobsList)),
    h('div', { class: 'job-main' }, card('Job', jobHead, diagram, sendForm, contextView))),
);

let machines: MachineInfo[] = [];
let watched: string | null = new URLSearchParams(location.hash.slice(1)).get('job');
let drawing: Element | null = null;
let lastMarks: Marks | null = null;

/** Parse a JSON field, saying which one was not JSON. */
function parsed(field: HTMLTextAreaElement, what: string): unknown {
  try {
    return JSON.parse(field.value);
  } catch {
    throw new Error(`The ${what} is not JSON.`);
  }
}

function failing(work: () => Promise<unknown>): () => void {
  return () => void work().catch((error: Error) => toast(error.message, 'error'));
}

function renderStart(): void {
  const select = h('select', { id: 'machine' }, machines.map((m) => h('option', { value: m.id }, `${m.id}@${m.version}`))) as HTMLSelectElement;
  const input = h('textarea', { id: 'input', rows: 5, spellcheck: 'false', class: 'mono' }) as HTMLTextAreaElement;
  const fillInput = () => (input.value = JSON.stringify(machines.find((m) => m.id === select.value)?.exampleInput ?? {}, null, 2));
  select.addEventListener('change', fillInput);
  fillInput();
  const start = failing(async () => {
    const jobId = await call({ type: 'start', machineId: select.value, input: parsed(input, 'input') });
    if (jobId) await watch(jobId);
  });
  fill(startCard,
    h('label', { class: 'field' }, 'Machine', select),
    h('label', { class: 'field' }, 'Input (JSON)', input),
    h('div', { class: 'row end' }, h('button', { id: 'start-job', class: 'primary', type: 'button', onclick: start }, 'Start')));
}

function renderJobs(jobs: Job[]): void {
  const sorted = [...jobs].sort((a, b) => b.createdAt - a.createdAt || a.id.localeCompare(b.id));
  if (sorted.length === 0) return void fill(jobsList, empty('No jobs yet.'));
  fill(jobsList, h('ul', { class: 'job-list' }, sorted.map((job) =>
    h('li', { class: `job-row${job.id === watched ? ' selected' : ''}`, dataset: { job: job.id, status: job.status } },
      h('button', { type: 'button', class: 'ghost', onclick: failing(() => watch(job.id)) },
        h('span', { class: 'mono small' }, job.id), ' ', job.machineId, ' ', stateChips(job.value), ' ', statusChip(job.status))))));
}

async function watch(jobId: string): Promise<void> {
  watched = jobId;
  drawing = null;
  lastMarks = null;
  history.replaceState(null, '', `#job=${encodeURIComponent(jobId)}`);
  fill(diagram, empty('Drawing…'));
  for (const row of jobsList.querySelectorAll<HTMLElement>('.job-row')) row.classList.toggle('selected', row.dataset['job'] === jobId);
  await call({ type: 'watch', jobId });
}

function renderJob(job: Job, marks: Marks): void {
  const view = document.getElementById('job-view');
  const sameJob = view?.dataset['job'] === job.id;
  fill(jobHead, h('div', { id: 'job-view', class: 'title-row', dataset: { job: job.id, status: job.status, final: String(job.final) } },
    h('span', { class: 'mono' }, job.id), h('span', { class: 'muted' }, `${job.machineId}@${job.machineVersion}`),
    h('span', { id: 'job-state' }, stateChips(job.value)), statusChip(job.status)));
  fill(contextView, h('h3', {}, 'Context'), jsonBlock(job.context));
  lastMarks = marks;
  if (drawing) applyMarks(drawing, marks);
  if (!sameJob) renderSend(job);
  sendForm.hidden = job.final;
}

function renderSend(job: Job): void {
  const machine = machines.find((m) => m.id === job.machineId);
  const examples = machine?.exampleEvents ?? [];
  const event = h('textarea', { id: 'event', rows: 4, spellcheck: 'false', class: 'mono' }) as HTMLTextAreaElement;
  event.value = JSON.stringify(examples[0] ?? { type: '' }, null, 2);
  const picks = examples.map((e) => h('button', { type: 'button', class: 'ghost', dataset: { event: e.type }, onclick: () => (event.value = JSON.stringify(e, null, 2)) }, e.type));
  const send = failing(async () => {
    const value = parsed(event, 'event');
    if (typeof value !== 'object' || value === null || typeof (value as { type?: unknown }).type !== 'string') throw new Error('An event is an object with a type.');
    await call({ type: 'send', jobId: job.id, event: value as { type: string } });
  });
  fill(sendForm, h('h3', {}, 'Send an event'), h('div', { class: 'row' }, picks), event,
    h('div', { class: 'row end' }, h('button', { id: 'send-event', class: 'primary', type: 'button', onclick: send }, 'Send')));
}

worker.onmessage = (message: MessageEvent<Message>) => {
  const m = message.data;
  switch (m.type) {
    case 'ready':
      machines = m.machines;
      status.textContent = 'Ready: jobs started here are kept in this browser.';
      status.dataset['ready'] = 'true';
      renderStart();
      renderJobs(m.jobs);
      if (watched) failing(() => watch(watched!))();
      break;
    case 'failed':
      status.textContent = `The Worker could not start: ${m.message}`;
      status.className = 'error-text';
      break;
    case 'reply': {
      const waiting = pending.get(m.id);
      pending.delete(m.id);
      if (m.ok) waiting?.resolve(m.jobId);
      else waiting?.reject(new Error(m.error.message));
      break;
    }
    case 'jobs':
      renderJobs(m.jobs);
      break;
    case 'diagram':
      if (m.jobId !== watched) break;
      drawing = showDiagram(diagram, m.svg);
      if (lastMarks) applyMarks(drawing, lastMarks);
      break;
    case 'job':
      if (m.job.id === watched) renderJob(m.job, m.marks);
      break;
  }
};
worker.onerror = (event) => {
  status.textContent = `The Worker failed: ${event.message}`;
  status.className = 'error-text';
};
