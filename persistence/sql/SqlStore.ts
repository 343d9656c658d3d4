/**
 * The store, written once: every method of the JobStore port over a {@link SqlDriver}
 * (driver.ts). The rules of each write are programs (commit.ts, writes.ts, schedules.ts), the
 * statements one text per dialect (statements.ts), the records read back by records.ts. A driver
 * (persistence/drivers/<name>) runs them: SqliteStore and PostgresStore are this class over theirs.
 */
import type {
  AcceptResult,
  AssetRecord,
  AttemptRecord,
  AttemptResult,
  ClaimedEffect,
  CommitResult,
  CreateJobResult,
  DueClaim,
  DueClaimResult,
  EffectRecord,
  ErrorInfo,
  FeedPage,
  FinishStatus,
  HistoryFeedFilter,
  InboxRecord,
  JobFilter,
  JobRecord,
  JobStore,
  JsonValue,
  NewInboxEvent,
  NewJob,
  NewSchedule,
  NoteRecord,
  OccurrenceRecord,
  Outcome,
  PurgeFilter,
  QueuedEvent,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  StoreStats,
  TimerRecord,
  TransitionCommit,
  TransitionRecord,
  WriteBatch,
  WriteBatchResult,
} from '../../src/ports/store.ts';
import { CommitOutcomeUnknown, operationsOf } from '../../src/ports/store.ts';
import { applyCommit, claimIn, createIn, findEvent, finishIn } from './commit.ts';
import { andThen, inTurn, jobsOfCommit, jobsOfCreate, locksOfCreate, type Locks, type SqlDriver, type WriteOptions } from './driver.ts';
import { dueRead } from './dueClaims.ts';
import { guardEntryPoints } from './faults.ts';
import { failure, LeaseHeld } from './outcomes.ts';
import { all, run, type Program } from './program.ts';
import { damageReason, toAssetRecord, toAttemptRecord, toEffectRecord, toInboxRecord, toJobRecord, toTimerRecord, toTransitionRecord, withUncommitted } from './records.ts';
import { fireScheduleIn, putScheduleIn, Refused, toOccurrenceRecord, toScheduleRecord } from './schedules.ts';
import { jobListSql, type StatementName } from './statements.ts';
import { statsIn } from './stats.ts';
import { byteOrder } from './values.ts';
import { acceptEventIn, activeVersionsIn, attachAssetIn, completeByTokenIn, expireLeasesIn, failEffectIn, fireTimerIn, notedIn, releaseAttemptIn, requestCancelIn } from './writes.ts';

export class SqlStore implements JobStore {
  readonly description: string;
  readonly schemaVersion: number;
  readonly #d: SqlDriver;

  protected constructor(driver: SqlDriver) {
    this.#d = driver;
    this.description = driver.description;
    this.schemaVersion = driver.schemaVersion;
  }

  /** @internal The driver's error at entry point `call`, as a typed storage fault (guardEntryPoints). */
  static faultOf(store: SqlStore, error: unknown, call: string): unknown {
    return store.#d.fault(error, call);
  }

  // Jobs, events, history

  async createJob(job: NewJob): Promise<CreateJobResult> {
    return this.#d.write((t) => t.run(createIn(job)), { locks: () => locksOfCreate(job) });
  }

