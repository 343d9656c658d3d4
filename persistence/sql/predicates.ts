/**
 * The store's queries over stored facts, each written once and named: what `JobFilter.stuck`,
 * `JobFilter.exhausted`, the attempt budget of a claim and the release limit of
 * `releaseAttempt` mean in SQL. The rules themselves are the port's (src/ports/store.ts says them
 * in words; the numbers and codes they compare with are its exported constants); a store states
 * them here and nowhere else.
 *
 * Plain SQL over the schema's tables and columns (`EXISTS`, `IN`, `count(*)`, named parameters),
 * so that another SQL store can use the same text. The one thing SQL does not spell the same way
 * everywhere is reading a field of a JSON column: it comes from the {@link SqlDialect} a store
 * passes (SQLite: `json_extract`; Postgres: `->>`).
 */
import { EXHAUSTED_ERROR_CODES, RELEASED_ATTEMPT } from '../../src/ports/store.ts';

/** What differs between SQL databases in these predicates and in the store's statements (statements.ts). */
export interface SqlDialect {
  /** The text of field `field` of the JSON object in `column` (NULL when absent). */
  jsonText(column: string, field: string): string;
  /** True when the text in `column` is valid JSON (Postgres, with jsonb columns: `TRUE`). */
  jsonValid(column: string): string;
  /** A planner hint naming the index a query reads (` INDEXED BY name` in SQLite; nothing where the planner takes no hints). */
  indexedBy(index: string): string;
  /** The values of the JSON array of text in `param`, as a subquery's single column `value`. */
  jsonValues(param: string): string;
  /** The entries of the JSON object of numbers in `param`, as a parenthesised subquery with columns `key` and `n`. */
  jsonEntries(param: string): string;
  /**
   * For each row of the FROM item `outer`, the rows of `table` a read correlated with it returns,
   * `read(columns)` naming the columns it selects (its LIMIT bounds each row's share): SQLite, the
   * rowids it selects looked up (`rowid IN (…)`, run once per outer row); Postgres, a LATERAL join.
   * Columns: the table's, and `r` (its rowid).
   */
  perRow(outer: string, table: string, read: (columns: string) => string): string;
  /** `a` equals `b`, NULL equal to NULL. */
  same(a: string, b: string): string;
  /** The larger of two values (a scalar function, not the aggregate). */
  greatest(a: string, b: string): string;
  /** The smaller of two values (a scalar function, not the aggregate). */
  least(a: string, b: string): string;
  /** `needle` occurs in the text `column`. */
  contains(column: string, needle: string): string;
  /**
   * A new history row's global seq. SQLite (schema 12: the table's rowid): one more than the highest
   * given, kept or purged (history_seq_floor; SQLite's own rowid choice would give a purged one
   * again); writers are serialised, so rows become visible in seq order (`historySince`). Postgres:
   * the next value of a sequence (unique, growing; concurrent writers make it visible out of order).
   */
  historySeq: string;
  /**
   * The time leases and activity claims are judged by, in ms: a lease or claim whose expiry is at
   * or before it has expired (`LEASE_OK`, the claim-expiry tests, `leaseHolders`, `expireLeases`).
   * With the caller's clock (SQLite; Postgres with `leaseClock: 'caller'`): its `@now`. With the
   * database's (Postgres): the server's clock, so hosts whose clocks disagree still agree on it.
   * `@now` itself keeps meaning the caller's time for everything else (retries, timers, records).
   */
  leaseNow: string;
  /** The expiry written for a lease or claim the caller asks to last until `@until` from its `@now`: `@until`, or `leaseNow + (@until - @now)`. */
  leaseUntil: string;
  /** Whether {@link leaseNow} is the caller's `@now` (an expiry written is then the caller's `@until`, and a commit may find it unchanged). */
  callerLeaseClock: boolean;
}

/**
 * A lease or claim expiry (`column`, in the lease clock) in the caller's clock: `column + (@now -
 * leaseNow)`, `@now` null meaning "as stored" (`nextWakeAt` without a time). The column itself by
 * the caller's lease clock.
 */
export function inCallerTime(d: SqlDialect, column: string): string {
  return d.callerLeaseClock ? column : `(${column} + (coalesce(@now, ${d.leaseNow}) - ${d.leaseNow}))`;
}

/** Leases judged by the caller's clock: its `@now`, its `@until` (one host, one clock). */
const CALLER_LEASE_CLOCK = { leaseNow: '@now', leaseUntil: '@until', callerLeaseClock: true } as const;

/** The Postgres server's clock in ms: the start of the statement (STABLE, so an index can seek by it; a statement never waits past it to decide). */
const PG_SERVER_MS = '(extract(epoch FROM statement_timestamp()) * 1000)::bigint';

