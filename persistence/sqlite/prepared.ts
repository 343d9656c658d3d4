import type Database from 'better-sqlite3';

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
