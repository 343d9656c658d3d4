/**
 * `spool demo` (what `npm start` runs): four `job-lifecycle` jobs driven to their four ends,
 * narrated from the runtime's event stream, then the commands to try next.
 */
import { randomBytes } from 'node:crypto';
import { JobNotFoundError, runWorker, type Job, type Runtime, type RuntimeEvent } from '../index.ts';
import { formatJson, formatState, table } from './format.ts';
import { paintError, paintHeading, paintOutcome } from './style.ts';

export interface DemoOptions {
  /** Receives each line of narration (no trailing newline). */
  print: (line: string) => void;
  /** How to name the database in the narration, e.g. `./spool.db`. */
  dbLabel: string;
  /** What suggested commands start with, e.g. `npx spool --db /tmp/x.db`. */
  commandPrefix: string;
}

interface Script {
  name: string;
  input: { name: string; items?: number };
  events: Record<string, unknown>[];
  /** What the narration says this job shows. */
  shows: string;
}

const MACHINE = 'job-lifecycle';

const SCRIPTS: readonly Script[] = [
  {
    name: 'thumbnails',
    input: { name: 'thumbnails' },
    events: [{ type: 'START' }, { type: 'PROGRESS', percent: 40 }, { type: 'START' }, { type: 'PROGRESS', percent: 90 }, { type: 'FINISH' }],
    shows: 'reports progress, ignores a repeated START, completes',
  },
  {
    name: 'import',
    input: { name: 'import-csv', items: 3 },
    events: [{ type: 'START' }, { type: 'ITEM_DONE' }, { type: 'ITEM_FAILED', reason: 'row 2: bad date' }, { type: 'ITEM_DONE' }],
    shows: 'counts 3 items, one fails: ends partial by itself',
  },
  {
    name: 'emails',
    input: { name: 'send-emails' },
    events: [{ type: 'START' }, { type: 'PROGRESS', percent: 10 }, { type: 'FAIL', reason: 'SMTP 550 mailbox unavailable' }],
    shows: 'fails with a reason',
  },
  {
    name: 'reindex',
    input: { name: 'reindex' },
    events: [{ type: 'CANCEL', reason: 'superseded' }],
    shows: 'is cancelled before it starts',
  },
];

/**
 * Run the demo on `runtime` (which must know `job-lifecycle`) and resolve with the four jobs
 * at their ends. Job ids are fresh on every run, so it can run again on the same database.
 */
export async function runDemo(runtime: Runtime, options: DemoOptions): Promise<Job[]> {
  const { print } = options;
  const suffix = await freshSuffix(runtime);
  const ids = SCRIPTS.map((s) => `demo-${suffix}-${s.name}`);
  const width = Math.max(...ids.map((id) => id.length));

  print(`Spool demo on ${options.dbLabel}. Part one: four ${MACHINE} jobs. Each "rev" line is a transition, committed to SQLite before the next event is sent.`);
  print('');
  const narrate = narrator(width);
  const unsubscribe = runtime.subscribe((event) => {
    const line = narrate(event);
    if (line !== undefined) print(line);
  });
  const jobs: Job[] = [];
  try {
    for (const [i, script] of SCRIPTS.entries()) {
      const id = ids[i]!;
      print(paintHeading(`# ${id}: ${script.shows}`));
      await runtime.start(MACHINE, script.input, { jobId: id });
      for (const event of script.events) await runtime.send(id, event);
      jobs.push(await runtime.get(id));
      print('');
    }
  } finally {
    unsubscribe();
  }

  jobs.push(...(await runWorkerPart(runtime, suffix, print, narrator(width + 4))));

  print(
    table(
      ['JOB', 'STATE', 'PROGRESS', 'OUTCOME'],
      jobs.map((j) => [
        j.id,
        formatState(j.value),
        j.progress === null ? '-' : `${j.progress}%`,
        outcomeOf(j),
      ]),
    ),
  );
  const p = options.commandPrefix;
  const mine = `mine-${suffix}`;
  const look: [string, string][] = [
    [`${p} list`, 'every job in this database'],
    [`${p} show ${ids[1]!}`, 'one job: context, history event by event'],
    [`${p} show demo-${suffix}-export`, 'an export: activity attempts, its asset, its provider reference'],
    [`${p} show demo-${suffix}-retry`, 'a retried activity: the failed attempt and its error, then the one that succeeded'],
    [`${p} machines`, 'the registered machines and their events'],
    [`${p} worker`, 'a long-running worker: activities, retries and timers (Ctrl-C stops it)'],
  ];
  const width2 = Math.max(...look.map(([c]) => c.length));
  print('');
  print('Look around:');
  for (const [command, what] of look) print(`  ${command.padEnd(width2)}  # ${what}`);
  print('');
  print('Start and drive a job of your own (an event is JSON or a bare type):');
  for (const command of [
    `${p} start ${MACHINE} --id ${mine} --input '{"name":"my-job","items":2}'`,
    `${p} send ${mine} START`,
    `${p} send ${mine} '{"type":"ITEM_FAILED","reason":"timeout"}'`,
    `${p} send ${mine} ITEM_DONE`,
    `${p} show ${mine}`,
    `${p} start approval-flow --id ${mine}-ok --input '{"subject":"budget","remindAfterMs":60000}'`,
    `${p} send ${mine}-ok '{"type":"APPROVE","by":"you"}'`,
  ]) {
    print(`  ${command}`);
  }
  return jobs;
}