/** SQLite's spelling. */
export const SQLITE: SqlDialect = {
  jsonText: (column, field) => `json_extract(${column}, '$.${field}')`,
  jsonValid: (column) => `json_valid(${column})`,
  indexedBy: (index) => ` INDEXED BY ${index}`,
  jsonValues: (param) => `SELECT value FROM json_each(${param})`,
  jsonEntries: (param) => `(SELECT key, value AS n FROM json_each(${param}))`,
  perRow: (outer, table, read) => `SELECT t.*, t.rowid AS r FROM ${outer} CROSS JOIN ${table} AS t WHERE t.rowid IN (${read('rowid')})`,
  same: (a, b) => `${a} IS ${b}`,
  greatest: (a, b) => `max(${a}, ${b})`,
  least: (a, b) => `min(${a}, ${b})`,
  contains: (column, needle) => `instr(${column}, ${needle}) > 0`,
  historySeq: `(SELECT max(coalesce((SELECT max(seq) FROM transitions), 0),
  coalesce((SELECT seq FROM history_seq_floor WHERE id = 1), 0)) + 1)`,
  ...CALLER_LEASE_CLOCK,
};

/** PostgreSQL's spelling (persistence/drivers/pg: JSON columns are text, parsed where a predicate reads a field). */
export const POSTGRES: SqlDialect = {
  jsonText: (column, field) => `((${column})::jsonb ->> '${field}')`,
  jsonValid: () => 'TRUE',
  indexedBy: () => '',
  jsonValues: (param) => `SELECT value FROM jsonb_array_elements_text(CAST(${param} AS jsonb))`,
  jsonEntries: (param) => `(SELECT key, value::bigint AS n FROM jsonb_each_text(CAST(${param} AS jsonb)))`,
  perRow: (outer, _table, read) => `SELECT t.* FROM ${outer} CROSS JOIN LATERAL (${read('*, rowid AS r')}) AS t`,
  same: (a, b) => `${a} IS NOT DISTINCT FROM ${b}`,
  greatest: (a, b) => `greatest(${a}, ${b})`,
  least: (a, b) => `least(${a}, ${b})`,
  contains: (column, needle) => `strpos(${column}, ${needle}) > 0`,
  historySeq: "nextval('transitions_seq')",
  leaseNow: PG_SERVER_MS,
  leaseUntil: `(${PG_SERVER_MS} + (@until - @now))`,
  callerLeaseClock: false,
};

/** PostgreSQL with leases judged by the caller's clock, as SQLite judges them (`leaseClock: 'caller'`: tests that move an injected clock). */
export const POSTGRES_CALLER_LEASES: SqlDialect = { ...POSTGRES, ...CALLER_LEASE_CLOCK };

/** A list of fixed identifiers as SQL string literals: `'A', 'B'`. */
function literals(values: readonly string[]): string {
  return values.map((v) => `'${v.replaceAll("'", "''")}'`).join(', ');
}

/**
 * An effect row (alias `effect`) may start another attempt: it has used fewer attempts than its
 * `max_attempts`. A claim never starts an attempt past it; an effect failed without attempts left
 * is exhausted (see {@link exhausted}).
 */
export function attemptsLeft(effect: string): string {
  return `${effect}.attempt < ${effect}.max_attempts`;
}

/**
 * `JobFilter.exhausted`, over a `jobs` row: one of its effects failed for good: it used all its
 * attempts, or failed with one of {@link EXHAUSTED_ERROR_CODES} (no attempts left after an
 * interruption, or unsafe to repeat).
 */
export function exhausted(d: SqlDialect): string {
  return `EXISTS (SELECT 1 FROM effects e WHERE e.job_id = jobs.id AND e.status = 'failed'
  AND (NOT (${attemptsLeft('e')}) OR ${d.jsonText('e.error', 'code')} IN (${literals(EXHAUSTED_ERROR_CODES)})))`;
}

/**
 * `JobFilter.stuck`, over a `jobs` row: nothing recorded will move it. Active, not quarantined
 * (a row whose JSON columns are damaged counts as quarantined, recorded or not yet), not
 * suspended, held by no lease, with no pending inbox event, no scheduled or fired timer, and no
 * active effect that is pending, running, waiting or in backoff.
 */
export function stuck(d: SqlDialect): string {
  const readable = ['jobs.state_value', 'jobs.context'].map((c) => d.jsonValid(c)).join(' AND ');
  return `${STUCK_FACTS} AND ${readable}`;
}

const STUCK_FACTS = `jobs.status = 'active' AND jobs.quarantine IS NULL AND jobs.suspended_at IS NULL AND jobs.lease_owner IS NULL
  AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.job_id = jobs.id AND i.status = 'pending')
  AND NOT EXISTS (SELECT 1 FROM timers t WHERE t.job_id = jobs.id AND t.status IN ('scheduled', 'fired'))
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.job_id = jobs.id AND e.active = 1 AND e.status IN ('pending', 'running', 'waiting', 'backoff'))`;

/**
 * `releaseAttempt`'s limit, over the effect `@id`: graceful stops have given back fewer than
 * `@limit` of its attempts (bound to `MAX_RELEASES`: the port's constant, never a literal here).
 */
export function releasesLeft(d: SqlDialect): string {
  return `(SELECT count(*) FROM effect_attempts WHERE effect_id = @id AND outcome = 'interrupted'
    AND ${d.jsonText('error', 'code')} = '${RELEASED_ATTEMPT.code}') < @limit`;
}
