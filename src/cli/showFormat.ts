/**
 * `spool show` as text: the job, then its history, pending events, activities, failed attempts,
 * timers, assets and notes.
 */
import { redeliveryOf, type JobDetails } from '../index.ts';
import { redeliveryWayOut } from '../runtime/quarantine.ts';
import { holdsRedacted } from '../base/redaction.ts';
import { describeStatus, formatBlock, formatJson, formatState, formatTime, keyValues, oneLine, table } from './format.ts';
import { paintError, paintHeading, paintOutcome } from './style.ts';

/** `versionNote`: why what the job waits for is unknown here; `historyRows`: the latest rows to print. */
export function formatShow(details: JobDetails, versionNote?: string, historyRows = Number.POSITIVE_INFINITY): string {
  const sections = [keyValues(jobPairs(details, versionNote))];
  pushHistory(sections, details, historyRows);
  pushPending(sections, details);
  pushFailed(sections, details);
  pushActivities(sections, details);
  pushAttempts(sections, details);
  if (details.timers.length > 0) {
    sections.push(
      `${paintHeading('timers:')}\n${table(
        ['EVENT', 'KIND', 'DUE', 'STATUS'],
        details.timers.map((t) => [String((t.event as { type?: unknown } | null)?.type ?? '-'), t.kind, formatTime(t.dueAt), t.status]),
      )}`,
    );
  }
  if (details.assets.length > 0) {
    sections.push(
      `${paintHeading('assets:')}\n${table(
        ['TYPE', 'URI', 'SIZE', 'ADDED'],
        details.assets.map((a) => [a.type, a.uri, a.size === null ? '-' : String(a.size), formatTime(a.createdAt)]),
      )}`,
    );
  }
  if (details.notes.length > 0) {
    sections.push(`${paintHeading('notes:')}\n${table(['TIME', 'KIND', 'MESSAGE'], details.notes.map((n) => [formatTime(n.at), n.kind, oneLine(n.message)]))}`);
  }
  return sections.join('\n\n');
}

/**
 * What an active job waits for: its running activities and child jobs, then the events its state
 * accepts (`activity charge (pending); or an event: CANCEL`, `START, CANCEL`, `no event`).
 */
function describeWaiting(details: JobDetails): string {
  const running = details.effects
    .filter((e) => e.active && !['succeeded', 'failed', 'cancelled'].includes(e.status))
    .map((e) => (e.kind === 'child' ? `child job ${e.id} (${e.status})` : `activity ${e.src} (${e.status})`));
  const events = details.waitingFor.join(', ');
  if (running.length === 0) return events === '' ? 'no event' : events;
  return events === '' ? running.join(', ') : `${running.join(', ')}; or an event: ${events}`;
}

/** The job's own lines: machine, status, state, holds, what it waits for, input, context, output. */
function jobPairs(details: JobDetails, versionNote: string | undefined): [string, string][] {
  const { job } = details;
  const pairs: [string, string][] = [
    ['job', job.id],
    ['machine', `${job.machineId}@${job.machineVersion}`],
    ['status', describeStatus(job)],
    ['state', formatState(job.value)],
    ['revision', String(job.revision)],
  ];
  if (job.progress !== null) pairs.push(['progress', `${job.progress}%`]);
  if (job.cancel !== null) {
    const reason = job.cancel.reason === null ? '' : ` (${job.cancel.reason})`;
    pairs.push(['cancel', `requested ${formatTime(job.cancel.requestedAt)}${reason}: ${job.cancel.completed ? 'cancelled' : 'not cancelled yet'}`]);
  }
  if (details.held) pairs.push(['held', `back: damaged (${details.held.damaged}). ${details.held.wayOut}`]);
  else if (job.quarantine !== null) pairs.push(['quarantine', job.quarantine]);
  if (job.suspended !== null) {
    pairs.push(['suspended', `since ${formatTime(job.suspended.at)}${job.suspended.reason ? ` (${job.suspended.reason})` : ''}: events stay pending, timers and activities wait (\`spool resume ${job.id}\`)`]);
  }
  if (job.lease !== null) pairs.push(['lease', `held by ${job.lease.owner} (fence ${job.lease.fence}) until ${formatTime(job.lease.until)}`]);
  if (versionNote !== undefined) pairs.push(['version', versionNote]);
  else if (!job.final && !details.held) pairs.push(['waiting for', describeWaiting(details)]);
  if (details.stuck) pairs.push(['stuck', 'yes: no pending event, timer or activity, and no event but a cancel moves it (`spool redeliver` a failed event, `spool retry`, `spool send`, `spool cancel`)']);
  if (job.idempotencyKey !== null) pairs.push(['idempotency', job.idempotencyKey]);
  pairs.push(
    ['created', formatTime(job.createdAt)],
    ['updated', formatTime(job.updatedAt)],
    ['input', formatBlock(job.input)],
    ['context', formatBlock(job.context)],
  );
  if (job.output !== undefined) pairs.push(['output', formatBlock(job.output)]);
  return pairs;
}