  async writeBatch(batch: WriteBatch): Promise<WriteBatchResult> {
    const { creates = [], commits = [], finishes = [], releases = [], claims = [], dueClaims = [] } = batch;
    if (creates.length + finishes.length + releases.length + claims.length + dueClaims.length === 0) return { creates: [], commits: await this.commit(commits), finishes: [], claims: [] };
    const options: WriteOptions = { locks: () => batchLocks(batch), ops: () => operationsOf(batch), batch };
    // One new job alone (a lone start): no savepoint, as a failure rolls the whole transaction back.
    if (creates.length === 1 && commits.length + finishes.length + releases.length + claims.length + dueClaims.length === 0) {
      const job = creates[0]!;
      try {
        return { creates: [{ ok: true, result: await this.#d.write((t) => t.run(createIn(job)), options) }], commits: [], finishes: [], claims: [] };
      } catch (error) {
        if (this.#d.isFault(error) || error instanceof CommitOutcomeUnknown) throw error;
        return { creates: [{ ok: false, error }], commits: [], finishes: [], claims: [] };
      }
    }
    // Each write in its own savepoint, in turn: a refused one rolls back alone. The batch claims
    // last, so that they see the slots and rows the batch's outcomes freed.
    return this.#d.write(
      (t) =>
        andThen(t.each(creates, createIn, false, jobsOfCreate), (c) =>
          andThen(t.eachCommit(commits, applyCommit), (m) =>
            andThen(t.each(finishes, finishIn), (f) =>
              andThen(t.each(releases, releaseIn, false, (r) => r.jobIds), (r) =>
                andThen(t.each(claims, claimIn, true), (l) =>
                  andThen(inTurn(dueClaims, (d) => t.claimDue(d)), (d) => ({
                    creates: c as WriteBatchResult['creates'],
                    commits: m,
                    finishes: f as WriteBatchResult['finishes'],
                    ...(releases.length > 0 ? { releases: r as Outcome<number>[] } : {}),
                    claims: l,
                    ...(dueClaims.length > 0 ? { dueClaims: d } : {}),
                  })),
                ),
              ),
            ),
          ),
        ),
      options,
    );
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    const options: WriteOptions = { locks: () => ({ jobs: commits.flatMap(jobsOfCommit) }), ops: () => operationsOf({ commits }), batch: { commits } };
    if (commits.length === 1) {
      // One commit: no savepoint; a refused one rolls the whole transaction back.
      try {
        return [await this.#d.write((t) => t.run(applyCommit(commits[0]!)), options)];
      } catch (error) {
        return [failure(error, this.#d.isFault)];
      }
    }
    return this.#d.write((t) => t.eachCommit(commits, applyCommit), options);
  }

  async getJob(id: string, known?: JobRecord): Promise<JobRecord | undefined> {
    if (known?.id === id) {
      // What moves without a commit (records.ts, withUncommitted): the snapshot and context are not read again.
      const values = this.#d.values('uncommittedOf', [id]);
      const current = withUncommitted(known, values instanceof Promise ? await values : values);
      if (current) return current;
    }
    const read = this.#d.job(id);
    const row = read instanceof Promise ? await read : read;
    if (!row) return undefined;
    const job = toJobRecord(row);
    if (job.corruption !== undefined) await this.#recordDamage([job]);
    return job;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    const row = await this.#d.get('byKey', [owner ?? '', key]);
    return row ? (await this.#recordDamage([toJobRecord(row)]))[0] : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    const { sql, params } = jobListSql(filter, this.#d.dialect);
    return this.#recordDamage((await this.#d.query(sql, params)).map(toJobRecord));
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    return (await this.#d.all('orphanedChildren', [limit])).map((r) => r['id'] as string);
  }

  async activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    return this.#d.read(activeVersionsIn(owner, countUpTo));
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    return this.#d.write((t) => t.run(acceptEventIn(event)), { locks: { jobs: [event.jobId] } });
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    const row = await this.#d.read(findEvent(jobId, eventId));
    return row ? toInboxRecord(row) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('listEvents', [jobId])).map(toInboxRecord));
  }

  async pendingEvents(jobId: string, limit: number): Promise<QueuedEvent[]> {
    if (limit === 1) {
      const row = await this.#d.get('firstPending', [jobId]); // LIMIT 1 literal: no re-prepare per bind
      return row ? [toInboxRecord(row) as QueuedEvent] : [];
    }
    return (await this.#d.all('pending', [jobId, limit])).map((r) => toInboxRecord(r) as QueuedEvent);
  }

  async jobsWithPendingEvents(limit: number, lease?: { runner: string; now: number }): Promise<string[]> {
    const rows = await this.#d.all('pendingJobs', [{ limit, runner: lease?.runner ?? null, now: lease?.now ?? 0 }]);
    return rows.map((r) => r['job_id'] as string);
  }

  async commitLanded(jobId: string, revision: number, eventId: string | null): Promise<boolean> {
    return (await this.#d.get('landed', [{ job: jobId, revision, event: eventId }])) !== undefined;
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number, payload?: JsonValue): Promise<boolean> {
    return this.#changed({ locks: { seqs: [seq] } }, 'rejectEvent', JSON.stringify(error), at, payload === undefined ? null : JSON.stringify(payload), seq);
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    await this.#changed({ locks: { jobs: [jobId] } }, 'quarantine', reason, at, jobId);
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('history', [jobId])).map(toTransitionRecord));
  }

  // Effects

  async getEffect(id: string): Promise<EffectRecord | undefined> {
    const row = await this.#d.get('getEffect', [id]);
    return row ? toEffectRecord(row) : undefined;
  }

  async listEffects(jobId: string): Promise<EffectRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('listEffects', [jobId])).map(toEffectRecord));
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('listAttempts', [jobId])).map(toAttemptRecord));
  }