const WORKER_JOBS: readonly { name: string; machine: string; input: Record<string, unknown>; shows: string; events?: Record<string, unknown>[] }[] = [
  { name: 'retry', machine: 'retrying-job', input: { name: 'flaky-upload', items: 4, flakyAttempts: 1, autoStart: true }, shows: 'an activity fails once, is retried with backoff, completes' },
  { name: 'export', machine: 'export-job', input: { dataset: 'sales', rows: 500 }, shows: 'reserves a provider reference, exports (progress, an asset), completes' },
  { name: 'approval', machine: 'approval-flow', input: { subject: 'expenses', remindAfterMs: 300, deadlineMs: 900 }, shows: 'nobody decides: a reminder, then the deadline' },
  {
    name: 'approved',
    machine: 'approval-flow',
    input: { subject: 'laptop', remindAfterMs: 60_000 },
    shows: 'approved at once: its reminder and deadline timers are cancelled',
    events: [{ type: 'APPROVE', by: 'ann' }],
  },
];

/** Part two: jobs with activities and timers, run by the worker loop until every one has ended. */
async function runWorkerPart(runtime: Runtime, suffix: string, print: (line: string) => void, narrate: (event: RuntimeEvent) => string | undefined): Promise<Job[]> {
  const available = new Set(runtime.registry.all().map((m) => m.id));
  const scripts = WORKER_JOBS.filter((w) => available.has(w.machine));
  if (scripts.length === 0) return [];
  print('Part two: a worker runs activities (after their commit, retried with backoff) and durable timers.');
  print('');
  const ids = scripts.map((w) => `demo-${suffix}-${w.name}`);
  // The jobs run at once, so their lines interleave: say what each one shows first.
  for (const [i, w] of scripts.entries()) print(paintHeading(`# ${ids[i]!}: ${w.shows}`));
  print('');
  const unsubscribe = runtime.subscribe((event) => {
    const line = narrate(event);
    if (line !== undefined) print(line);
  });
  const controller = new AbortController();
  try {
    for (const [i, w] of scripts.entries()) {
      await runtime.start(w.machine, w.input, { jobId: ids[i]! });
      for (const event of w.events ?? []) await runtime.send(ids[i]!, event);
    }
    print('');
    const done = Promise.all(ids.map((id) => runtime.waitFor(id, (j) => j.final, { timeoutMs: 30_000 }))).finally(() => controller.abort());
    await runWorker(runtime, { signal: controller.signal, pollMs: 50 });
    await done;
    await runtime.idle();
  } finally {
    controller.abort();
    unsubscribe();
  }
  print('');
  return Promise.all(ids.map((id) => runtime.get(id)));
}

function outcomeOf(job: Job): string {
  const context = job.context as { outcome?: unknown; reconciled?: unknown; reminders?: unknown } | null;
  if (typeof context?.outcome === 'string') return context.outcome;
  return job.final ? formatState(job.value) : '-';
}

