/**
 * Each dialect's schema as its migrations produce it: dumped to persistence/sql/schema/<dialect>.sql
 * (`npm run schema:dump`, scripts/schemaDump.ts), and compared across dialects. Both dialects have
 * the same tables and the same columns; where their types differ, the difference is one of
 * {@link TYPE_DIFFERENCES}, listed here and nowhere else. test/schemaDump*.test.ts fail on a
 * dump that drifts from the migrations, and on any other disagreement.
 */
import type { Dialect } from './migrations.ts';

/** A column as the database reports it. */
export interface ColumnShape {
  name: string;
  /** The declared type, lower case (`integer`, `text`; Postgres: `bigint`, `double precision`…). */
  type: string;
  notNull: boolean;
}

/** A dialect's schema: its tables and columns (by name), and the DDL a dump shows. */
export interface SchemaShape {
  dialect: Dialect;
  version: number;
  tables: { name: string; columns: ColumnShape[] }[];
  /** The schema's DDL, one statement per entry, in a stable order (tables, then indexes and the rest, by name). */
  ddl: string[];
}

/**
 * The only ways a column's type may differ between the dialects, as `sqlite type → postgres
 * types`. SQLite's STRICT tables know INTEGER, REAL, TEXT, BLOB and ANY; Postgres stores the same
 * values as:
 * - INTEGER as `bigint` (every stored time, revision, count and seq is a 64-bit integer) or `integer`
 *   (small counters and flags), both read as JS numbers (drivers/pg: int8 parsed as a number);
 * - REAL as `double precision`;
 * - TEXT as `text` (JSON columns included: parsed where a predicate reads a field, see predicates.ts).
 */
export const TYPE_DIFFERENCES: Readonly<Record<string, readonly string[]>> = {
  integer: ['bigint', 'integer'],
  real: ['double precision'],
  text: ['text'],
  blob: ['bytea'],
};

/** Tables (`name`) and columns (`table.column`) one dialect has and the other has not, with why. */
export const ONE_DIALECT_ONLY: Readonly<Record<string, string>> = {
  'effects.rowid': "postgres: insertion order, an identity column, where SQLite orders by its implicit rowid",
  history_seq_floor: "sqlite: the highest purged history seq, so that the seq trigger never gives one twice (Postgres: a sequence)",
  'transitions.feed_pos': "postgres: the history feed's position, numbered by the reader in commit order (concurrent writers commit out of seq order)",
  history_feed_head: "postgres: the last feed position given (drivers/pg/feed.ts)",
};

/** Where two dialects' schemas disagree beyond {@link TYPE_DIFFERENCES} and {@link ONE_DIALECT_ONLY}: one line per disagreement. */
export function schemaDisagreements(sqlite: SchemaShape, postgres: SchemaShape): string[] {
  const out: string[] = [];
  const tables = (s: SchemaShape) => new Map(s.tables.map((t) => [t.name, new Map(t.columns.map((c) => [c.name, c]))]));
  const a = tables(sqlite);
  const b = tables(postgres);
  for (const name of new Set([...a.keys(), ...b.keys()])) {
    const left = a.get(name);
    const right = b.get(name);
    if (!left || !right) {
      if (ONE_DIALECT_ONLY[name] === undefined) out.push(`table ${name}: only in ${left ? 'sqlite' : 'postgres'}`);
      continue;
    }
    for (const column of new Set([...left.keys(), ...right.keys()])) {
      const where = `${name}.${column}`;
      const l = left.get(column);
      const r = right.get(column);
      if (!l || !r) {
        if (ONE_DIALECT_ONLY[where] === undefined) out.push(`column ${where}: only in ${l ? 'sqlite' : 'postgres'}`);
        continue;
      }
      if (!(TYPE_DIFFERENCES[l.type] ?? [l.type]).includes(r.type)) out.push(`column ${where}: sqlite ${l.type}, postgres ${r.type} (not a type difference of TYPE_DIFFERENCES)`);
      if (l.notNull !== r.notNull) out.push(`column ${where}: ${l.notNull ? 'NOT NULL in sqlite only' : 'NOT NULL in postgres only'}`);
    }
  }
  return out;
}

/** The dump file's text: a header, then the DDL. */
export function renderSchema(shape: SchemaShape): string {
  const header = [
    `-- The ${shape.dialect} schema as persistence/sql/migrations/${shape.dialect} produce it (schema version ${shape.version}).`,
    '-- Written by `npm run schema:dump`; test/schemaDump tests fail when it drifts from the migrations.',
  ];
  return `${[...header, '', ...shape.ddl.map((s) => `${s.trim()};\n`)].join('\n')}`;
}
