// A job's actions: send any event its current state accepts (a form from the event's schema),
// cancel, suspend or resume, retry a failed activity (or retry a finished job as a new one), and
// settle an activity waiting for its token, redeliver a failed event. Every write asks for the token first if this tab has none.

import { ApiError, enc, post, setToken, token } from './api.js';
import { askToken, navigate } from './shell.js';
import { card, empty, h, toast } from './dom.js';
import { hasFields, schemaForm } from './schemaForm.js';

/** Run a write: the token first, then `work`; its outcome as a toast; the page read again. */
async function write(label, work, refresh) {
  if (token() === null && !(await askToken())) return;
  try {
    const result = await work();
    toast(`${label}: ${result?.status ?? 'done'}`);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'SPOOL_UNAUTHORIZED') setToken(null);
    toast(`${label} refused: ${error.message}`, 'error');
  }
  await refresh();
}

/**
 * The parts of a panel a live update keeps as they are (an open event form, a token's output being
 * typed, a cancel's reason): each carries `data-keep`, its key. Read them from the panel about to
 * be replaced and give them to the next one ({@link actionsPanel}'s `kept`).
 */
export function keptParts(root) {
  return new Map([...root.querySelectorAll('[data-keep]')].map((el) => [el.dataset.keep, el]));
}

/**
 * In a panel just built, each part whose key was kept is the kept part again, with what was
 * typed in it: only where the new panel still has that part (the effect still waits for that
 * token, the job can still be cancelled), so what no longer applies goes.
 */
function restoreKept(panel, kept) {
  for (const el of panel.querySelectorAll('[data-keep]')) {
    const old = kept.get(el.dataset.keep);
    if (old && old !== el) el.replaceWith(old);
  }
  return panel;
}

/**
 * `kept`: the parts of the panel this one replaces ({@link keptParts}; a live update re-reads the
 * page). They stay as they were while they still apply: an open event form while its event is
 * still accepted, a token's form while the effect still waits for it, the cancel step.
 */
export function actionsPanel({ job, waitingFor, effects, events = [], machine, held, refresh, kept = new Map() }) {
  const id = enc(job.id);
  if (held) return restoreKept(heldPanel(id, held), kept);
  const parts = [];
  if (!job.final) {
    const schemas = new Map((machine?.events ?? []).map((e) => [e.type, e.schema]));
    const forms = h('div', { class: 'event-form-slot' });
    const buttons = waitingFor.map((type) => h('button', {
      type: 'button', class: 'event-button', dataset: { event: type },
      onclick: () => {
        const schema = schemas.get(type);
        if (!hasFields(schema, ['type'])) return void write(`send ${type}`, () => post(`/api/jobs/${id}/events`, { type }), refresh);
        forms.replaceChildren(eventForm(type, schema, (event) => write(`send ${type}`, () => post(`/api/jobs/${id}/events`, event), refresh)));
      },
    }, type));
    const openForm = kept.get('event-form');
    if (openForm && waitingFor.includes(openForm.dataset.event)) forms.replaceChildren(openForm);
    parts.push(h('div', { class: 'action-group' }, h('h3', {}, 'Send an event'), buttons.length ? h('div', { class: 'buttons' }, buttons) : h('p', { class: 'muted' }, 'The current state accepts no event from outside.'), forms));
  }
  const failed = failedEvents(events);
  if (failed.length > 0) parts.push(h('div', { class: 'action-group' }, h('h3', {}, 'Failed events'), failed.map((e) => redeliverRow(job, e, refresh))));
  const waiting = effects.filter((e) => e.status === 'waiting' && e.token);
  if (waiting.length > 0) parts.push(h('div', { class: 'action-group' }, h('h3', {}, 'Waiting for a token'), waiting.map((e) => settleForm(e, refresh))));
  const controls = [];
  if (!job.final) {
    controls.push(confirmButton('Cancel job', 'danger', 'reason (optional)', (reason) => write('cancel', () => post(`/api/jobs/${id}/cancel`, reason ? { reason } : {}), refresh)));
    controls.push(job.suspended
      ? h('button', { type: 'button', onclick: () => write('resume', () => post(`/api/jobs/${id}/resume`), refresh) }, 'Resume')
      : h('button', { type: 'button', onclick: () => write('suspend', () => post(`/api/jobs/${id}/suspend`), refresh) }, 'Suspend'));
  }
  if (!job.final && effects.some((e) => e.status === 'failed' && e.active)) {
    controls.push(h('button', { type: 'button', class: 'primary', dataset: { action: 'retry' }, onclick: () => write('retry', () => post(`/api/jobs/${id}/retry`), refresh) }, 'Retry failed activity'));
  }
  if (job.final && job.status !== 'done') {
    controls.push(h('button', {
      type: 'button', dataset: { action: 'retry-as-new' },
      onclick: () => write('retry as new', async () => {
        const r = await post(`/api/jobs/${id}/retry-as-new`);
        navigate(`/jobs/${enc(r.job.id)}`);
        return { status: `job ${r.job.id}` };
      }, async () => {}),
    }, 'Retry as a new job'));
  }
  if (controls.length) parts.push(h('div', { class: 'action-group' }, h('h3', {}, 'Job'), h('div', { class: 'buttons' }, controls)));
  return restoreKept(card('Actions', parts.length ? parts : empty('This job has ended; nothing to do.')), kept);
}

