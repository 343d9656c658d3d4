import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type {
  AcceptResult,
  AssetRecord,
  AttemptRecord,
  AttemptResult,
  ClaimedEffect,
  DueClaim,
  DueClaimed,
  DueClaimResult,
  CommitResult,
  CreateJobResult,
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
  PurgeFilter,
  QueuedEvent,
  ScheduleFire,
  ScheduleFireResult,
  ScheduleRecord,
  StoreStats,
  TimerRecord,
  TransitionCommit,
  TransitionRecord,
  UnresolvedOperation,
  WriteBatch,
  WriteBatchResult,
} from '../../../src/ports/store.ts';
import { operationsOf } from '../../../src/ports/store.ts';
import { systemClock } from '../../../src/ports/clock.ts';
import { applyCommit, claimIn, commitOutcomeUnknown, createIn, findEvent, finishIn } from '../../sql/commit.ts';
import { failure, LeaseHeld } from '../../sql/outcomes.ts';
import { POSTGRES, POSTGRES_CALLER_LEASES } from '../../sql/predicates.ts';
import { run, runAsync, type Program } from '../../sql/program.ts';
import { toAssetRecord, toAttemptRecord, toEffectRecord, toInboxRecord, toJobRecord, withUncommitted, toTimerRecord, toTransitionRecord, type Row } from '../../sql/records.ts';
import { fireScheduleIn, putScheduleIn, Refused, toOccurrenceRecord, toScheduleRecord } from '../../sql/schedules.ts';
import { jobListSql, type StatementName } from '../../sql/statements.ts';
import { guardEntryPoints } from '../../sql/faults.ts';
import { statsIn } from '../../sql/stats.ts';
import { byteOrder } from '../../sql/values.ts';
import {
  acceptEventIn,
  activeVersionsIn,
  attachAssetIn,
  completeByTokenIn,
  expireLeasesIn,
  failEffectIn,
  fireTimerIn,
  notedIn,
  releaseAttemptIn,
  requestCancelIn,
} from '../../sql/writes.ts';
import { ChangeListener, notifySql, Notifier, wakesOthers } from './changes.ts';
import { claimDueStatement } from './claimDue.ts';
import { DeferredWrites } from './deferred.ts';
import { dueClaimCounts, dueClaimParams, dueRead } from '../../sql/dueClaims.ts';
import { readFeedPage } from './feed.ts';
import { isConnectionLost, isPgFault, isRetryable, pgFault, sqlState } from './faults.ts';
import { migrate } from './open.ts';
import { checkOptions, redact, type PostgresStoreOptions } from './options.ts';
import { bind, pgStatements, prepared, toPostgres, type PgStatement } from './sql.ts';
import { allOf, each, eachCommit, hasLocks, Isolate, jobsOfCommit, lockJobsSql, locksOfCreate, MAX_RUNS, RunAgain, savepoint, unlessLeaseHeld, type Locks, type Tx } from './transactions.ts';



/** Connection-level types: BIGINT (int8) and numeric as JS numbers (every stored number is a safe integer or a float). */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (text: string) => (text === null ? null : Number(text));
    return pg.types.getTypeParser(oid, format as 'text');
  }) as typeof pg.types.getTypeParser,
};

/**
 * The store on PostgreSQL (node-postgres): the SQLite store's statements and write rules
 * (persistence/sql: statements.ts in the POSTGRES dialect, commit.ts and writes.ts as programs),
 * run in READ COMMITTED transactions that first lock the rows of the jobs they write. Its own
 * numbered migrations (persistence/sql/migrations/postgres); see docs/ARCHITECTURE.md, "Postgres".
 *
 * @example
 * const store = await PostgresStore.open('postgres://spool@db.internal/spool');
 */
