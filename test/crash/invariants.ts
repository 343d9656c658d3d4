/**
 * What must hold after any number of crashes, checked against the database file and the logs the
 * harness kept (the client's acknowledgements, the workers' timer and attempt lines). Read-only:
 * it opens its own connection and changes nothing.
 */
import Database from 'better-sqlite3';
import type { AnyStateMachine } from 'xstate';
import { hashJson } from '../../src/base/json.ts';
import { replayHistory } from '../helpers/replay.ts';
import { CRASH_MACHINES } from './machines.ts';
import { SECRET_MARK, type Command } from './workload.ts';

export type ViolationKind =
  | 'integrity'
  | 'lost-ack'
  | 'ack-mismatch'
  | 'pending-left'
  | 'double-apply'
  | 'inbox-history-mismatch'
  | 'revision-gap'
  | 'fencing-chain'
  | 'lease-fence'
  | 'timer-twice'
  | 'timer-state'
  | 'attempt-twice'
  | 'attempt-overlap'
  | 'attempts-exceeded'
  | 'unsafe-rerun'
  | 'outcome-twice'
  | 'not-final'
  | 'effect-left'
  | 'replay-mismatch'
  | 'dup-not-recognised'
  | 'conflict-accepted'
  | 'terminal-but-recorded'
  | 'client-error'
  | 'client-exit'
  | 'worker-error'
  | 'worker-exit'
  | 'stuck'
  | 'secret-leaked';

export interface Violation {
  kind: ViolationKind;
  detail: string;
  jobId?: string;
}

export type Answer = { type: 'ack' | 'err'; id: string; [key: string]: unknown };

/** One line of the acknowledgement log: a command and what the client answered, in arrival order. */
export interface AckEntry {
  seq: number;
  cmd: Command;
  answer: Answer;
}

/** What the workers printed, summed over every worker process of the run. */
export interface WorkerLog {
  /** timer id -> how many `timer` lines (a timer moved into its job's inbox). */
  fired: Map<string, number>;
  /** `effectId#attempt` -> how many `attempt` lines (an attempt claimed). */
  attempts: Map<string, number>;
  /**
   * Worker pid -> when it lived (harness clock, `Date.now()`): `from` its spawn, `to` the moment
   * the harness reaped it (null: still running). A runner id is `host/pid/uuid`, so an attempt's
   * runner maps to a worker life. Without it the attempt-overlap check is skipped.
   */
  lives?: Map<number, { from: number; to: number | null }>;
}

export interface DatabaseTally {
  jobs: number;
  /** `machine:final state` -> jobs. */
  ends: Record<string, number>;
  transitions: number;
  outcomes: Record<string, number>;
  inbox: Record<string, number>;
  timers: Record<string, number>;
  effects: number;
  attempts: number;
  interruptedAttempts: number;
  /** Attempt rows by outcome (`running` at the end: its runner died and its state was left before anyone took it over). */
  attemptOutcomes: Record<string, number>;
  /** Pairs of attempts of one effect checked for overlap while both runners lived; pairs skipped (a runner not in the workers' log). */
  overlapPairsChecked: number;
  overlapPairsSkipped: number;
}

type Row = Record<string, unknown>;

const machines = new Map<string, AnyStateMachine>(CRASH_MACHINES.map((d) => [d.machine.id, d.machine as AnyStateMachine]));
/** `machine/src` -> maxAttempts of its policy (Spool's default is 3). */
const policies = new Map<string, number>(
  CRASH_MACHINES.flatMap((d) => Object.entries((d as { activities?: Record<string, { maxAttempts?: number }> }).activities ?? {}).map(([src, p]) => [`${d.machine.id}/${src}`, p.maxAttempts ?? 3] as const)),
);

const parse = (text: unknown): unknown => (typeof text === 'string' ? JSON.parse(text) : text);

function count<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

/**
 * Check every invariant. `expectFinal`: every job must have ended (the run's final phase let the
 * last worker finish everything).
 */
