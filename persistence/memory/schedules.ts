/**
 * The memory store's schedule operations: the SQLite store's `schedules.ts`, step for step, with
 * the same constraints (unique id, unique (schedule id, due time)) and the same orders. Every
 * change goes through the memory store's journal, so a refused step leaves nothing behind.
 */
import type {
  JobRecord,
  NewInboxEvent,
  NewJob,
  NewSchedule,
  OccurrenceRecord,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
} from '../../src/ports/store.ts';

/** What the schedule operations need from `MemoryStore`. */
export interface MemoryScheduleHooks {
  /** Run `fn` as a transaction: if it throws, everything it changed is undone. */
  tx<T>(fn: () => T): T;
  /** Journal an undo step for a change made inside `tx`. */
  record(undo: () => void): void;
  /** Insert a job at revision 1 with its history record and initial requests (throws if the id is taken). */
  insertJob(job: NewJob): void;
  getJob(id: string): JobRecord | undefined;
  /** `requestCancel` for a job that is still active: record the request once and accept the event. */
  requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): void;
}

/** Ends a fire step with its result; the transaction is undone. */
class Refused {
  constructor(readonly result: ScheduleFireResult) {}
}

export class MemorySchedules {
  readonly #hooks: MemoryScheduleHooks;
  readonly #schedules = new Map<string, ScheduleRecord>();
  /** `scheduleId \0 dueAt` → occurrence: the UNIQUE (schedule_id, due_at) key. */
  readonly #occurrences = new Map<string, OccurrenceRecord>();

  constructor(hooks: MemoryScheduleHooks) {
    this.#hooks = hooks;
  }

  put(schedule: NewSchedule, expectedRevision: number | null): { ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null } {
    return this.#hooks.tx(() => {
      const current = this.#schedules.get(schedule.id);
      const { at, ...fields } = json(schedule);
      if (expectedRevision === null ? current !== undefined : current?.revision !== expectedRevision) {
        return { ok: false as const, current: current ? copy(current) : null };
      }
      const stored: ScheduleRecord = current
        ? { ...fields, revision: current.revision + 1, createdAt: current.createdAt, updatedAt: at }
        : { ...fields, revision: 1, createdAt: at, updatedAt: at };
      this.#set(schedule.id, stored);
      return { ok: true as const, schedule: copy(stored) };
    });
  }

  get(id: string): ScheduleRecord | undefined {
    const s = this.#schedules.get(id);
    return s ? copy(s) : undefined;
  }

  list(filter: { owner?: string | null }): ScheduleRecord[] {
    return [...this.#schedules.values()]
      .filter((s) => filter.owner === undefined || (s.owner ?? '') === (filter.owner ?? ''))
      .sort((a, b) => compareText(a.id, b.id))
      .map(copy);
  }

  delete(id: string, owner: string | null): boolean {
    return this.#hooks.tx(() => {
      const s = this.#schedules.get(id);
      if (!s || (s.owner ?? '') !== (owner ?? '')) return false;
      this.#schedules.delete(id);
      this.#hooks.record(() => this.#schedules.set(id, s));
      return true;
    });
  }

  due(owner: string | null, now: number, limit: number): ScheduleRecord[] {
    const key = (s: ScheduleRecord) => Math.min(s.nextDueAt ?? s.bufferedDueAt!, s.bufferedDueAt ?? s.nextDueAt!);
    const due = [...this.#schedules.values()]
      .filter((s) => (s.owner ?? '') === (owner ?? '') && ((s.nextDueAt !== null && s.nextDueAt <= now) || s.bufferedDueAt !== null))
      .sort((a, b) => key(a) - key(b) || compareText(a.id, b.id));
    return (limit < 0 ? due : due.slice(0, limit)).map(copy);
  }

  fire(f: ScheduleFire): ScheduleFireResult {
    try {
      return this.#hooks.tx((): ScheduleFireResult => {
        const current = this.#schedules.get(f.scheduleId);
        if (!current || current.revision !== f.expectedRevision) {
          throw new Refused({ ok: false, reason: 'conflict', schedule: current ? copy(current) : null });
        }
        const advanced: ScheduleRecord = { ...current, ...json(f.state), revision: current.revision + 1, updatedAt: f.at };
        this.#set(f.scheduleId, advanced);
        let job: JobRecord | null = null;
        const o = f.occurrence;
        if (o) {
          const key = occurrenceKey(f.scheduleId, o.dueAt);
          if (this.#occurrences.has(key)) throw new Refused({ ok: false, reason: 'occurrence-taken' });
          this.#occurrences.set(key, { scheduleId: f.scheduleId, dueAt: o.dueAt, outcome: o.outcome, jobId: o.job?.id ?? null, reason: o.reason, at: f.at });
          this.#hooks.record(() => this.#occurrences.delete(key));
          if (o.job) {
            if (this.#hooks.getJob(o.job.id)) throw new Refused({ ok: false, reason: 'occurrence-taken' });
            this.#hooks.insertJob(o.job);
            job = this.#hooks.getJob(o.job.id) ?? null;
          }
        }
        if (f.cancel) this.#hooks.requestCancel(f.cancel.jobId, f.cancel.reason, f.cancel.event, f.at);
        return { ok: true, schedule: copy(advanced), job };
      });
    } catch (error) {
      if (error instanceof Refused) return error.result;
      throw error;
    }
  }

  occurrences(scheduleId: string, limit: number): OccurrenceRecord[] {
    const rows = [...this.#occurrences.values()].filter((o) => o.scheduleId === scheduleId).sort((a, b) => b.dueAt - a.dueAt);
    return (limit < 0 ? rows : rows.slice(0, limit)).map(copy);
  }

  /** Journaled `Map.set`. */
  #set(id: string, value: ScheduleRecord): void {
    const had = this.#schedules.has(id);
    const previous = this.#schedules.get(id);
    this.#schedules.set(id, value);
    this.#hooks.record(() => (had ? this.#schedules.set(id, previous!) : this.#schedules.delete(id)));
  }
}

function occurrenceKey(scheduleId: string, dueAt: number): string {
  return `${scheduleId}\u0000${dueAt}`;
}

/** A value as it comes back from JSON columns. */
function json<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function copy<T>(value: T): T {
  return structuredClone(value);
}

/** SQLite's BINARY collation: UTF-8 byte order. */
function compareText(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
