/**
 * The SQLite store's statements (persistence/sql/statements.ts, written in the POSTGRES
 * dialect) as PostgreSQL statements: `@name` and `?` parameters become `$n`, and a named
 * parameter whose type Postgres cannot infer from where it stands (`@runner IS NULL`, a value in a
 * SELECT list) is cast to its type, from {@link PARAM_TYPES}. The texts themselves are not copied.
 */
import type { SqlDialect } from '../../sql/predicates.ts';
import { statementsSql, type StatementName } from '../../sql/statements.ts';

/** The SQL type of each named parameter the statements use (one meaning per name across them). */
const PARAM_TYPES: Record<string, string> = {
  runner: 'text', held: 'bigint', any_fence: 'int', now: 'bigint', until: 'bigint', lease_owner: 'text', lease_fence: 'bigint', take_over: 'text', takeOver: 'text',
  force: 'int', inline_event: 'text', first_in_line: 'int', at_named: 'int', settles: 'int', set_progress: 'int', progress: 'float8', all: 'int',
  owner: 'text', limit: 'bigint', ids: 'text', statuses: 'text', outcomes: 'text', machine: 'text', job: 'text', event: 'text',
  revision: 'bigint', accepted_at: 'bigint', processed_at: 'bigint', attempt: 'bigint', job_id: 'text', event_id: 'text',
  type: 'text', payload: 'text', payload_hash: 'text', status: 'text', error: 'text', source_kind: 'text', source_id: 'text',
  id: 'text', at: 'bigint', expected: 'bigint', fence: 'bigint', next: 'bigint', token: 'text', output: 'text', before: 'bigint',
  seq: 'bigint', after: 'bigint', upto: 'bigint', deactivate_actor: 'text', deactivated_at: 'bigint', machines: 'text', srcs: 'text', budgets: 'text',
};

/** A statement in Postgres's form: its text, and the parameter names in `$n` order (null: positional `?`). */
export interface PgStatement {
  readonly key: string;
  readonly text: string;
  readonly names: readonly string[] | null;
}

/** Rewrite one statement's parameters (string literals and quoted names are left alone). */
export function toPostgres(sql: string, key: string): PgStatement {
  let out = '';
  const names: string[] = [];
  let positional = 0;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      out += sql.slice(i, end + 1);
      i = end;
    } else if (c === '?') {
      out += `$${++positional}`;
    } else if (c === '@' && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))![0];
      let n = names.indexOf(name);
      if (n < 0) n = names.push(name) - 1;
      const type = PARAM_TYPES[name];
      out += type ? `$${n + 1}::${type}` : `$${n + 1}`;
      i += name.length;
    } else out += c;
  }
  if (positional > 0 && names.length > 0) throw new Error(`statement ${key} mixes named and positional parameters`);
  // No parameter at all (a Postgres lease expression may stand where SQLite has `@now`): bound as named, to nothing.
  return { key, text: out, names: positional > 0 ? null : names };
}

/**
 * A statement as node-postgres prepares it, with its values: named per connection (`s_<key>`,
 * under {@link planName}'s name, so that it is planned again as the tables grow).
 */
export function prepared(stmt: PgStatement, values: unknown[]): { name: string; text: string; values: unknown[] } {
  return planned(`s_${stmt.key}`, stmt.text, values);
}

/** A prepared query under `base`'s current name ({@link planName}): every statement the driver prepares, combined ones included (deferred.ts). */
export function planned(base: string, text: string, values: unknown[]): { name: string; text: string; values: unknown[] } {
  return { name: planName(base), text, values };
}

/**
 * Runs of a prepared statement (in this process) after which it goes under a new name, so that
 * each connection plans it again. A connection plans a statement once, at its first run there
 * (`plan_cache_mode = force_generic_plan`, PostgresStore), from the tables as they are then. On a
 * fresh database those are nearly empty, and such a plan kept serving a backlog of thousands
 * until an ANALYZE invalidated it (autovacuum's, at most once a minute): the batch claim checked
 * each candidate's job by scanning every active job (docs/performance.md, "Plans made on empty
 * tables"): writes chose a partial index over the primary key the same way. A connection keeps at
 * most one prepared statement per name a statement has had.
 */
const REPLAN_AFTER = [100, 1_000, 10_000, 100_000];
/** Per base name: its runs so far, and the name it runs under now (the `generation`-th). */
const plans = new Map<string, { runs: number; generation: number; name: string }>();

/** The name a statement runs under now: `base`, then `base_p1`, `base_p2`… once its runs pass each of {@link REPLAN_AFTER}. */
function planName(base: string): string {
  let plan = plans.get(base);
  if (!plan) plans.set(base, (plan = { runs: 0, generation: 0, name: base }));
  plan.runs += 1;
  if (plan.generation < REPLAN_AFTER.length && plan.runs > REPLAN_AFTER[plan.generation]!) plan.name = `${base}_p${++plan.generation}`;
  return plan.name;
}

/** The values of a call's arguments in `$n` order (a named statement takes one object). */
export function bind(stmt: PgStatement, args: readonly unknown[]): unknown[] {
  if (stmt.names === null) return args.map(value);
  const named = (args[0] ?? {}) as Record<string, unknown>;
  return stmt.names.map((n) => value(named[n]));
}

function value(v: unknown): unknown {
  return v === undefined ? null : v;
}

const made = new Map<SqlDialect, Record<StatementName, PgStatement>>();

/**
 * Every statement of the store in Postgres's form, in a Postgres dialect (its lease clock: POSTGRES
 * or POSTGRES_CALLER_LEASES), made once. A statement's key is its name, tagged with the dialect
 * for every dialect after the first one made: what is cached by key across a process (the prepared
 * name, deferred.ts's combined texts, pairs.ts's pairs) is then never one dialect's text for another.
 */
export function pgStatements(d: SqlDialect): Record<StatementName, PgStatement> {
  let statements = made.get(d);
  if (!statements) {
    const texts = statementsSql(d);
    const tag = made.size === 0 ? '' : `_d${made.size}`;
    statements = {} as Record<StatementName, PgStatement>;
    for (const name of Object.keys(texts) as StatementName[]) statements[name] = toPostgres(texts[name], `${name}${tag}`);
    made.set(d, statements);
  }
  return statements;
}