export function checkInvariants(dbPath: string, acks: readonly AckEntry[], workers: WorkerLog, expectFinal = true): { violations: Violation[]; tally: DatabaseTally } {
  const violations: Violation[] = [];
  const fail = (kind: ViolationKind, detail: string, jobId?: string) => violations.push({ kind, detail, ...(jobId ? { jobId } : {}) });
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    const integrity = db.pragma('integrity_check', { simple: true });
    if (integrity !== 'ok') fail('integrity', `integrity_check: ${String(integrity)}`);
    const fk = db.pragma('foreign_key_check') as unknown[];
    if (fk.length > 0) fail('integrity', `foreign_key_check: ${JSON.stringify(fk.slice(0, 5))}`);

    const jobs = db.prepare('SELECT * FROM jobs ORDER BY id').all() as Row[];
    const jobById = new Map(jobs.map((j) => [j['id'] as string, j]));
    const history = new Map<string, Row[]>();
    for (const r of db.prepare('SELECT * FROM transitions ORDER BY job_id, revision').all() as Row[]) {
      const list = history.get(r['job_id'] as string) ?? [];
      list.push(r);
      history.set(r['job_id'] as string, list);
    }
    // Every accepted event: inbox rows and events applied as they were accepted (history rows only).
    const inbox = db.prepare('SELECT * FROM events ORDER BY job_id, revision IS NULL, revision, seq').all() as Row[];
    const inboxByKey = new Map<string, Row>();
    for (const e of inbox) {
      const key = `${e['job_id'] as string}\u0000${e['event_id'] as string}`;
      if (inboxByKey.has(key)) fail('double-apply', `event ${String(e['event_id'])} is recorded twice (inbox and history)`, e['job_id'] as string);
      inboxByKey.set(key, e);
    }
    // Sensitive values: an event's secret, and an error that quotes it, are redacted wherever
    // they are stored (a pending event keeps its payload until applied; none is left at the end).
    const leaks = db
      .prepare(
        `SELECT 'history' AS at, job_id, revision FROM transitions WHERE instr(payload, @mark) OR instr(coalesce(error, ''), @mark)
         UNION ALL SELECT 'inbox', job_id, seq FROM inbox WHERE (status <> 'pending' AND instr(payload, @mark)) OR instr(coalesce(error, ''), @mark)
         UNION ALL SELECT 'notes', job_id, id FROM notes WHERE instr(message, @mark)`,
      )
      .all({ mark: SECRET_MARK }) as Row[];
    for (const l of leaks) fail('secret-leaked', `${String(l['at'])} row ${String(l['revision'])} holds a sensitive value`, l['job_id'] as string);
    const timers = db.prepare('SELECT * FROM timers').all() as Row[];
    const effects = db.prepare('SELECT * FROM effects').all() as Row[];
    const attempts = db.prepare('SELECT * FROM attempts ORDER BY effect_id, attempt').all() as Row[]; // ended and running (schema 14)

    const tally: DatabaseTally = { jobs: jobs.length, ends: {}, transitions: 0, outcomes: {}, inbox: {}, timers: {}, effects: effects.length, attempts: attempts.length, interruptedAttempts: 0, attemptOutcomes: {}, overlapPairsChecked: 0, overlapPairsSkipped: 0 };

    // ---- jobs: revisions, history against inbox, the pure replay, the end
    for (const job of jobs) {
      const id = job['id'] as string;
      const rows = history.get(id) ?? [];
      tally.transitions += rows.length;
      const revision = job['revision'] as number;
      const revs = rows.map((r) => r['revision'] as number);
      if (revs.length !== revision || revs.some((r, i) => r !== i + 1)) {
        fail('revision-gap', `revision ${revision}, history revisions ${compact(revs)}`, id);
      }
      // The fencing audit: the revision is the fencing token (every commit is `UPDATE ... WHERE
      // revision = ?`), so the history must be one chain: no revision twice, and each record starts
      // where the previous one ended. Two owners advancing the job from the same state would show
      // as a repeated revision or a record whose `from` is not its predecessor's `to`.
      for (let i = 1; i < rows.length; i += 1) {
        const prev = rows[i - 1]!;
        const r = rows[i]!;
        if (r['revision'] === prev['revision']) fail('fencing-chain', `two history records at r${String(r['revision'])}`, id);
        else if (r['from_value'] !== prev['to_value'] && JSON.stringify(parse(r['from_value'])) !== JSON.stringify(parse(prev['to_value']))) {
          fail('fencing-chain', `r${String(r['revision'])} (${String(r['event_type'])}) starts from ${String(r['from_value'])}, but r${String(prev['revision'])} ended in ${String(prev['to_value'])}`, id);
        }
      }
      // The lease audit: every commit records its runner and the lease fence it held. A fence is one
      // claim by one runner, and fences only grow: two owners advancing the job at once would show
      // as one fence under two runners, or a fence going back (an old owner writing after a takeover).
      const runnerOfFence = new Map<number, string>();
      let lastFence = -1;
      for (const r of rows) {
        const fence = r['fence'] as number | null;
        const runner = r['runner'] as string | null;
        if (fence === null || runner === null) {
          fail('lease-fence', `r${String(r['revision'])} (${String(r['event_type'])}) was committed without a lease`, id);
          continue;
        }
        if (fence < lastFence) fail('lease-fence', `r${String(r['revision'])} has fence ${fence} after fence ${lastFence}`, id);
        lastFence = Math.max(lastFence, fence);
        if (fence === 0) continue; // created (no claim yet)
        const first = runnerOfFence.get(fence);
        if (first === undefined) runnerOfFence.set(fence, runner);
        else if (first !== runner) fail('lease-fence', `fence ${fence} used by two runners: ${first} and ${runner} (r${String(r['revision'])})`, id);
      }
      const seen = new Map<string, number>();
      for (const r of rows) {
        tally.outcomes[r['outcome'] as string] = (tally.outcomes[r['outcome'] as string] ?? 0) + 1;
        const eventId = r['event_id'] as string | null;
        if (eventId === null) continue;
        count(seen, eventId);
        const e = inboxByKey.get(`${id}\u0000${eventId}`);
        if (!e) fail('inbox-history-mismatch', `history r${String(r['revision'])} ${eventId} has no inbox row`, id);
        else if (e['revision'] !== r['revision'] || e['status'] !== r['outcome']) {
          fail('inbox-history-mismatch', `history r${String(r['revision'])} ${eventId} ${String(r['outcome'])}, inbox r${String(e['revision'])} ${String(e['status'])}`, id);
        }
      }
      for (const [eventId, n] of seen) if (n > 1) fail('double-apply', `event ${eventId} is in the history ${n} times`, id);

      const status = job['status'] as string;
      const value = parse(job['state_value']);
      const machineId = job['machine_id'] as string;
      const end = `${machineId}:${status === 'active' ? `active(${JSON.stringify(value)})` : JSON.stringify(value)}`;
      tally.ends[end] = (tally.ends[end] ?? 0) + 1;
      if (expectFinal && status === 'active') {
        const pending = inbox.filter((e) => e['job_id'] === id && e['status'] === 'pending').map((e) => e['event_id']);
        const scheduled = timers.filter((t) => t['job_id'] === id && (t['status'] === 'scheduled' || t['status'] === 'fired')).map((t) => `${String(t['key'])}@${String(t['status'])}`);
        const open = effects.filter((f) => f['job_id'] === id && f['active'] === 1).map((f) => `${String(f['src'])}:${String(f['status'])}#${String(f['attempt'])}`);
        fail('not-final', `still active in ${JSON.stringify(value)}; pending events ${JSON.stringify(pending)}, timers ${JSON.stringify(scheduled)}, effects ${JSON.stringify(open)}`, id);
      }

      const machine = machines.get(machineId);
      if (!machine) {
        fail('replay-mismatch', `unknown machine ${machineId}`, id);
        continue;
      }
      try {
        const { final, problems } = replayHistory(
          machine,
          parse(job['input']),
          rows.map((r) => ({ revision: r['revision'] as number, eventType: r['event_type'] as string, payload: parse(r['payload']), outcome: r['outcome'] as string, to: parse(r['to_value']) })),
        );
        for (const p of problems.slice(0, 3)) fail('replay-mismatch', p, id);
        const stored = { value, context: parse(job['context']), status };
        if (JSON.stringify(stored) !== JSON.stringify(final)) fail('replay-mismatch', `stored ${JSON.stringify(stored)}, pure replay ${JSON.stringify(final)}`, id);
      } catch (error) {
        fail('replay-mismatch', `replay threw: ${(error as Error).message}`, id);
      }
    }

    // ---- inbox
    for (const e of inbox) {
      const status = e['status'] as string;
      tally.inbox[status] = (tally.inbox[status] ?? 0) + 1;
      if (status === 'pending') fail('pending-left', `event ${String(e['event_id'])} (${String(e['type'])}) is still pending`, e['job_id'] as string);
      if (status !== 'pending' && status !== 'rejected') {
        const rows = history.get(e['job_id'] as string) ?? [];
        const r = rows[(e['revision'] as number) - 1];
        if (!r || r['event_id'] !== e['event_id']) fail('inbox-history-mismatch', `inbox ${String(e['event_id'])} ${status} at r${String(e['revision'])}, history there: ${r ? String(r['event_id']) : 'none'}`, e['job_id'] as string);
      }
    }

    // ---- timers: each fired at most once, and its state agrees with its event
    const timerEvents = new Map<string, Row[]>();
    for (const e of inbox) {
      if (e['source_kind'] !== 'timer') continue;
      const list = timerEvents.get(e['source_id'] as string) ?? [];
      list.push(e);
      timerEvents.set(e['source_id'] as string, list);
    }
    for (const t of timers) {
      const id = t['id'] as string;
      const status = t['status'] as string;
      tally.timers[status] = (tally.timers[status] ?? 0) + 1;
      const events = timerEvents.get(id) ?? [];
      const lines = workers.fired.get(id) ?? 0;
      if (events.length > 1 || lines > 1) fail('timer-twice', `timer ${id}: ${events.length} inbox events, fired by workers ${lines} times`, t['job_id'] as string);
      const applied = events.filter((e) => e['status'] === 'applied').length;
      if (status === 'delivered' && applied !== 1) fail('timer-state', `timer ${id} delivered, but its event is ${events.map((e) => e['status']).join(',') || 'missing'}`, t['job_id'] as string);
      if (status !== 'delivered' && applied > 0) fail('timer-state', `timer ${id} is ${status}, but its event was applied`, t['job_id'] as string);
      if (status === 'scheduled' && events.length > 0) fail('timer-state', `timer ${id} is scheduled, but has an inbox event`, t['job_id'] as string);
    }

    // ---- effects: attempts within the policy, contiguous, an unsafe one never re-run, one outcome applied
    const attemptsOf = new Map<string, Row[]>();
    for (const a of attempts) {
      const list = attemptsOf.get(a['effect_id'] as string) ?? [];
      list.push(a);
      attemptsOf.set(a['effect_id'] as string, list);
      if (a['outcome'] === 'interrupted') tally.interruptedAttempts += 1;
      tally.attemptOutcomes[a['outcome'] as string] = (tally.attemptOutcomes[a['outcome'] as string] ?? 0) + 1;
    }
    const appliedOutcomes = new Map<string, number>();
    for (const e of inbox) if (e['source_kind'] === 'effect' && e['status'] === 'applied') count(appliedOutcomes, e['source_id'] as string);
    const finalJobs = new Set(jobs.filter((j) => j['status'] !== 'active').map((j) => j['id'] as string));
    for (const f of effects) {
      const id = f['id'] as string;
      const jobId = f['job_id'] as string;
      const rows = attemptsOf.get(id) ?? [];
      const numbers = rows.map((a) => a['attempt'] as number);
      const max = f['max_attempts'] as number;
      const machineId = jobById.get(jobId)?.['machine_id'] as string | undefined;
      const policy = policies.get(`${machineId ?? '?'}/${String(f['src'])}`) ?? 3;
      if (max !== policy) fail('attempts-exceeded', `effect ${id}: max_attempts ${max}, but the policy of ${String(machineId)}/${String(f['src'])} says ${policy}`, jobId);
      if (numbers.length !== f['attempt'] || numbers.some((n, i) => n !== i + 1)) fail('attempts-exceeded', `effect ${id}: attempt ${String(f['attempt'])}, attempt rows ${compact(numbers)}`, jobId);
      if (numbers.length > max) fail('attempts-exceeded', `effect ${id}: ${numbers.length} attempts (${rows.map((a) => a['outcome']).join(',')}), policy allows ${max}`, jobId);
      if (f['unsafe'] === 1) {
        const interrupted = rows.findIndex((a) => a['outcome'] === 'interrupted');
        if (interrupted >= 0 && interrupted < rows.length - 1) fail('unsafe-rerun', `unsafe effect ${id} ran again after interrupted attempt ${interrupted + 1}: ${rows.map((a) => a['outcome']).join(',')}`, jobId);
      }
      for (const n of numbers) {
        const lines = workers.attempts.get(`${id}#${n}`) ?? 0;
        if (lines > 1) fail('attempt-twice', `effect ${id} attempt ${n} was claimed ${lines} times`, jobId);
      }
      // No two attempts of one effect running at once while both their runners were alive (a
      // takeover is allowed only from a dead runner; the claim lease is far longer than the run).
      for (let i = 0; i < rows.length; i += 1) {
        for (let j = i + 1; j < rows.length; j += 1) {
          const a = rows[i]!;
          const b = rows[j]!;
          const la = lifeOf(workers, a['runner']);
          const lb = lifeOf(workers, b['runner']);
          if (!la || !lb) {
            tally.overlapPairsSkipped += 1;
            continue;
          }
          tally.overlapPairsChecked += 1;
          const lo = Math.max(a['started_at'] as number, b['started_at'] as number, la.from, lb.from);
          const hi = Math.min((a['ended_at'] as number | null) ?? Infinity, (b['ended_at'] as number | null) ?? Infinity, la.to ?? Infinity, lb.to ?? Infinity);
          if (lo < hi) {
            fail(
              'attempt-overlap',
              `effect ${id}: attempt ${String(a['attempt'])} (${String(a['runner'])}, ${String(a['started_at'])}..${String(a['ended_at'])} ${String(a['outcome'])}) and attempt ${String(b['attempt'])} (${String(b['runner'])}, ${String(b['started_at'])}..${String(b['ended_at'])} ${String(b['outcome'])}) overlap for ${hi === Infinity ? 'ever' : `${hi - lo} ms`} while both runners lived (${la.from}..${String(la.to)}, ${lb.from}..${String(lb.to)})`,
              jobId,
            );
          }
        }
      }
      const outcomes = appliedOutcomes.get(id) ?? 0;
      if (outcomes > 1) fail('outcome-twice', `effect ${id}: ${outcomes} outcomes applied`, jobId);
      if (expectFinal && finalJobs.has(jobId) && f['active'] === 1 && ['pending', 'running', 'backoff', 'waiting'].includes(f['status'] as string)) {
        fail('effect-left', `effect ${id} of a final job is still active (${String(f['status'])})`, jobId);
      }
    }

    // ---- the acknowledgement log against the database
    checkAcks(acks, inboxByKey, jobById, fail);
    return { violations, tally };
  } finally {
    db.close();
  }
}

