/**
 * The node-postgres driver (persistence/sql/driver.ts): a pool; each write a READ COMMITTED
 * transaction that first locks the rows of the jobs it writes (transactions.ts), run again on a
 * key taken meanwhile, a deadlock or a serialization failure; its writes whose results nobody
 * reads sent with the next statement (deferred.ts); a NOTIFY after each commit (changes.ts).
 */
import type pg from 'pg';
import type { DueClaim, DueClaimResult, FeedPage, HistoryFeedFilter, UnresolvedOperation } from '../../../src/ports/store.ts';
import { commitOutcomeUnknown } from '../../sql/commit.ts';
import { jobsOfCommit, type Locks, type SqlDriver, type WriteOptions, type WriteTx } from '../../sql/driver.ts';
import type { SqlDialect } from '../../sql/predicates.ts';
import { runAsync, type Program } from '../../sql/program.ts';
import type { Row } from '../../sql/records.ts';
import type { StatementName } from '../../sql/statements.ts';
import { ChangeListener, notifySql, Notifier, wakesOthers } from './changes.ts';
import { claimDueArgs, claimDueStatement, dueClaimResult } from './claimDue.ts';
import { DeferredWrites, firstFailure, sendAhead, type Ahead } from './deferred.ts';
import { readFeedPage } from './feed.ts';
import { isConnectionLost, isPgFault, isRetryable, pgFault, sqlState } from './faults.ts';
import { bind, pgStatements, prepared, toPostgres, type PgStatement } from './sql.ts';
import { disjointJobs, each, eachCommit, hasLocks, Isolate, lockJobsSql, MAX_RUNS, RunAgain, runLanes, savepoint, unlessLeaseHeld, type Tx } from './transactions.ts';

export class PgDriver implements SqlDriver {
  readonly isFault = isPgFault;
  readonly #pool: pg.Pool;
  readonly changes: ChangeListener;
  /**
   * This store's NOTIFY after its commits (changes.ts). A NOTIFY takes a transaction id, so its
   * transaction writes a commit record: committed without waiting for the WAL flush (a wake-up
   * lost to a server crash is covered by polling, and listeners re-scan when they reconnect), so
   * it costs the server no disk sync of its own.
   */
  readonly #notifier: Notifier;
  readonly #statements: Record<StatementName, PgStatement>;
  /** `claimDueEffects`' one statement for a limit (claimDue.ts). */
  readonly #claimDue: (limit: number) => PgStatement;
  readonly #byText = new Map<string, PgStatement>();
  #closed = false;

  constructor(pool: pg.Pool, readonly description: string, readonly schemaVersion: number, listener: ChangeListener, readonly dialect: SqlDialect) {
    this.#pool = pool;
    this.changes = listener;
    this.#statements = pgStatements(dialect);
    this.#claimDue = (limit) => claimDueStatement(dialect, limit);
    this.#notifier = new Notifier((wake) => pool.query(`BEGIN; SET LOCAL synchronous_commit TO OFF; ${notifySql(listener.self, wake)}; COMMIT`));
  }

  fault(error: unknown, call: string): unknown {
    return pgFault(error, this.description, call);
  }

