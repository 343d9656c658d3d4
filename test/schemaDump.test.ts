/**
 * The SQLite schema dump (persistence/sql/schema/sqlite.sql) is what the migrations produce, and
 * the comparison of dialects (persistence/sql/schema.ts) reports what it should. The Postgres
 * half: test/schemaDump.pg.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migratedSqliteSchema } from '../persistence/drivers/better-sqlite3/schema.ts';
import { renderSchema, schemaDisagreements, type SchemaShape } from '../persistence/sql/schema.ts';

const dump = (dialect: string) => readFileSync(new URL(`../persistence/sql/schema/${dialect}.sql`, import.meta.url), 'utf8');

describe('schema dumps', () => {
  it('persistence/sql/schema/sqlite.sql is the schema the SQLite migrations produce (`npm run schema:dump` rewrites it)', () => {
    expect(renderSchema(migratedSqliteSchema())).toBe(dump('sqlite'));
  });

  it('the dialects may differ only by a listed type difference or a listed one-dialect table or column', () => {
    const shape = (dialect: 'sqlite' | 'postgres', columns: [string, string, boolean][], extra: SchemaShape['tables'] = []): SchemaShape => ({
      dialect,
      version: 1,
      ddl: [],
      tables: [{ name: 'jobs', columns: columns.map(([name, type, notNull]) => ({ name, type, notNull })) }, ...extra],
    });
    const sqlite = shape('sqlite', [['id', 'text', true], ['revision', 'integer', true], ['score', 'real', false], ['note', 'text', false]]);
    expect(schemaDisagreements(sqlite, shape('postgres', [['id', 'text', true], ['revision', 'bigint', true], ['score', 'double precision', false], ['note', 'text', false]]))).toEqual([]);
    const other = shape('postgres', [['id', 'text', true], ['revision', 'text', true], ['score', 'double precision', true], ['extra', 'text', false]], [{ name: 'history_feed_head', columns: [] }, { name: 'mine', columns: [] }]);
    expect(schemaDisagreements(sqlite, other)).toEqual([
      'column jobs.revision: sqlite integer, postgres text (not a type difference of TYPE_DIFFERENCES)',
      'column jobs.score: NOT NULL in postgres only',
      'column jobs.note: only in sqlite',
      'column jobs.extra: only in postgres',
      'table mine: only in postgres',
    ]);
  });
});