  async dueEffects(now: number, limit: number, runner?: string, unclaimableBy?: readonly string[]): Promise<EffectRecord[]> {
    const read = dueRead(now, limit, runner, unclaimableBy);
    return (await this.#d.all(read.name, [read.params])).map(toEffectRecord);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    return (await this.#d.all('runningEffects', [limit])).map(toEffectRecord);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined> {
    try {
      return await this.#d.write((t) => t.run(claimIn({ id, runner, now, claimUntil, takeOver, fence })), { locks: { effects: [id] }, quiet: true });
    } catch (error) {
      if (error instanceof LeaseHeld) return undefined;
      throw error;
    }
  }

  async claimDueEffects(c: DueClaim): Promise<DueClaimResult> {
    if (this.#d.claimDue) return this.#d.claimDue(c);
    return this.#d.write((t) => t.claimDue(c), { ops: () => [{ kind: 'due-claims', runner: c.runner }] });
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number, now: number): Promise<boolean> {
    return this.#changed({ quiet: true }, 'renewClaim', { until: claimUntil, now, id, attempt, runner });
  }

  async releaseAttempt(id: string, attempt: number, runner: string, at: number): Promise<boolean> {
    return this.#d.write((t) => t.run(releaseAttemptIn(id, attempt, runner, at)), { locks: { effects: [id] } });
  }

  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus> {
    return this.#d.write((t) => t.run(finishIn({ id, attempt, result, at, lease })), { locks: { effects: [id] } });
  }

  async failEffect(id: string, attempt: number, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean> {
    return this.#d.write((t) => t.run(failEffectIn(id, attempt, error, event, at)), { locks: { effects: [id], jobs: [event.jobId] } });
  }

  async effectByToken(token: string): Promise<EffectRecord | undefined> {
    const row = await this.#d.get('effectByToken', [token]);
    return row ? toEffectRecord(row) : undefined;
  }

  async completeByToken(
    token: string,
    result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo },
    event: NewInboxEvent,
    at: number,
  ): Promise<boolean> {
    return this.#d.write((t) => t.run(completeByTokenIn(token, result, event, at)), { locks: { tokens: [token], jobs: [event.jobId] } });
  }

  // Timers

  async listTimers(jobId: string): Promise<TimerRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('listTimers', [jobId])).map(toTimerRecord));
  }

  async dueTimers(now: number, limit: number): Promise<TimerRecord[]> {
    return (await this.#d.all('dueTimers', [now, limit])).map(toTimerRecord);
  }

  async fireTimer(id: string, event: NewInboxEvent): Promise<boolean> {
    return this.#d.write((t) => t.run(fireTimerIn(id, event)), { locks: { timers: [id], jobs: [event.jobId] } });
  }

  /** Leases judged by the database's clock are given in the caller's `now` (as stored without one). */
  async nextWakeAt(now?: number): Promise<number | null> {
    const args = this.#d.dialect.callerLeaseClock ? [] : [{ now: now ?? null }];
    const times: number[] = [];
    for (const name of ['nextTimer', 'nextRetry', 'nextClaimExpiry', 'nextLeaseExpiry'] as const) {
      const t = (await this.#d.get(name, args))?.['t'];
      if (typeof t === 'number') times.push(t);
    }
    return times.length ? Math.min(...times) : null;
  }

  // Leases

  async renewLeases(runner: string, jobIds: readonly string[], until: number, now: number): Promise<Map<string, number>> {
    if (jobIds.length === 0) return new Map();
    const rows = await this.#d.write((t) => t.run(all('renewLeases', { runner, until, now, ids: JSON.stringify(jobIds) })), { quiet: true });
    return new Map(rows.map((r) => [r['id'] as string, r['lease_fence'] as number]));
  }

  async releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number> {
    if (jobIds !== 'all' && jobIds.length === 0) return 0;
    return this.#d.write((t) => t.run(releaseIn({ runner, jobIds })));
  }

  async leaseHolders(now: number): Promise<string[]> {
    return (await this.#d.all('leaseHolders', [{ now }])).map((r) => r['lease_owner'] as string);
  }

  async expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]> {
    // Called every worker round: look first, and write only when something expired.
    if ('expiredBy' in filter && (await this.#d.all('expireLeases', [{ now: filter.expiredBy }])).length === 0) return [];
    return this.#d.write((t) => t.run(expireLeasesIn(filter)));
  }

  // Cancellation, progress, notes, assets

  async requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }> {
    return this.#d.write((t) => t.run(requestCancelIn(jobId, reason, event, at)), { locks: { jobs: [jobId] } });
  }

  async setProgress(jobId: string, progress: number, _at: number, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#changed({ quiet: true }, 'setProgress', { progress, id: jobId, runner: lease?.runner ?? null, fence: lease?.fence ?? null });
  }

  async addNote(note: NoteRecord): Promise<void> {
    await this.#changed({ quiet: true }, 'addNote', note.jobId, note.kind, note.message, note.at);
  }

  async listNotes(jobId: string): Promise<NoteRecord[]> {
    return (await this.#d.all('listNotes', [jobId])).map((r) => ({ jobId: r['job_id'] as string, kind: r['kind'] as string, message: r['message'] as string, at: r['at'] as number }));
  }

  async attachAsset(asset: AssetRecord, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#d.write((t) => t.run(attachAssetIn(asset, lease)), { locks: { jobs: [asset.jobId] }, quiet: true });
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    return this.#jobDamage(jobId, (await this.#d.all('listAssets', [jobId])).map(toAssetRecord));
  }

  async purgeJob(jobId: string): Promise<boolean> {
    return this.#changed({ locks: { jobs: [jobId] } }, 'purge', jobId);
  }

  // Operations

  async suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean> {
    return this.#d.write((t) => t.run(notedIn(note, run('suspend', at, reason, jobId))), { locks: { jobs: [jobId] } });
  }

  async resumeJob(jobId: string, note: NoteRecord): Promise<boolean> {
    return this.#d.write((t) => t.run(notedIn(note, run('resume', jobId))), { locks: { jobs: [jobId] } });
  }

  async redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean> {
    return this.#d.write((t) => t.run(notedIn(note, run('redrive', maxAttempts, at, id))), { locks: { effects: [id] } });
  }

  async purgeFinished(filter: PurgeFilter): Promise<string[]> {
    const params = { before: filter.before, statuses: JSON.stringify(filter.statuses), all: filter.owner === undefined ? 1 : 0, owner: filter.owner ?? '', limit: filter.limit };
    const rows = await this.#d.write((t) => t.run(all('purgeFinished', params)));
    return rows.map((r) => r['id'] as string).sort(byteOrder);
  }

  async stats(filter: { owner?: string | null; now: number }): Promise<StoreStats> {
    const p = { all: filter.owner === undefined ? 1 : 0, owner: filter.owner ?? '', now: filter.now };
    const damaged: string[] = [];
    // One snapshot: every figure from the same state of the tables.
    const first = await this.#d.snapshot(statsIn(p, damaged));
    if (damaged.length === 0) return first;
    // A state value that does not parse: its jobs are quarantined (one job's problem), and the
    // figures are read again so that they count them so.
    const reason = damageReason('jobs', ['state_value']);
    for (const text of damaged) {
      for (const row of await this.#d.all('jobsWithState', [text])) await this.#quarantineDamaged(row['id'] as string, reason);
    }
    return this.#d.snapshot(statsIn(p, []));
  }

  // Schedules (schedules.ts)

  async putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
    return this.#d.write((t) => t.run(putScheduleIn(schedule, expectedRevision)));
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    const row = await this.#d.get('scheduleGet', [id]);
    return row ? toScheduleRecord(row) : undefined;
  }

  async listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]> {
    const rows = filter.owner === undefined ? await this.#d.all('scheduleListAll', []) : await this.#d.all('scheduleListOwner', [filter.owner ?? '']);
    return rows.map(toScheduleRecord);
  }

  async deleteSchedule(id: string, owner: string | null): Promise<boolean> {
    return this.#changed({}, 'scheduleDelete', id, owner ?? '');
  }

  async dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]> {
    return (await this.#d.all('scheduleDue', [{ owner: owner ?? '', now, limit }])).map(toScheduleRecord);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    const jobs = [fire.cancel?.jobId, fire.occurrence?.job?.id].filter((id): id is string => id !== undefined);
    try {
      return await this.#d.write((t) => t.run(fireScheduleIn(fire)), { locks: { jobs } });
    } catch (error) {
      if (error instanceof Refused) return error.result;
      throw error;
    }
  }

  async listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]> {
    return (await this.#d.all('occurrences', [scheduleId, limit])).map(toOccurrenceRecord);
  }

  /** Counted on the partial index `inbox_pending` (a covering scan of pending rows only). */
  async pendingBacklog(): Promise<number> {
    return (await this.#d.query("SELECT count(*) AS n FROM inbox WHERE status = 'pending'", []))[0]!['n'] as number;
  }

  async externalChanges(): Promise<number> {
    return this.#d.externalChanges();
  }

  async historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    return this.#d.historySince(after, limit, scan, filter);
  }

  async close(): Promise<void> {
    await this.#d.close();
  }

  /** A single-statement write: true when it changed one row. */
  async #changed(options: WriteOptions, name: StatementName, ...args: unknown[]): Promise<boolean> {
    return (await this.#d.write((t) => t.run(run(name, ...args)), options)).changes === 1;
  }

  /**
   * A damaged jobs row met by a read becomes the job's quarantine, recorded once (best effort: on a
   * read-only or failing file the record still says it). The reason names the table and column.
   */
  async #recordDamage<T extends { corruption?: string; id: string }>(jobs: T[]): Promise<T[]> {
    for (const job of jobs) if (job.corruption !== undefined) await this.#quarantineDamaged(job.id, job.corruption);
    return jobs;
  }

  async #quarantineDamaged(jobId: string, reason: string): Promise<void> {
    try {
      await this.#d.write((t) => t.run(run('quarantineDamaged', reason, jobId)), { locks: { jobs: [jobId] }, quiet: true });
    } catch {
      // Read-only, full or busy: the record returned says it; the next read that can write records it.
    }
  }

  /** Quarantine the jobs of records with a damaged JSON column (history, events, effects, timers, assets). */
  async #jobDamage<T extends { damaged?: string }>(jobId: string, records: T[]): Promise<T[]> {
    const damaged = records.find((r) => r.damaged !== undefined)?.damaged;
    if (damaged !== undefined) await this.#quarantineDamaged(jobId, damaged);
    return records;
  }
}

/** `releaseLeases` inside a transaction: how many leases it freed. */
function* releaseIn(r: { runner: string; jobIds: readonly string[] | 'all' }): Program<number> {
  const all = r.jobIds === 'all';
  return (yield* run('releaseLeases', { runner: r.runner, all: all ? 1 : 0, ids: all ? '[]' : JSON.stringify(r.jobIds) })).changes;
}

/** The rows a batch writes. */
function batchLocks(batch: WriteBatch): Locks {
  const { creates = [], commits = [], finishes = [], releases = [], claims = [] } = batch;
  return {
    jobs: [...creates.flatMap(jobsOfCreate), ...commits.flatMap(jobsOfCommit), ...releases.flatMap((r) => r.jobIds)],
    effects: [...finishes.map((f) => f.id), ...claims.map((c) => c.id)],
  };
}

// Every entry point: the driver's errors as Spool's typed storage faults, never a driver's error.
guardEntryPoints(SqlStore, (store, error, call) => SqlStore.faultOf(store, error, call));