/** A job whose rows are damaged accepts nothing and can never finish: its one action is purge. */
function heldPanel(id, held) {
  const purge = confirmButton('Purge job', 'danger', 'this deletes the job and its records', () => write('purge', async () => {
    await post(`/api/jobs/${id}/purge`);
    navigate('/');
    return { status: 'purged' };
  }, async () => {}));
  return card('Actions', h('div', { class: 'action-group', dataset: { held: 'damaged' } },
    h('h3', {}, 'Held back: damaged'), h('p', { class: 'error-text' }, held.damaged), h('p', { class: 'muted' }, held.wayOut), h('div', { class: 'buttons' }, purge)));
}

/** An event's form; it closes itself (sent, or Close), wherever a re-drawn panel has put it. */
function eventForm(type, schema, send) {
  const form = schemaForm(schema, { skip: ['type'], idPrefix: `ev-${type}` });
  const problem = h('p', { class: 'error-text' });
  const close = () => el.remove();
  const el = h('form', {
    class: 'event-form', dataset: { event: type, keep: 'event-form' },
    onsubmit: (event) => {
      event.preventDefault();
      try {
        const value = form.read();
        void send({ type, ...value }).then(close);
      } catch (error) {
        problem.textContent = error.message;
      }
    },
  }, h('div', { class: 'form-title' }, 'Send ', h('strong', { class: 'mono' }, type)), form.fields, problem,
  h('div', { class: 'row end' }, h('button', { type: 'button', class: 'ghost', onclick: close }, 'Close'), h('button', { class: 'primary' }, `Send ${type}`)));
  return el;
}

function settleForm(effect, refresh) {
  const output = h('textarea', { class: 'mono', rows: 2, 'aria-label': 'output (JSON)', placeholder: 'output as JSON, e.g. {"approved": true}' });
  const message = h('input', { type: 'text', 'aria-label': 'failure message', placeholder: 'why it failed' });
  const path = (what) => `/api/tokens/${enc(effect.token)}/${what}`;
  return h('div', { class: 'settle', dataset: { effect: effect.id, keep: `settle:${effect.token}` } },
    h('div', {}, h('strong', {}, effect.src), h('span', { class: 'muted mono small' }, ` token ${effect.token.slice(0, 10)}…`)),
    output,
    h('div', { class: 'buttons' },
      h('button', {
        type: 'button', class: 'primary', dataset: { action: 'complete' },
        onclick: () => {
          let value = null;
          try {
            value = output.value.trim() === '' ? null : JSON.parse(output.value);
          } catch {
            return toast('The output is not valid JSON.', 'error');
          }
          void write(`complete ${effect.src}`, () => post(path('complete'), { output: value }), refresh);
        },
      }, 'Complete'),
      message,
      h('button', { type: 'button', class: 'danger', dataset: { action: 'fail' }, onclick: () => write(`fail ${effect.src}`, () => post(path('fail'), { error: { message: message.value || 'failed from the dashboard' } }), refresh) }, 'Fail')));
}

/** A button that asks once more (with an optional text) before it acts. */
function confirmButton(label, cls, placeholder, act) {
  const wrap = h('span', { class: 'confirm', dataset: { keep: `confirm:${label}` } });
  const first = h('button', {
    type: 'button', class: cls, dataset: { action: label.toLowerCase().replace(/\s+/g, '-') },
    onclick: () => {
      const input = h('input', { type: 'text', placeholder, 'aria-label': placeholder });
      wrap.replaceChildren(input, h('button', { type: 'button', class: cls, dataset: { action: 'confirm' }, onclick: () => act(input.value.trim()) }, `Confirm: ${label.toLowerCase()}`), h('button', { type: 'button', class: 'ghost', onclick: () => wrap.replaceChildren(first) }, 'Keep'));
      input.focus();
    },
  }, label);
  wrap.append(first);
  return wrap;
}

const REDELIVERY_PREFIX = 'redeliver~';

/** Events that failed and were not redelivered since (as `spool show` lists them). */
function failedEvents(events) {
  const redelivered = new Set(events.filter((e) => e.eventId.startsWith(REDELIVERY_PREFIX)).map((e) => e.eventId.slice(REDELIVERY_PREFIX.length)));
  return events.filter((e) => e.status === 'failed' && !redelivered.has(e.eventId));
}

/** A failed event with its error and a Redeliver button; once the job moved on, a forced one on the current state. */
function redeliverRow(job, event, refresh) {
  const moved = event.revision !== null && event.revision !== job.revision;
  const label = moved ? 'Redeliver on the current state' : 'Redeliver';
  const path = `/api/jobs/${enc(job.id)}/events/${enc(event.eventId)}/redeliver`;
  return h('div', { class: 'failed-event' },
    h('div', {}, h('strong', {}, event.type), h('span', { class: 'muted small' }, ` ${event.error?.message ?? 'failed'}`)),
    h('button', { type: 'button', dataset: { action: 'redeliver', eventId: event.eventId }, onclick: () => write(`redeliver ${event.type}`, () => post(path, moved ? { force: true } : {}), refresh) }, label));
}
