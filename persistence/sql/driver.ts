/**
 * What the store written once (SqlStore.ts) asks of a database driver: run a statement or a
 * program (program.ts) outside a transaction, in a write transaction, or in one read snapshot;
 * its dialect; its faults as Spool's; and the few operations a driver does its own way (the batch
 * claim, the history feed, seeing other processes' commits). Methods return what the driver
 * gives: values for a synchronous driver (better-sqlite3), promises for an asynchronous one (pg).
 */
import type {
  CommitResult,
  DueClaim,
  DueClaimResult,
  FeedPage,
  HistoryFeedFilter,
  NewJob,
  Outcome,
  TransitionCommit,
  UnresolvedOperation,
  WriteBatch,
} from '../../src/ports/store.ts';
import type { SqlDialect } from './predicates.ts';
import type { Program } from './program.ts';
import type { Row } from './records.ts';
import type { StatementName } from './statements.ts';

export type MaybePromise<T> = T | Promise<T>;

/** `f(v)`: at once when `v` is a value, after it when a promise (a synchronous driver stays synchronous). */
export function andThen<T, R>(v: MaybePromise<T>, f: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return v instanceof Promise ? v.then(f) : f(v);
}

/** `f` of each item in turn (each after the last one's promise, when it gives one): a synchronous driver stays synchronous. */
export function inTurn<I, R>(items: readonly I[], f: (item: I) => MaybePromise<R>): MaybePromise<R[]> {
  const out: R[] = [];
  const from = (i: number): MaybePromise<R[]> =>
    i === items.length
      ? out
      : andThen(f(items[i]!), (r) => {
          out.push(r);
          return from(i + 1);
        });
  return from(0);
}

/** What a write transaction touches, for a driver that locks those jobs' rows first (Postgres): the jobs, found directly or through their effects, tokens, timers or events. */
export interface Locks {
  jobs?: readonly string[];
  effects?: readonly string[];
  tokens?: readonly string[];
  timers?: readonly string[];
  seqs?: readonly number[];
}

/** The jobs a new job's create writes: itself, its children, the jobs its related deliveries go to. */
export function locksOfCreate(job: NewJob): Locks {
  return { jobs: jobsOfCreate(job) };
}

/** The jobs a create writes: its own, its child jobs, the jobs its start delivers to. */
export function jobsOfCreate(job: NewJob): string[] {
  return [job.id, ...(job.children ?? []).map((c) => c.id), ...(job.relatedDeliveries ?? []).map((d) => d.jobId)];
}

/** The jobs a commit writes: its own, the ones it delivers to, its parent (a child settling its invocation), its children. */
export function jobsOfCommit(c: TransitionCommit): string[] {
  return [c.jobId, ...(c.deliveries ?? []).map((d) => d.jobId), ...(c.settleParent ? [c.settleParent.event.jobId] : []), ...(c.children ?? []).map((j) => j.id)];
}

/** How a write runs. */
export interface WriteOptions {
  /** The rows it touches (a function: computed only by a driver that locks). */
  locks?: Locks | (() => Locks);
  /** The job operations it carries: a COMMIT whose outcome is unknown raises CommitOutcomeUnknown naming them. */
  ops?: () => UnresolvedOperation[];
  /** It leaves no work for other processes' workers (a driver that wakes them does not). */
  quiet?: boolean;
  /** The batch it writes, when what it leaves for other processes' workers depends on it. */
  batch?: WriteBatch;
}

/** A write transaction. */
export interface WriteTx {
  run<R>(program: Program<R>): MaybePromise<R>;
  /**
   * Each write in turn, each in a savepoint of its own: one its own checks refuse rolls back alone
   * (`ok: false`), a storage fault fails the whole transaction. `leaseHeld`: a claim refused
   * because another live runner holds the job is `ok` with `undefined`. `jobsOf`: the jobs each
   * write touches, when known; a driver may then run writes that share no job together (Postgres:
   * on lanes, persistence/drivers/pg/transactions.ts).
   */
  each<I, T>(items: readonly I[], write: (item: I) => Program<T>, leaseHeld?: boolean, jobsOf?: (item: I) => readonly string[]): MaybePromise<Outcome<T | undefined>[]>;
  /** Each commit likewise, a refused one reported as its CommitResult. */
  eachCommit(commits: readonly TransitionCommit[], write: (c: TransitionCommit) => Program<CommitResult>): MaybePromise<CommitResult[]>;
  /** A batch claim (`claimDueEffects`) in this transaction, after its other writes. */
  claimDue(c: DueClaim): MaybePromise<DueClaimResult>;
}

/** A database driver under the store (persistence/drivers/<name>). */
export interface SqlDriver {
  /** `sqlite:<path>`, `postgres:<redacted url>`: what errors name. */
  readonly description: string;
  readonly schemaVersion: number;
  readonly dialect: SqlDialect;
  /** Whether an error inside one write of a batch is a storage fault, which fails the whole call. */
  isFault(error: unknown): boolean;
  /** The driver's error at entry point `call`, as Spool's typed storage fault (what every method throws). */
  fault(error: unknown, call: string): unknown;
  /** One statement outside a transaction: its first row, or all of them. */
  get(name: StatementName, args: unknown[]): MaybePromise<Row | undefined>;
  all(name: StatementName, args: unknown[]): MaybePromise<Row[]>;
  /** The first row of a statement as an array of values (`uncommittedOf`). */
  values(name: StatementName, args: unknown[]): MaybePromise<unknown[] | undefined>;
  /** The jobs row of `id` (read by every send: the driver's fastest read). */
  job(id: string): MaybePromise<Row | undefined>;
  /** A statement given by its text (`listJobs`' filters; `?` parameters), prepared once per text. */
  query(sql: string, params: readonly unknown[]): MaybePromise<Row[]>;
  /** A read program outside a transaction. */
  read<R>(program: Program<R>): MaybePromise<R>;
  /** A read program in one snapshot (every statement sees the same state). */
  snapshot<R>(program: Program<R>): MaybePromise<R>;
  /** A write transaction. */
  write<T>(fn: (t: WriteTx) => MaybePromise<T>, options?: WriteOptions): MaybePromise<T>;
  /** `claimDueEffects` on its own, for a driver that does it without a transaction (Postgres: one statement); absent: `write` with WriteTx.claimDue. */
  claimDue?(c: DueClaim): MaybePromise<DueClaimResult>;
  /** `historySince`. */
  historySince(after: number, limit: number, scan: number, filter: HistoryFeedFilter): MaybePromise<FeedPage>;
  /** `externalChanges`. */
  externalChanges(): MaybePromise<number>;
  close(): MaybePromise<void>;
}
