// A job's page: its diagram with the current state marked, moving live with the job's event stream;
// the transition history as a timeline; context, activities and attempts, timers, assets, notes;
// and the actions (jobActions.js).
//
// The stream only says "something was committed": each event schedules one re-read of the job's
// durable records (several events while a read runs cost one more read), so a burst or a slow
// page never queues anything. A dropped stream reconnects on its own with Last-Event-ID (the
// badge says "reconnecting"), and the read after it catches up; a finished job's stream closes.

import { enc, get, streamUrl } from './api.js';
import { applyMarks, loadDiagram } from './diagram.js';
import { ago, card, empty, fill, flagChips, h, jsonBlock, link, progressBar, stateChip, stateChips, statePaths, statusChip } from './dom.js';
import { actionsPanel, keptParts } from './jobActions.js';

const OUTCOMES = ['started', 'applied', 'ignored', 'failed', 'migrated', 'stale'];

export function renderJob(main, id) {
  const view = {
    head: h('header', { class: 'page-head job-head' }),
    live: h('span', { class: 'live', dataset: { stream: 'connecting' } }, 'connecting'),
    problem: h('p', { class: 'error-text problem', hidden: true }),
    diagram: h('div', { class: 'diagram', id: 'job-diagram' }, empty('Drawing…')),
    timeline: h('ol', { class: 'timeline' }),
    side: h('div', { class: 'side' }),
    details: h('div', { class: 'details-grid' }),
  };
  fill(main,
    h('nav', { class: 'crumbs' }, link('/', 'Jobs'), ' / ', h('span', { class: 'mono' }, id)),
    view.head, view.problem,
    h('div', { class: 'job-grid' },
      h('div', { class: 'job-main' }, card(h('span', {}, 'Statechart ', view.live), view.diagram), card('Timeline', view.timeline), view.details),
      view.side));

  const page = { id, main, view, stopped: false, source: null, svg: null, machine: undefined, loaded: false };
  let running = false;
  let again = false;
  /** Read everything again; calls while a read runs make one more read after it. */
  const refresh = async () => {
    if (running) return void (again = true);
    running = true;
    try {
      do {
        again = false;
        await load(page, refresh);
        view.problem.hidden = true;
      } while (again && !page.stopped);
    } catch (error) {
      if (page.stopped) return;
      // Keep what was read last; say why it is not newer.
      if (!page.loaded) fill(view.head, h('h1', { class: 'mono' }, id));
      view.problem.hidden = false;
      view.problem.textContent = error.status === 404 ? 'No such job.' : `Could not read the job (${error.message}); showing what was read last.`;
    } finally {
      running = false;
    }
  };
  void refresh();
  return () => {
    page.stopped = true;
    page.source?.close();
  };
}

/** Read the job's records and draw them; open the stream once, if the job can still move. */
async function load(page, refresh) {
  const { id, view } = page;
  const [d, history, effects, attempts, timers, assets, notes, marks, events] = await Promise.all(
    ['', '/history', '/effects', '/attempts', '/timers', '/assets', '/notes', '/marks', '/events'].map((p) => get(`/api/jobs/${enc(id)}${p}`)));
  if (page.stopped) return;
  const job = d.job;
  if (page.machine === undefined) {
    const m = await get(`/api/machines/${enc(job.machineId)}`).catch(() => null);
    page.machine = m?.versions.find((v) => v.version === job.machineVersion) ?? null;
  }
  page.svg ??= await loadDiagram(view.diagram, `/api/jobs/${enc(id)}/diagram`).catch((error) => {
    fill(view.diagram, h('p', { class: 'error-text' }, `No diagram: ${error.message}`));
    return null;
  });
  if (page.svg) applyMarks(page.svg, marks);
  drawHead(view.head, job, d.stuck);
  drawTimeline(view.timeline, history.history);
  // What is open in the panel (and the field being typed in) stays through the redraw.
  const kept = keptParts(view.side);
  const focused = document.activeElement;
  fill(view.side, actionsPanel({ job, waitingFor: d.waitingFor, effects: effects.effects, events: events.events, machine: page.machine, held: d.held, refresh, kept }), card('Context', jsonBlock(job.context)), card('Input', jsonBlock(job.input)), job.output !== undefined ? card('Output', jsonBlock(job.output)) : null);
  if (focused instanceof HTMLElement && focused !== document.activeElement && view.side.contains(focused)) focused.focus();
  fill(view.details, activities(effects.effects, attempts.attempts), timersCard(timers.timers), assetsCard(assets.assets), notesCard(notes.notes));
  page.main.dataset.revision = String(job.revision);
  page.loaded = true;
  if (!page.source && !job.final) page.source = stream(id, job.revision, view.live, refresh);
  if (!page.source && job.final) setLive(view.live, 'final', 'final: no more events');
}