  async get(name: StatementName, args: unknown[]): Promise<Row | undefined> {
    return (await this.#query(this.#statements[name], args)).rows[0];
  }

  async all(name: StatementName, args: unknown[]): Promise<Row[]> {
    return (await this.#query(this.#statements[name], args)).rows;
  }

  async values(name: StatementName, args: unknown[]): Promise<unknown[] | undefined> {
    const stmt = this.#statements[name];
    return (await this.#pool.query<unknown[]>({ ...prepared(stmt, bind(stmt, args)), rowMode: 'array' })).rows[0];
  }

  job(id: string): Promise<Row | undefined> {
    return this.get('getJob', [id]);
  }

  async query(sql: string, params: readonly unknown[]): Promise<Row[]> {
    let stmt = this.#byText.get(sql);
    if (!stmt) {
      stmt = toPostgres(sql, `text${this.#byText.size}`);
      this.#byText.set(sql, stmt);
    }
    return (await this.#query(stmt, params)).rows;
  }

  /** Each statement outside a transaction (each sees the latest commits). */
  read<R>(program: Program<R>): Promise<R> {
    return runAsync(program, async (call) => {
      const rows = (await this.#query(this.#statements[call.name], call.args)).rows;
      return call.method === 'get' ? rows[0] : rows;
    });
  }

  /** One snapshot: every statement sees the same state of the tables. */
  snapshot<R>(program: Program<R>): Promise<R> {
    return this.#transaction('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', undefined, (t) => t.run(program), false);
  }

  write<T>(fn: (t: WriteTx) => T | Promise<T>, options: WriteOptions = {}): Promise<T> {
    const locks = typeof options.locks === 'function' ? options.locks() : (options.locks ?? {});
    const notify = options.quiet ? 'changed' : options.batch && !wakesOthers(options.batch) ? 'changed' : 'wake';
    return this.#transaction('BEGIN', locks, async (t) => fn(writeTx(t, this.#claimDue)), notify, options.ops);
  }

  /** One statement (claimDue.ts), on its own: atomic without a transaction around it. */
  async claimDue(c: DueClaim): Promise<DueClaimResult> {
    try {
      return dueClaimResult((await this.#query(this.#claimDue(c.limit), claimDueArgs(c))).rows);
    } catch (error) {
      // The statement commits itself: a connection lost on the way leaves it unknown.
      if (isConnectionLost(error)) throw commitOutcomeUnknown(this.description, error, [{ kind: 'due-claims', runner: c.runner }]);
      throw error;
    }
  }

  /** Every job's history in the order the feed gives it (feed.ts: positions numbered by the reader, never out of commit order). */
  historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): Promise<FeedPage> {
    return readFeedPage(this.#pool, after, limit, scan, filter);
  }

  /** Commits of other stores seen through LISTEN/NOTIFY (see changes.ts); the first call starts listening. */
  async externalChanges(): Promise<number> {
    await this.changes.start('all');
    return this.changes.changes;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.changes.close();
    await this.#notifier.flush();
    await this.#pool.end();
  }

  /**
   * A transaction (`begin`) that first locks the rows of `locks` (see {@link lockJobsSql}); run again
   * on a race; `notify`: what its commit tells other processes (changes.ts); `ops`: a commit's
   * operations, for an unknown outcome.
   */
  async #transaction<T>(begin: string, locks: Locks | undefined, fn: (t: Tx) => Promise<T>, notify: 'wake' | 'changed' | false, ops?: () => UnresolvedOperation[]): Promise<T> {
    let isolated = false;
    let keyRetried = false;
    // Statements may be sent ahead of their answers (deferred.ts, "Sent ahead") until a run finds
    // one did not answer as expected: the runs after it wait for each answer.
    let sendsAhead = true;
    for (let runs = 1; ; runs++) {
      const client = await this.#pool.connect();
      let broken: unknown;
      let committing = false;
      const ahead: Ahead | null = sendsAhead && !isolated ? { sent: [], expected: 0 } : null;
      try {
        // Statements without parameters wait and go with the next one (a simple query): BEGIN, the
        // row locks (and, in an isolated run, the first savepoint) are one round trip, COMMIT another.
        const queued: string[] = [begin];
        if (locks && hasLocks(locks)) queued.push(lockJobsSql(client, locks));
        // The programs' result-less writes (deferred.ts). In a run that is not isolated they wait
        // across programs, and what waits at the end goes in front of COMMIT, in its simple query.
        const writes = new DeferredWrites(client, this.#statements, ahead);
        const flush = async (withWrites = false) => {
          const carried = writes.waiting;
          if (queued.length === 0 && !(withWrites && carried)) return;
          const text = queued.join('; ');
          queued.length = 0;
          try {
            const inlined = carried && text ? writes.inlined() : undefined;
            if (inlined === undefined) await writes.flush();
            if (text) await client.query(inlined === undefined ? text : `${inlined}; ${text}`);
          } catch (error) {
            // A write of a program already returned failed: which one, a run with savepoints tells.
            if (carried && !isPgFault(error)) throw new Isolate(error);
            throw error;
          }
        };
        /**
         * `work` sent right behind what is queued (BEGIN and the row locks), without waiting for
         * their answer (pipeline mode: one round trip). Should they fail, the transaction is
         * aborted and work's statements with it, and theirs is the error told.
         */
        const afterOpening = async <T>(work: () => Promise<T>): Promise<T> => {
          const opening = queued.length > 0 ? client.query(queued.splice(0).join('; ')) : undefined;
          if (opening && ahead) {
            // Its answer too is read when the transaction ends (first: its failure is the one told).
            sendAhead(ahead, opening);
            return work();
          }
          const [opened, done] = await Promise.allSettled([opening, work()]);
          if (opened.status === 'rejected') throw opened.reason;
          if (done.status === 'rejected') throw done.reason;
          return done.value;
        };
        const t: Tx = {
          run: async (program) => {
            const run = async () => {
              let result;
              try {
                result = await runAsync(program, (call) => writes.call(call), true);
              } catch (error) {
                writes.drop(); // the program's own writes go with its refusal (and a run not isolated runs again)
                throw error;
              }
              if (isolated) await writes.flush();
              return result;
            };
            // In an isolated run the savepoint goes first, and carried writes with what is queued.
            if (isolated || writes.waiting) {
              await flush();
              return run();
            }
            return afterOpening(run);
          },
          lanes: async (programs) => {
            // Writes carried from programs before go first, on their own.
            if (writes.waiting) await flush(true);
            return afterOpening(() => runLanes(client, this.#statements, programs, ahead));
          },
          sql: (text) => void queued.push(text),
          query: async (stmt, args) => {
            await flush(true);
            return (await client.query<Row>(prepared(stmt, bind(stmt, args)))).rows;
          },
          runs,
          isolated,
          keyRetried,
        };
        const result = await fn(t);
        queued.push('COMMIT');
        committing = true;
        await flush();
        // What was sent ahead answered before COMMIT did; had any of it failed, COMMIT only ended the
        // aborted transaction (a simple query's COMMIT then answers ROLLBACK, not an error).
        if (ahead) {
          const failed = await firstFailure(ahead);
          if (failed !== undefined) throw failed;
        }
        // After the commit, on its own: see changes.ts (a NOTIFY in the transaction would serialise commits' WAL flushes).
        if (notify) this.#notifier.committed(notify === 'wake');
        return result;
      } catch (caught) {
        // A statement sent ahead that failed is the cause of whatever failed after it.
        const early = ahead ? await firstFailure(ahead) : undefined;
        const error = early ?? caught;
        if (isConnectionLost(error)) broken = error;
        else await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
        // A run that went on from expected answers and failed (a check found the job not as
        // expected, or a statement failed where the program would have seen it): once more,
        // waiting for each answer, where the program meets what happened in its place.
        if (ahead && ahead.expected > 0 && broken === undefined && !isPgFault(error) && runs < MAX_RUNS) {
          sendsAhead = false;
          if (error instanceof Isolate) isolated = true; // a write refused in COMMIT's query: the next run is isolated anyway
          continue;
        }
        const cause = error instanceof RunAgain ? error.cause : error;
        if (committing && broken !== undefined && ops) throw commitOutcomeUnknown(this.description, cause, ops());
        // A key another transaction took meanwhile (a concurrent create): once more, where the write
        // finds it. A batch write refused on a run without savepoints: once more, isolated (Isolate).
        const raced = error instanceof RunAgain || (sqlState(error) === '23505' && runs === 1);
        if (error instanceof Isolate) isolated = true;
        if (raced && sqlState(cause) === '23505') keyRetried = true;
        if ((raced || isRetryable(error)) && runs < MAX_RUNS && broken === undefined) continue;
        // A run to repeat (a write refused without savepoints, a key raced) whose connection broke
        // meanwhile: nothing committed, and the fault is what the caller is told (a refusal seen
        // in a run that could not finish is no write's answer).
        if (error instanceof RunAgain && broken !== undefined) throw broken;
        throw cause;
      } finally {
        client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
      }
    }
  }

  #query(stmt: PgStatement, args: readonly unknown[]): Promise<pg.QueryResult<Row>> {
    return this.#pool.query<Row>(prepared(stmt, bind(stmt, args)));
  }
}

/** The store's write transaction (persistence/sql/driver.ts) over one run of {@link PgDriver}'s. */
function writeTx(t: Tx, claimDue: (limit: number) => PgStatement): WriteTx {
  return {
    run: (program) => t.run(program),
    each: async (items, write, leaseHeld, jobsOf) => {
      if (!leaseHeld && jobsOf && lanesFor(t, items.map(jobsOf))) return (await inLanes(t, items.map(write))).map((result) => ({ ok: true as const, result }));
      return each(items, (item) => {
        const written = savepoint(t, () => t.run(write(item)));
        return leaseHeld ? unlessLeaseHeld(written) : written;
      });
    },
    eachCommit: async (commits, write) =>
      lanesFor(t, commits.map(jobsOfCommit)) ? inLanes(t, commits.map(write)) : eachCommit(commits, (c) => savepoint(t, () => t.run(write(c)))),
    claimDue: async (c) => dueClaimResult(await t.query(claimDue(c.limit), claimDueArgs(c))),
  };
}

/** Whether writes touching these jobs (each write's) go on lanes: two or more sharing no job, in a run without savepoints. */
function lanesFor(t: Tx, jobs: readonly (readonly string[])[]): boolean {
  return !t.isolated && jobs.length > 1 && disjointJobs(jobs);
}

/**
 * The programs on lanes. Refused as a write of a run without savepoints is ({@link savepoint}): a
 * fault fails the call, anything else runs the transaction again isolated, where each write is
 * refused alone.
 */
async function inLanes<R>(t: Tx, programs: readonly Program<R>[]): Promise<R[]> {
  try {
    return await t.lanes(programs);
  } catch (error) {
    if (isPgFault(error)) throw error;
    throw new Isolate(error);
  }
}
