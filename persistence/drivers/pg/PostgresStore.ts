import pg from 'pg';
import { systemClock } from '../../../src/ports/clock.ts';
import { guardEntryPoints } from '../../sql/faults.ts';
import { POSTGRES, POSTGRES_CALLER_LEASES } from '../../sql/predicates.ts';
import { SqlStore } from '../../sql/SqlStore.ts';
import { ChangeListener } from './changes.ts';
import { PgDriver } from './driver.ts';
import { pgFault } from './faults.ts';
import { migrate } from './open.ts';
import { checkOptions, redact, type PostgresStoreOptions } from './options.ts';
import { oneWritePerTurn } from './oneWrite.ts';

/** Connection-level types: BIGINT (int8) and numeric as JS numbers (every stored number is a safe integer or a float). */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (text: string) => (text === null ? null : Number(text));
    return pg.types.getTypeParser(oid, format as 'text');
  }) as typeof pg.types.getTypeParser,
};

/**
 * The store on PostgreSQL (node-postgres): the store written once (persistence/sql/SqlStore.ts,
 * its statements in the POSTGRES dialect) over the pg driver (driver.ts): READ COMMITTED
 * transactions that first lock the rows of the jobs they write. Its own numbered migrations
 * (persistence/sql/migrations/postgres); see docs/ARCHITECTURE.md, "Postgres".
 *
 * @example
 * const store = await PostgresStore.open('postgres://spool@db.internal/spool');
 */
export class PostgresStore extends SqlStore {
  /** The pool; tests and tools may read it. */
  readonly pool: pg.Pool;
  readonly #driver: PgDriver;

  private constructor(pool: pg.Pool, driver: PgDriver) {
    super(driver);
    this.pool = pool;
    this.#driver = driver;
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
    // serves every value; the batch claim's custom plan cost more (1.5-6 ms) than running it. Every
    // statement is planned again as the tables grow (`planName`, sql.ts).
    // No JIT: a plan whose estimate passes jit_above_cost (the batch claim's, as a backlog grows:
    // it guesses 100 srcs) compiled its expressions again at every run, 0.3-0.6 s of server CPU
    // for a statement that runs in 10 ms (docs/performance.md, "Server CPU of a queue job on Postgres").
    const settings = `-c lock_timeout=${lockTimeout} -c TimeZone=UTC -c plan_cache_mode=force_generic_plan -c jit=off`;
    // Pipeline mode: a statement goes out without waiting for the answer to the one before it, so
    // the lanes of a batch share round trips (transactions.ts, runLanes). One at a time, as every
    // other caller sends them, it is what it was.
    const config: pg.PoolConfig = { connectionString: url, types: TYPES, options: settings, pipeline: true };
    const pool = new pg.Pool({ ...config, max: options.poolSize ?? 10 });
    // An idle connection the server drops (a restart) is an error event on the pool: the pool discards it.
    pool.on('error', () => undefined);
    // One the server drops while checked out (between a transaction's statements) is an error event
    // on that client, which the pool does not listen to then: without a listener it would end the
    // process. The transaction learns of it from its next statement (isConnectionLost).
    pool.on('connect', (client) => {
      client.on('error', () => undefined);
      oneWritePerTurn(client);
    });
    try {
      const client = await pool.connect();
      let version: number;
      try {
        version = await migrate(client, description, (options.clock ?? systemClock).now());
      } finally {
        client.release();
      }
      const dialect = options.leaseClock === 'caller' ? POSTGRES_CALLER_LEASES : POSTGRES;
      return new PostgresStore(pool, new PgDriver(pool, description, version, new ChangeListener({ connectionString: url, types: TYPES }), dialect));
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw pgFault(error, description, 'open');
    }
  }

  /** Call `onChange` when another process commits to this database (LISTEN/NOTIFY), or (`'work'`) commits work for workers; returns the unsubscribe. */
  watchChanges(onChange: () => void, what: 'work' | 'all' = 'all'): () => void {
    return this.#driver.changes.watch(onChange, what);
  }
}

// Its own entry points (the store's are guarded in SqlStore.ts): driver errors as Spool's typed storage faults (faults.ts).
guardEntryPoints(PostgresStore, (store, error, call) => pgFault(error, store.description, call));
