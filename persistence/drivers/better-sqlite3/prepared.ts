import type Database from 'better-sqlite3';
import type { Row } from '../../sql/records.ts';
import { statementsSql, type StatementName } from '../../sql/statements.ts';
import { SQLITE } from '../../sql/predicates.ts';

/**
 * A prepared statement, under a name declaration files can write: better-sqlite3's types keep
 * the statement interface in a namespace they do not export, so a function that returns
 * statements with an inferred type cannot be declared (`tsc -p tsconfig.build.json`, TS4058).
 */
export type Statement = Database.Statement<unknown[], unknown>;

/** A group of prepared statements by name. */
export type Statements<K extends string> = { readonly [Name in K]: Statement };

/** Type a group of prepared statements as {@link Statements} (the values are unchanged). */
export function statements<K extends string>(group: Record<K, Statement>): Statements<K> {
  return group;
}

/** A raw-mode statement and the function that names its row values (see `rawRows`). */
export type RawRows = { stmt: Database.Statement; named: (values: unknown[]) => Row };

/**
 * A `SELECT *` statement in raw mode, with a function that names a row's values. better-sqlite3
 * builds a named row property by property (about 3 µs for a jobs row, read on every send); an
 * object literal generated once for the statement's columns costs a fraction of that.
 */
export function rawRows(stmt: Database.Statement): RawRows {
  const names = stmt.columns().map((c) => c.name);
  const body = `return { ${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(', ')} };`;
  return { stmt: stmt.raw(true), named: new Function('v', body) as (values: unknown[]) => Row };
}


/** The statements read as arrays of values (better-sqlite3's raw mode). */
const RAW: readonly StatementName[] = ['uncommittedOf'];

/** The SQLite texts, made once (on first use: the modules they come from import each other). */
let sqliteSql: ReturnType<typeof statementsSql> | undefined;

/** Every statement of the store in SQLite's spelling, prepared once per connection. */
export function prepare(db: Database.Database): Record<StatementName, Database.Statement> {
  sqliteSql ??= statementsSql(SQLITE);
  const out = {} as Record<StatementName, Database.Statement>;
  for (const name of Object.keys(sqliteSql) as StatementName[]) {
    const stmt = db.prepare(sqliteSql[name]);
    out[name] = RAW.includes(name) ? stmt.raw(true) : stmt;
  }
  return out;
}