function checkAcks(acks: readonly AckEntry[], inboxByKey: Map<string, Row>, jobs: Map<string, Row>, fail: (kind: ViolationKind, detail: string, jobId?: string) => void): void {
  const firstAck = new Map<string, AckEntry>();
  const lastAckOfEvent = new Map<string, number>();
  for (const a of acks) {
    if (a.answer.type === 'ack' && !firstAck.has(a.cmd.id)) firstAck.set(a.cmd.id, a);
    if (a.answer.type === 'ack' && a.cmd.op === 'send') lastAckOfEvent.set(`${a.cmd.jobId}\u0000${a.cmd.eventId}`, a.seq);
  }
  for (const entry of acks) {
    const { cmd, answer } = entry;
    const what = `${cmd.id} ${cmd.op}${cmd.op === 'send' ? ` ${cmd.event.type} ${cmd.eventId}` : ''} via ${cmd.via}`;
    if (answer.type === 'err') {
      const code = answer['code'];
      const expected = (cmd.kind === 'conflict' && code === 'SPOOL_IDEMPOTENCY_CONFLICT') || (cmd.op !== 'start' && code === 'SPOOL_TERMINAL');
      if (!expected) fail('client-error', `${what}: ${String(code)} ${String(answer['name'])}: ${String(answer['message'])}`, cmd.jobId);
      if (cmd.op === 'send' && code === 'SPOOL_TERMINAL') {
        const key = `${cmd.jobId}\u0000${cmd.eventId}`;
        if (inboxByKey.has(key) && (lastAckOfEvent.get(key) ?? -1) < entry.seq) {
          fail('terminal-but-recorded', `${what} was refused as terminal, yet the event is in the inbox (${String(inboxByKey.get(key)!['status'])})`, cmd.jobId);
        }
      }
      if (cmd.kind === 'dup' && cmd.of !== undefined) {
        const original = firstAck.get(cmd.of);
        if (original && original.seq < entry.seq) fail('dup-not-recognised', `${what}: a resend of acknowledged ${cmd.of} was refused with ${String(code)}`, cmd.jobId);
      }
      continue;
    }
    if (cmd.op === 'start') {
      const job = jobs.get(cmd.jobId);
      if (!job) fail('lost-ack', `${what}: acknowledged, but the job is missing`, cmd.jobId);
      else if (job['machine_id'] !== cmd.machine) fail('ack-mismatch', `${what}: job runs ${String(job['machine_id'])}`, cmd.jobId);
      continue;
    }
    if (cmd.op === 'cancel') {
      const job = jobs.get(cmd.jobId);
      const event = inboxByKey.get(`${cmd.jobId}\u0000spool.cancel`);
      if (!job || job['cancel_requested_at'] === null || !event) fail('lost-ack', `${what}: acknowledged, but the cancel request or its event is missing`, cmd.jobId);
      continue;
    }
    if (cmd.kind === 'conflict') {
      fail('conflict-accepted', `${what}: another payload under acknowledged ${cmd.of ?? '?'} was accepted (${JSON.stringify(answer)})`, cmd.jobId);
      continue;
    }
    const row = inboxByKey.get(`${cmd.jobId}\u0000${cmd.eventId}`);
    if (!row) {
      fail('lost-ack', `${what}: acknowledged ${String(answer['status'])}, but the event is not in the inbox`, cmd.jobId);
      continue;
    }
    if (row['payload_hash'] !== hashJson(cmd.event)) fail('ack-mismatch', `${what}: the inbox holds another payload under this id`, cmd.jobId);
    if (answer['status'] !== 'pending' && (row['status'] !== answer['status'] || row['revision'] !== answer['revision'])) {
      fail('ack-mismatch', `${what}: acknowledged ${String(answer['status'])} r${String(answer['revision'])}, stored ${String(row['status'])} r${String(row['revision'])}`, cmd.jobId);
    }
    if (cmd.kind === 'dup' && cmd.of !== undefined) {
      const original = firstAck.get(cmd.of);
      if (original && original.seq < entry.seq && answer['duplicate'] !== true) fail('dup-not-recognised', `${what}: a resend of acknowledged ${cmd.of} was not recognised as a duplicate`, cmd.jobId);
    }
  }
}

/** The life of the worker process whose runtime had runner id `runner` (`host/pid/uuid`), if the log knows it. */
function lifeOf(workers: WorkerLog, runner: unknown): { from: number; to: number | null } | undefined {
  if (typeof runner !== 'string' || !workers.lives) return undefined;
  const pid = Number(runner.split('/').at(-2));
  return Number.isInteger(pid) ? workers.lives.get(pid) : undefined;
}

/** `1..5,7,9..10` */
function compact(numbers: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < numbers.length; ) {
    let j = i;
    while (j + 1 < numbers.length && numbers[j + 1] === numbers[j]! + 1) j += 1;
    out.push(i === j ? String(numbers[i]) : `${numbers[i]}..${numbers[j]}`);
    i = j + 1;
  }
  return out.join(',') || '(none)';
}