/** A short random suffix no existing demo job uses. */
async function freshSuffix(runtime: Runtime): Promise<string> {
  for (;;) {
    const suffix = randomBytes(3).toString('hex');
    const taken = await Promise.all(
      [...SCRIPTS.map((s) => `demo-${suffix}-${s.name}`), ...WORKER_JOBS.map((w) => `demo-${suffix}-${w.name}`), `mine-${suffix}`].map((id) =>
        runtime.get(id).then(
          () => true,
          (error: unknown) => {
            if (error instanceof JobNotFoundError) return false;
            throw error;
          },
        ),
      ),
    );
    if (!taken.includes(true)) return suffix;
  }
}

/** `PROGRESS {"percent":40}`: the type, then any other fields. */
function eventLabel(type: string, payload: unknown): string {
  const fields = payload !== null && typeof payload === 'object' && !Array.isArray(payload) ? { ...(payload as Record<string, unknown>) } : {};
  delete fields['type'];
  return Object.keys(fields).length > 0 ? `${type} ${formatJson(fields)}` : type;
}

const LABEL_WIDTH = Math.max(...SCRIPTS.flatMap((s) => s.events.map((e) => eventLabel(String(e['type']), e).length)));

/** One narration line per runtime event (or nothing for events the demo does not show). */
function narrator(width: number): (event: RuntimeEvent) => string | undefined {
  const lastProgress = new Map<string, number | null>();
  return (event) => {
    switch (event.type) {
      case 'job.started':
        lastProgress.set(event.job.id, event.job.progress);
        return `  ${event.job.id.padEnd(width)}  rev ${event.job.revision}  started ${event.job.machineId}@${event.job.machineVersion} in ${formatState(event.job.value)}`;
      case 'job.committed': {
        const t = event.transition;
        const label = eventLabel(t.eventType, t.payload);
        const from = t.from === null ? '-' : formatState(t.from);
        const to = formatState(t.to);
        let what: string;
        if (t.outcome === 'ignored') what = `${paintOutcome('ignored')}: no transition in ${from}`;
        else if (t.outcome === 'failed') what = paintError(`failed: ${t.error?.message ?? 'unknown error'}`);
        else what = from === to ? `stays in ${to}` : `${from} -> ${to}`;
        const progress = event.job.progress;
        let line = `  ${event.job.id.padEnd(width)}  rev ${t.revision}  ${label.padEnd(LABEL_WIDTH)}  ${what}`;
        if (progress !== null && progress !== lastProgress.get(event.job.id)) line += `  (progress ${progress}%)`;
        lastProgress.set(event.job.id, progress);
        // The final state says how it ended (completed, failed, cancelled); `done` is XState's status for any of them.
        if (event.job.final) line += `\n  ${' '.repeat(width)}  ended in ${formatState(event.job.value)} (status ${event.job.status}), output ${formatJson(event.job.output)}`;
        return line;
      }
      case 'job.quarantined':
        return `  ${event.jobId.padEnd(width)}  quarantined: ${event.reason}`;
      default:
        return describeWork(event, width);
    }
  };
}

/** Narration for a worker's events: activities and timers. Shared by `spool worker`. */
export function describeWork(event: RuntimeEvent, width = 0): string | undefined {
  switch (event.type) {
    case 'activity.started':
      return `  ${event.jobId.padEnd(width)}  activity ${event.src} attempt ${event.attempt} started (idempotency key ${event.effectId})`;
    case 'activity.finished':
      return `  ${event.jobId.padEnd(width)}  activity attempt ${event.attempt} ${event.outcome}${event.error ? `: ${event.error.message}` : ''}`;
    case 'timer.fired': {
      // Fired on the first tick after its deadline: late only when nothing ran at that moment (a downtime).
      const late = event.firedAt - event.dueAt;
      return `  ${event.jobId.padEnd(width)}  timer fired: ${event.eventType}${late >= 1000 ? ` (due ${new Date(event.dueAt).toISOString()}, ${formatLateness(late)} late: the original deadline was kept)` : ''}`;
    }
    case 'cancel.requested':
      return `  ${event.jobId.padEnd(width)}  cancel requested: ${event.reason}`;
    case 'job.quarantined':
      return `  ${event.jobId.padEnd(width)}  quarantined (held back): ${event.reason}`;
    case 'job.released':
      return `  ${event.jobId.padEnd(width)}  released from quarantine`;
    case 'action.failed':
      return `  ${event.jobId.padEnd(width)}  action ${event.action} failed after the commit (the transition stands): ${event.error.message}`;
    default:
      return undefined;
  }
}

function formatLateness(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