function setLive(el, state, text) {
  el.dataset.stream = state;
  el.textContent = text;
}

/**
 * The job's event stream after `after`: each commit makes the page read again. The browser
 * reconnects a dropped stream by itself with Last-Event-ID (the server asks for 1 s); the page
 * reads again then too. After the job's final commit the stream is closed here.
 */
function stream(id, after, live, refresh) {
  const source = new EventSource(streamUrl(`/api/jobs/${enc(id)}/stream?after=${after}`));
  source.onopen = () => setLive(live, 'live', 'live');
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) setLive(live, 'closed', 'stream closed');
    else setLive(live, 'reconnecting', 'reconnecting…');
    void refresh();
  };
  for (const type of OUTCOMES) {
    source.addEventListener(type, (event) => {
      setLive(live, 'live', 'live');
      if (JSON.parse(event.data).final) {
        source.close();
        setLive(live, 'final', 'final: stream closed');
      }
      void refresh();
    });
  }
  return source;
}

function drawHead(el, job, stuck) {
  fill(el,
    h('div', { class: 'title-row' }, h('h1', { class: 'mono' }, job.id), statusChip(job.status), stateChips(job.value), flagChips(job, { stuck })),
    h('div', { class: 'meta' },
      h('span', {}, 'machine ', link(`/machines/${enc(job.machineId)}`, job.machineId), ` @${job.machineVersion}`),
      h('span', {}, `revision ${job.revision}`),
      h('span', {}, 'created ', ago(job.createdAt)),
      h('span', {}, 'updated ', ago(job.updatedAt)),
      job.progress !== null ? h('span', { class: 'meta-progress' }, 'progress ', progressBar(job.progress)) : null,
      job.quarantine ? h('span', { class: 'error-text' }, job.quarantine) : null));
}

/** An event type as the timeline shows it: the labels of views/graph.ts's eventLabel (the diagram's), and `start` for the first row. */
function eventName(type) {
  if (type === 'xstate.init') return 'start';
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return /^\d+$/.test(after[1]) ? `after ${after[1]}ms` : `after ${after[1]}`;
  if (type.startsWith('xstate.done.state.')) return 'done';
  return type.replace(/^xstate\.done\.actor\./, 'done: ').replace(/^xstate\.error\.actor\./, 'error: ');
}

function drawTimeline(el, history) {
  if (history.length === 0) return fill(el, empty('No history.'));
  fill(el, [...history].reverse().map((row) => h('li', { class: `tl tl-${row.outcome}`, dataset: { revision: row.revision } },
    h('div', { class: 'tl-dot' }),
    h('div', { class: 'tl-body' },
      h('div', { class: 'tl-head' },
        h('span', { class: 'rev' }, `#${row.revision}`),
        h('strong', { class: 'mono' }, eventName(row.eventType)),
        h('span', { class: `outcome outcome-${row.outcome}` }, row.outcome),
        h('span', { class: 'grow' }),
        ago(row.at)),
      h('div', { class: 'tl-states' },
        row.from === null ? null : h('span', { class: 'chips' }, statePaths(row.from).map(stateChip)),
        row.from === null ? null : h('span', { class: 'arrow' }, '→'),
        h('span', { class: 'chips' }, statePaths(row.to).map(stateChip))),
      row.error ? h('div', { class: 'error-text' }, `${row.error.name ?? 'Error'}: ${row.error.message}`) : null,
      row.payload && typeof row.payload === 'object' && Object.keys(row.payload).length > 1 ? h('details', {}, h('summary', {}, 'event'), jsonBlock(row.payload)) : null))));
}