export class PostgresStore implements JobStore {
  readonly description: string;
  readonly schemaVersion: number;
  /** The pool; tests and tools may read it. */
  readonly pool: pg.Pool;
  /** This store's id in its NOTIFY payloads (its own notifications wake nobody here). */
  readonly #id = randomUUID();
  readonly #changes: ChangeListener;
  /**
   * This store's NOTIFY after its commits (changes.ts). A NOTIFY takes a transaction id, so its
   * transaction writes a commit record: committed without waiting for the WAL flush (a wake-up
   * lost to a server crash is covered by polling, and listeners re-scan when they reconnect), so
   * it costs the server no disk sync of its own.
   */
  readonly #notifier = new Notifier((wake) =>
    this.pool.query(`BEGIN; SET LOCAL synchronous_commit TO OFF; ${notifySql(this.#id, wake)}; COMMIT`),
  );
  readonly #statements: Record<StatementName, PgStatement>;
  /** `claimDueEffects`' one statement (claimDue.ts). */
  readonly #claimDue: PgStatement;
  readonly #lists = new Map<string, PgStatement>();
  #closed = false;

  private constructor(pool: pg.Pool, description: string, schemaVersion: number, listener: ChangeListener, leaseClock: 'database' | 'caller') {
    const dialect = leaseClock === 'caller' ? POSTGRES_CALLER_LEASES : POSTGRES;
    this.#statements = pgStatements(dialect);
    this.#claimDue = claimDueStatement(dialect);
    this.pool = pool;
    this.description = description;
    this.schemaVersion = schemaVersion;
    this.#changes = listener;
  }

  /**
   * Connect (a pool of `poolSize`), refuse another application's schema or a newer Spool's, and
   * apply the migrations this database lacks.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    checkOptions(url, options);
    const description = `postgres:${redact(url)}`;
    const lockTimeout = options.lockTimeoutMs ?? 5000;
    // Generic plans: each connection plans a statement once (its first run), not at every run. The
    // store's statements are its own, named, and found by key or by index order, so one plan
    // serves every value; the batch claim's custom plan cost more (1.5-6 ms) than running it.
    const settings = `-c lock_timeout=${lockTimeout} -c TimeZone=UTC -c plan_cache_mode=force_generic_plan`;
    const config: pg.PoolConfig = { connectionString: url, types: TYPES, options: settings };
    const pool = new pg.Pool({ ...config, max: options.poolSize ?? 10 });
    // An idle connection the server drops (a restart) is an error event on the pool: the pool discards it.
    pool.on('error', () => undefined);
    // One the server drops while checked out (between a transaction's statements) is an error event
    // on that client, which the pool does not listen to then: without a listener it would end the
    // process. The transaction learns of it from its next statement (isConnectionLost).
    pool.on('connect', (client) => client.on('error', () => undefined));
    try {
      const client = await pool.connect();
      let version: number;
      try {
        version = await migrate(client, description, (options.clock ?? systemClock).now());
      } finally {
        client.release();
      }
      return new PostgresStore(pool, description, version, new ChangeListener({ connectionString: url, types: TYPES }, ''), options.leaseClock ?? 'database');
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw pgFault(error, description, 'open');
    }
  }

  // Jobs, events, history

  async createJob(job: NewJob): Promise<CreateJobResult> {
    return this.#write(locksOfCreate(job), (t) => t.run(createIn(job)));
  }

  async writeBatch(batch: WriteBatch): Promise<WriteBatchResult> {
    const { creates = [], commits = [], finishes = [], claims = [] } = batch;
    const locks: Locks = {
      jobs: [...creates.flatMap((j) => locksOfCreate(j).jobs ?? []), ...commits.flatMap(jobsOfCommit)],
      effects: [...finishes.map((f) => f.id), ...claims.map((c) => c.id)],
    };
    return this.#write(
      locks,
      async (t) => ({
        creates: await each(creates, (job) => savepoint(t, () => t.run(createIn(job)))),
        commits: await eachCommit(commits, (c) => savepoint(t, () => t.run(applyCommit(c)))),
        finishes: await each(finishes, (f) => savepoint(t, () => t.run(finishIn(f)))),
        claims: await each(claims, (c) => unlessLeaseHeld(savepoint(t, () => t.run(claimIn(c))))),
      }),
      () => operationsOf(batch),
      wakesOthers(batch),
    );
  }

  async commit(commits: readonly TransitionCommit[]): Promise<CommitResult[]> {
    const locks = { jobs: commits.flatMap(jobsOfCommit) };
    const ops = () => operationsOf({ commits });
    const wake = wakesOthers({ commits });
    if (commits.length === 1) {
      // One commit: no savepoint; a refused one rolls the whole transaction back.
      try {
        return [await this.#write(locks, (t) => t.run(applyCommit(commits[0]!)), ops, wake)];
      } catch (error) {
        return [failure(error, isPgFault)];
      }
    }
    return this.#write(locks, (t) => eachCommit(commits, (c) => savepoint(t, () => t.run(applyCommit(c)))), ops, wake);
  }

  async getJob(id: string, known?: JobRecord): Promise<JobRecord | undefined> {
    if (known?.id === id) {
      // What moves without a commit (records.ts, withUncommitted): the snapshot and context are not sent again.
      const stmt = this.#statements.uncommittedOf;
      const r = await this.pool.query<unknown[]>({ ...prepared(stmt, bind(stmt, [id])), rowMode: 'array' });
      const current = withUncommitted(known, r.rows[0]);
      if (current) return current;
    }
    const row = await this.#get('getJob', id);
    return row ? toJobRecord(row) : undefined;
  }

  async findByIdempotencyKey(owner: string | null, key: string): Promise<JobRecord | undefined> {
    const row = await this.#get('byKey', owner ?? '', key);
    return row ? toJobRecord(row) : undefined;
  }

  async listJobs(filter: JobFilter): Promise<JobRecord[]> {
    const { sql, params } = jobListSql(filter, POSTGRES);
    let stmt = this.#lists.get(sql);
    if (!stmt) {
      stmt = toPostgres(sql, `list${this.#lists.size}`);
      this.#lists.set(sql, stmt);
    }
    return (await this.#query(stmt, params)).rows.map(toJobRecord);
  }

  async orphanedChildren(limit: number): Promise<string[]> {
    return (await this.#all('orphanedChildren', limit)).map((r) => r['id'] as string);
  }

  async activeMachineVersions(owner: string | null, countUpTo: number): Promise<{ machineId: string; machineVersion: string; jobs: number }[]> {
    return this.#read(activeVersionsIn(owner, countUpTo));
  }

  async acceptEvent(event: NewInboxEvent): Promise<AcceptResult> {
    return this.#write({ jobs: [event.jobId] }, (t) => t.run(acceptEventIn(event)));
  }

  async getEvent(jobId: string, eventId: string): Promise<InboxRecord | undefined> {
    const row = await this.#read(findEvent(jobId, eventId));
    return row ? toInboxRecord(row) : undefined;
  }

  async listEvents(jobId: string): Promise<InboxRecord[]> {
    return (await this.#all('listEvents', jobId)).map(toInboxRecord);
  }

  async pendingEvents(jobId: string, limit: number): Promise<QueuedEvent[]> {
    return (await this.#all('pending', jobId, limit)).map((r) => toInboxRecord(r) as QueuedEvent);
  }

  async jobsWithPendingEvents(limit: number, lease?: { runner: string; now: number }): Promise<string[]> {
    const rows = await this.#all('pendingJobs', { limit, runner: lease?.runner ?? null, now: lease?.now ?? 0 });
    return rows.map((r) => r['job_id'] as string);
  }

  async commitLanded(jobId: string, revision: number, eventId: string | null): Promise<boolean> {
    return (await this.#get('landed', { job: jobId, revision, event: eventId })) !== undefined;
  }

  async rejectEvent(seq: number, error: ErrorInfo, at: number, payload?: JsonValue): Promise<boolean> {
    return this.#changed({ seqs: [seq] }, 'rejectEvent', JSON.stringify(error), at, payload === undefined ? null : JSON.stringify(payload), seq);
  }

  async setQuarantine(jobId: string, reason: string | null, at: number): Promise<void> {
    await this.#changed({ jobs: [jobId] }, 'quarantine', reason, at, jobId);
  }

  async history(jobId: string): Promise<TransitionRecord[]> {
    return (await this.#all('history', jobId)).map(toTransitionRecord);
  }

  // Effects

  async getEffect(id: string): Promise<EffectRecord | undefined> {
    const row = await this.#get('getEffect', id);
    return row ? toEffectRecord(row) : undefined;
  }

  async listEffects(jobId: string): Promise<EffectRecord[]> {
    return (await this.#all('listEffects', jobId)).map(toEffectRecord);
  }

  async listAttempts(jobId: string): Promise<AttemptRecord[]> {
    return (await this.#all('listAttempts', jobId)).map(toAttemptRecord);
  }

  async dueEffects(now: number, limit: number, runner?: string, unclaimableBy?: readonly string[]): Promise<EffectRecord[]> {
    const read = dueRead(now, limit, runner, unclaimableBy);
    return (await this.#all(read.name, read.params)).map(toEffectRecord);
  }

  async runningEffects(limit: number): Promise<EffectRecord[]> {
    return (await this.#all('runningEffects', limit)).map(toEffectRecord);
  }

  async claimEffect(id: string, runner: string, now: number, claimUntil: number, takeOver?: string, fence?: number | null): Promise<ClaimedEffect | undefined> {
    try {
      return await this.#quiet({ effects: [id] }, (t) => t.run(claimIn({ id, runner, now, claimUntil, takeOver, fence })));
    } catch (error) {
      if (error instanceof LeaseHeld) return undefined;
      throw error;
    }
  }

  /** One statement (claimDue.ts), on its own: atomic without a transaction around it. */
  async claimDueEffects(c: DueClaim): Promise<DueClaimResult> {
    // A lease taken afresh (free or expired): LEASE_SET's other parameters name no fence, no take-over, no force.
    let rows: Row[];
    try {
      rows = (await this.#query(this.#claimDue, [{ ...dueClaimParams(c), held: null, any_fence: 0, take_over: null, force: 0 }])).rows;
    } catch (error) {
      // The statement commits itself: a connection lost on the way leaves it unknown.
      if (isConnectionLost(error)) throw commitOutcomeUnknown(this.description, error, [{ kind: 'due-claims', runner: c.runner }]);
      throw error;
    }
    const claimed: DueClaimed[] = [];
    const held: EffectRecord[] = [];
    for (const row of rows) {
      if (row['kind'] === 'claim') {
        claimed.push({ ...toEffectRecord(row), leaseFence: row['lease_fence'] as number, machineId: row['machine_id'] as string, machineVersion: row['machine_version'] as string });
      } else if (row['kind'] === 'held') held.push(toEffectRecord(row));
    }
    return { claimed, held, ...dueClaimCounts(rows[0], claimed.length) };
  }

  async renewClaim(id: string, attempt: number, runner: string, claimUntil: number, now: number): Promise<boolean> {
    return this.#quietly({}, 'renewClaim', { until: claimUntil, now, id, attempt, runner });
  }

  async releaseAttempt(id: string, attempt: number, runner: string, at: number): Promise<boolean> {
    return this.#write({ effects: [id] }, (t) => t.run(releaseAttemptIn(id, attempt, runner, at)));
  }

  async finishAttempt(id: string, attempt: number, result: AttemptResult, at: number, lease?: { runner: string; fence: number }): Promise<FinishStatus> {
    return this.#write({ effects: [id] }, (t) => t.run(finishIn({ id, attempt, result, at, lease })));
  }

  async failEffect(id: string, attempt: number, error: ErrorInfo, event: NewInboxEvent, at: number): Promise<boolean> {
    return this.#write({ effects: [id], jobs: [event.jobId] }, (t) => t.run(failEffectIn(id, attempt, error, event, at)));
  }

  async effectByToken(token: string): Promise<EffectRecord | undefined> {
    const row = await this.#get('effectByToken', token);
    return row ? toEffectRecord(row) : undefined;
  }

  async completeByToken(
    token: string,
    result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo },
    event: NewInboxEvent,
    at: number,
  ): Promise<boolean> {
    return this.#write({ tokens: [token], jobs: [event.jobId] }, (t) => t.run(completeByTokenIn(token, result, event, at)));
  }

  // Timers

  async listTimers(jobId: string): Promise<TimerRecord[]> {
    return (await this.#all('listTimers', jobId)).map(toTimerRecord);
  }

  async dueTimers(now: number, limit: number): Promise<TimerRecord[]> {
    return (await this.#all('dueTimers', now, limit)).map(toTimerRecord);
  }

  async fireTimer(id: string, event: NewInboxEvent): Promise<boolean> {
    return this.#write({ timers: [id], jobs: [event.jobId] }, (t) => t.run(fireTimerIn(id, event)));
  }

  async nextWakeAt(now?: number): Promise<number | null> {
    const times: number[] = [];
    for (const name of ['nextTimer', 'nextRetry', 'nextClaimExpiry', 'nextLeaseExpiry'] as const) {
      const t = (await this.#get(name, { now: now ?? null }))?.['t'];
      if (typeof t === 'number') times.push(t);
    }
    return times.length ? Math.min(...times) : null;
  }

  // Leases

  async renewLeases(runner: string, jobIds: readonly string[], until: number, now: number): Promise<Map<string, number>> {
    if (jobIds.length === 0) return new Map();
    const rows = await this.#quiet({}, (t) => t.run(allOf('renewLeases', { runner, until, now, ids: JSON.stringify(jobIds) })));
    return new Map(rows.map((r) => [r['id'] as string, r['lease_fence'] as number]));
  }

  async releaseLeases(runner: string, jobIds: readonly string[] | 'all'): Promise<number> {
    if (jobIds !== 'all' && jobIds.length === 0) return 0;
    const params = { runner, all: jobIds === 'all' ? 1 : 0, ids: jobIds === 'all' ? '[]' : JSON.stringify(jobIds) };
    return this.#write({}, async (t) => (await t.run(run('releaseLeases', params))).changes);
  }

  async leaseHolders(now: number): Promise<string[]> {
    return (await this.#all('leaseHolders', { now })).map((r) => r['lease_owner'] as string);
  }

  async expireLeases(filter: { owner: string } | { expiredBy: number }): Promise<{ jobId: string; owner: string; fence: number }[]> {
    // Called every worker round: look first, and write only when something expired.
    if ('expiredBy' in filter && (await this.#all('expireLeases', { now: filter.expiredBy })).length === 0) return [];
    return this.#write({}, (t) => t.run(expireLeasesIn(filter)));
  }

  // Cancellation, progress, notes, assets

  async requestCancel(jobId: string, reason: string, event: NewInboxEvent, at: number): Promise<{ first: boolean }> {
    return this.#write({ jobs: [jobId] }, (t) => t.run(requestCancelIn(jobId, reason, event, at)));
  }

  async setProgress(jobId: string, progress: number, _at: number, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#quietly({}, 'setProgress', { progress, id: jobId, runner: lease?.runner ?? null, fence: lease?.fence ?? null });
  }

  async addNote(note: NoteRecord): Promise<void> {
    await this.#quietly({}, 'addNote', note.jobId, note.kind, note.message, note.at);
  }

  async listNotes(jobId: string): Promise<NoteRecord[]> {
    return (await this.#all('listNotes', jobId)).map((r) => ({ jobId: r['job_id'] as string, kind: r['kind'] as string, message: r['message'] as string, at: r['at'] as number }));
  }

  async attachAsset(asset: AssetRecord, lease?: { runner: string; fence: number }): Promise<boolean> {
    return this.#quiet({ jobs: [asset.jobId] }, (t) => t.run(attachAssetIn(asset, lease)));
  }

  async listAssets(jobId: string): Promise<AssetRecord[]> {
    return (await this.#all('listAssets', jobId)).map(toAssetRecord);
  }

  async purgeJob(jobId: string): Promise<boolean> {
    return this.#changed({ jobs: [jobId] }, 'purge', jobId);
  }

  // Operations

  async suspendJob(jobId: string, reason: string, at: number, note: NoteRecord): Promise<boolean> {
    return this.#write({ jobs: [jobId] }, (t) => t.run(notedIn(note, run('suspend', at, reason, jobId))));
  }

  async resumeJob(jobId: string, note: NoteRecord): Promise<boolean> {
    return this.#write({ jobs: [jobId] }, (t) => t.run(notedIn(note, run('resume', jobId))));
  }

  async redriveEffect(id: string, maxAttempts: number, at: number, note: NoteRecord): Promise<boolean> {
    return this.#write({ effects: [id] }, (t) => t.run(notedIn(note, run('redrive', maxAttempts, at, id))));
  }

  async purgeFinished(filter: PurgeFilter): Promise<string[]> {
    const params = { before: filter.before, statuses: JSON.stringify(filter.statuses), all: filter.owner === undefined ? 1 : 0, owner: filter.owner ?? '', limit: filter.limit };
    const rows = await this.#write({}, (t) => t.run(allOf('purgeFinished', params)));
    return rows.map((r) => r['id'] as string).sort(byteOrder);
  }

  async stats(filter: { owner?: string | null; now: number }): Promise<StoreStats> {
    const p = { all: filter.owner === undefined ? 1 : 0, owner: filter.owner ?? '', now: filter.now };
    // One snapshot: every figure from the same state of the tables.
    return this.#transaction('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', undefined, (t) => t.run(statsIn(p, [])), false);
  }

  // Schedules

  async putSchedule(schedule: NewSchedule, expectedRevision: number | null): Promise<{ ok: true; schedule: ScheduleRecord } | { ok: false; current: ScheduleRecord | null }> {
    return this.#write({}, (t) => t.run(putScheduleIn(schedule, expectedRevision)));
  }

  async getSchedule(id: string): Promise<ScheduleRecord | undefined> {
    const row = await this.#get('scheduleGet', id);
    return row ? toScheduleRecord(row) : undefined;
  }

  async listSchedules(filter: { owner?: string | null }): Promise<ScheduleRecord[]> {
    const rows = filter.owner === undefined ? await this.#all('scheduleListAll') : await this.#all('scheduleListOwner', filter.owner ?? '');
    return rows.map(toScheduleRecord);
  }

  async deleteSchedule(id: string, owner: string | null): Promise<boolean> {
    return this.#changed({}, 'scheduleDelete', id, owner ?? '');
  }

  async dueSchedules(owner: string | null, now: number, limit: number): Promise<ScheduleRecord[]> {
    return (await this.#all('scheduleDue', { owner: owner ?? '', now, limit })).map(toScheduleRecord);
  }

  async fireSchedule(fire: ScheduleFire): Promise<ScheduleFireResult> {
    const jobs = [fire.cancel?.jobId, fire.occurrence?.job?.id].filter((id): id is string => id !== undefined);
    try {
      return await this.#write({ jobs }, (t) => t.run(fireScheduleIn(fire)));
    } catch (error) {
      if (error instanceof Refused) return error.result;
      throw error;
    }
  }

  async listOccurrences(scheduleId: string, limit: number): Promise<OccurrenceRecord[]> {
    return (await this.#all('occurrences', scheduleId, limit)).map(toOccurrenceRecord);
  }

  async pendingBacklog(): Promise<number> {
    const r = await this.#query({ key: 'backlog', text: "SELECT count(*) AS n FROM inbox WHERE status = 'pending'", names: null }, []);
    return r.rows[0]!['n'] as number;
  }

  /** Every job's history in the order the feed gives it (feed.ts: positions numbered by the reader, never out of commit order). */
  async historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    return readFeedPage(this.pool, after, limit, scan, filter);
  }

  /** Commits of other stores seen through LISTEN/NOTIFY (see changes.ts); the first call starts listening. */
  async externalChanges(): Promise<number> {
    await this.#changes.start('all');
    return this.#changes.changes;
  }

  /** Call `onChange` when another process commits to this database (LISTEN/NOTIFY), or (`'work'`) commits work for workers; returns the unsubscribe. */
  watchChanges(onChange: () => void, what: 'work' | 'all' = 'all'): () => void {
    return this.#changes.watch(onChange, what);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#changes.close();
    await this.#notifier.flush();
    await this.pool.end();
  }

  // The transaction machinery

  /**
   * A write in one transaction that first locks the rows of the jobs it touches (see {@link lockJobsSql}); `ops`: a commit's operations, for an unknown outcome;
   * `wake`: whether it leaves work other processes' workers should wake for (changes.ts).
   */
  #write<T>(locks: Locks, fn: (t: Tx) => Promise<T>, ops?: () => UnresolvedOperation[], wake = true): Promise<T> {
    return this.#transaction('BEGIN', locks, fn, wake ? 'wake' : 'changed', ops);
  }

  /** A write that leaves no work for another process: its notification wakes no worker (changes.ts). */
  #quiet<T>(locks: Locks, fn: (t: Tx) => Promise<T>): Promise<T> {
    return this.#transaction('BEGIN', locks, fn, 'changed');
  }

  async #transaction<T>(begin: string, locks: Locks | undefined, fn: (t: Tx) => Promise<T>, notify: 'wake' | 'changed' | false, ops?: () => UnresolvedOperation[]): Promise<T> {
    let isolated = false;
    let keyRetried = false;
    for (let runs = 1; ; runs++) {
      const client = await this.pool.connect();
      let broken: unknown;
      let committing = false;
      try {
        // Statements without parameters wait and go with the next one (a simple query): BEGIN, the
        // row locks (and, in an isolated run, the first savepoint) are one round trip, COMMIT another.
        const queued: string[] = [begin];
        if (locks && hasLocks(locks)) queued.push(lockJobsSql(client, locks));
        const flush = async () => {
          if (queued.length === 0) return;
          const text = queued.join('; ');
          queued.length = 0;
          await client.query(text);
        };
        const t: Tx = {
          run: async (program) => {
            await flush();
            const writes = new DeferredWrites(client, this.#statements);
            const result = await runAsync(program, (call) => writes.call(call));
            await writes.flush();
            return result;
          },
          sql: (text) => void queued.push(text),
          runs,
          isolated,
          keyRetried,
        };
        const result = await fn(t);
        queued.push('COMMIT');
        committing = true;
        await flush();
        // After the commit, on its own: see changes.ts (a NOTIFY in the transaction would serialise commits' WAL flushes).
        if (notify) this.#notifier.committed(notify === 'wake');
        return result;
      } catch (error) {
        if (isConnectionLost(error)) broken = error;
        else await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
        const cause = error instanceof RunAgain ? error.cause : error;
        if (committing && broken !== undefined && ops) throw commitOutcomeUnknown(this.description, cause, ops());
        // A key another transaction took meanwhile (a concurrent create): once more, where the write
        // finds it. A batch write refused on a run without savepoints: once more, isolated (Isolate).
        const raced = error instanceof RunAgain || (sqlState(error) === '23505' && runs === 1);
        if (error instanceof Isolate) isolated = true;
        if (raced && sqlState(cause) === '23505') keyRetried = true;
        if ((raced || isRetryable(error)) && runs < MAX_RUNS && broken === undefined) continue;
        throw cause;
      } finally {
        client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
      }
    }
  }

  /** A single-statement write: true when it changed one row. */
  async #changed(locks: Locks, name: StatementName, ...args: unknown[]): Promise<boolean> {
    return this.#write(locks, async (t) => (await t.run(run(name, ...args))).changes === 1);
  }

  /** {@link #changed}, for a write that leaves no work for another process (no NOTIFY). */
  async #quietly(locks: Locks, name: StatementName, ...args: unknown[]): Promise<boolean> {
    return this.#quiet(locks, async (t) => (await t.run(run(name, ...args))).changes === 1);
  }

  /** A read program outside a transaction (each statement sees the latest commits). */
  #read<R>(program: Program<R>): Promise<R> {
    return runAsync(program, async (call) => {
      const rows = (await this.#query(this.#statements[call.name], call.args)).rows;
      return call.method === 'get' ? rows[0] : rows;
    });
  }

  async #get(name: StatementName, ...args: unknown[]): Promise<Row | undefined> {
    return (await this.#query(this.#statements[name], args)).rows[0];
  }

  async #all(name: StatementName, ...args: unknown[]): Promise<Row[]> {
    return (await this.#query(this.#statements[name], args)).rows;
  }

  #query(stmt: PgStatement, args: readonly unknown[]): Promise<pg.QueryResult<Row>> {
    return this.pool.query<Row>(prepared(stmt, bind(stmt, args)));
  }
}


// Every entry point: driver errors as Spool's typed storage faults (faults.ts).
guardEntryPoints(PostgresStore, (store) => store.description, pgFault);