/** The history table, its latest `historyRows` rows. */
function pushHistory(sections: string[], details: JobDetails, historyRows: number): void {
  // The latest rows; a long-lived job's whole history is in --json.
  const history = details.history.length > historyRows ? details.history.slice(details.history.length - historyRows) : details.history;
  const earlier = details.history.length - history.length;
  const withErrors = history.some((h) => h.error !== null);
  // Which runner committed each revision, under which lease fence (the audit trail of leases).
  const withRunners = history.some((h) => h.runner !== null);
  sections.push(
    `${paintHeading(`history${earlier > 0 ? ` (the latest ${history.length}; ${earlier} earlier, see --history all)` : ''}:`)}\n${table(
      ['REV', 'EVENT', 'OUTCOME', 'FROM -> TO', 'TIME', ...(withRunners ? ['RUNNER (FENCE)'] : []), ...(withErrors ? ['ERROR'] : [])],
      history.map((h) => [
        String(h.revision),
        h.eventType,
        paintOutcome(h.outcome),
        `${h.from === null ? '-' : formatState(h.from)} -> ${formatState(h.to)}`,
        formatTime(h.at),
        ...(withRunners ? [h.runner === null ? '-' : `${h.runner} (${h.fence ?? '-'})`] : []),
        ...(withErrors ? [h.error ? paintError(`${h.error.name}: ${oneLine(h.error.message)}`) : ''] : []),
      ]),
    )}`,
  );
}

/** The pending events, or "none". */
function pushPending(sections: string[], details: JobDetails): void {
  const pending = details.events.filter((e) => e.status === 'pending');
  sections.push(
    pending.length === 0
      ? `${paintHeading('pending events:')} none`
      : `${paintHeading('pending events (accepted, not yet applied):')}\n${table(
          ['SEQ', 'EVENT ID', 'TYPE', 'ACCEPTED'],
          pending.map((e) => [String(e.seq), e.eventId, e.type, formatTime(e.acceptedAt)]),
        )}`,
  );
}

/** Events that failed and were not redelivered since, with the way out. */
function pushFailed(sections: string[], details: JobDetails): void {
  if (details.job.final) return;
  const redelivered = new Set(details.events.map((e) => redeliveryOf(e.eventId)));
  const failed = details.events.filter((e) => e.status === 'failed' && !redelivered.has(e.eventId));
  const last = failed.at(-1);
  if (last === undefined) return;
  sections.push(
    `failed events (not redelivered; each left the job where it was):\n${table(
      ['EVENT ID', 'TYPE', 'REVISION', 'ERROR'],
      failed.map((e) => [e.eventId, e.type, String(e.revision ?? '-'), e.error ? `${e.error.name}: ${oneLine(e.error.message)}` : '-']),
    )}\nway out: ${redeliveryWayOut(details.job.id, last.eventId, holdsRedacted(last.payload), last.type)}${last.revision === details.job.revision ? '' : ' (the job moved on since: add --force)'}`,
  );
}

/** The activities table (with what runs them and how a token settles one), when there are any. */
function pushActivities(sections: string[], details: JobDetails): void {
  if (details.effects.length > 0) {
    const waitingForWorker = details.effects.some((e) => e.active && ['pending', 'backoff', 'running'].includes(e.status));
    sections.push(
      `${paintHeading('activities:')}\n${table(
        ['SRC', 'STATUS', 'ATTEMPTS', 'NEXT RUN', 'RESULT'],
        details.effects.map((e) => [
          e.src,
          e.active ? e.status : `${e.status} (state left)`,
          // A child job is not an attempt of anything: its own show has its history.
          e.kind === 'child' ? '-' : `${e.attempt}/${e.maxAttempts}${e.unsafe ? ' unsafe' : ''}`,
          formatTime(e.nextRunAt),
          e.error
            ? `${e.error.code ?? e.error.name}: ${oneLine(e.error.message)}`
            : e.token !== null
              ? `token ${e.token}`
              : e.kind === 'child'
                ? `child job ${e.id}${e.output === null ? '' : ` -> ${formatJson(e.output)}`}`
                : e.output === null
                  ? ''
                  : formatJson(e.output),
        ]),
      )}${waitingForWorker ? '\n(activities and timers run in a worker process, see runWorker; spool commands only record them)' : ''}${
        details.effects.some((e) => e.token !== null) ? "\n(an activity waiting on a token: `spool complete <token> '<output json>'` or `spool fail <token>` settles it)" : ''
      }`,
    );
  }
}

/** The attempts that failed or were interrupted, when there are any. */
function pushAttempts(sections: string[], details: JobDetails): void {
  // Failed and interrupted ones: an interrupted attempt (its runner died or stopped) has no error of its own.
  const failedAttempts = details.attempts.filter((a) => a.error !== null || a.outcome === 'interrupted');
  if (failedAttempts.length > 0) {
    const srcOf = new Map(details.effects.map((e) => [e.id, e.src]));
    const why = (a: (typeof failedAttempts)[number]) =>
      a.error ? `${a.error.code ?? a.error.name}: ${oneLine(a.error.message)}` : `its runner ${a.runner ?? '?'} stopped or died before it finished; taken over`;
    sections.push(
      `${paintHeading('attempts that failed or were interrupted:')}\n${table(
        ['ACTIVITY', 'ATTEMPT', 'OUTCOME', 'STARTED', 'ERROR'],
        failedAttempts.map((a) => [srcOf.get(a.effectId) ?? a.effectId, String(a.attempt), a.outcome, formatTime(a.startedAt), why(a)]),
      )}`,
    );
  }
}