function activities(effects, attempts) {
  if (effects.length === 0) return card('Activities', empty('No activities.'));
  return h('div', { class: 'wide' }, card('Activities', h('div', { class: 'table-wrap' }, h('table', { class: 'compact' },
    h('thead', {}, h('tr', {}, ['Activity', 'Status', 'Attempts', 'Next run', 'Last error'].map((t) => h('th', {}, t)))),
    h('tbody', {}, effects.map((e) => [
      h('tr', { dataset: { effect: e.id } },
        h('td', {}, h('strong', {}, e.src), h('div', { class: 'muted mono small' }, e.id)),
        h('td', {}, h('span', { class: `chip effect effect-${e.status}` }, e.status), e.unsafe ? h('span', { class: 'chip flag' }, 'unsafe') : null),
        h('td', {}, `${e.attempt} / ${e.maxAttempts}`),
        h('td', {}, e.nextRunAt ? ago(e.nextRunAt) : '—'),
        h('td', {}, e.error ? h('span', { class: 'error-text' }, e.error.message) : '—')),
      ...attempts.filter((a) => a.effectId === e.id).map((a) => h('tr', { class: 'sub' },
        h('td', { class: 'muted' }, `attempt ${a.attempt}`),
        h('td', {}, h('span', { class: `chip outcome outcome-${a.outcome}` }, a.outcome)),
        h('td', { class: 'muted small' }, a.runner ?? ''),
        h('td', {}, ago(a.startedAt)),
        h('td', {}, a.error ? h('span', { class: 'error-text' }, a.error.message) : a.endedAt ? `${a.endedAt - a.startedAt} ms` : 'running'))),
    ]))))));
}

function timersCard(timers) {
  if (timers.length === 0) return card('Timers', empty('No timers.'));
  return card('Timers', h('table', { class: 'compact' },
    h('thead', {}, h('tr', {}, ['Timer', 'Kind', 'Deadline', 'Status'].map((t) => h('th', {}, t)))),
    h('tbody', {}, timers.map((t) => h('tr', {},
      h('td', { class: 'mono small' }, eventName(t.key)),
      h('td', {}, t.kind),
      h('td', {}, ago(t.dueAt), h('div', { class: 'muted small' }, new Date(t.dueAt).toLocaleString())),
      h('td', {}, h('span', { class: `chip timer timer-${t.status}` }, t.status)))))));
}

function assetsCard(assets) {
  if (assets.length === 0) return card('Assets', empty('No assets.'));
  return card('Assets', h('ul', { class: 'assets' }, assets.map((a) => h('li', {},
    h('strong', {}, a.key), ' ', h('span', { class: 'chip' }, a.type), ' ',
    /^https?:\/\//.test(a.uri) ? h('a', { href: a.uri, rel: 'noreferrer noopener', target: '_blank' }, a.uri) : h('span', { class: 'mono' }, a.uri),
    a.size !== null ? h('span', { class: 'muted' }, ` ${a.size} bytes`) : null))));
}

function notesCard(notes) {
  if (notes.length === 0) return null;
  return card('Notes', h('ul', { class: 'notes' }, notes.map((n) => h('li', {}, h('span', { class: 'chip' }, n.kind), ' ', n.message, ' ', ago(n.at)))));
}
