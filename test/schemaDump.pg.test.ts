/**
 * The Postgres schema dump (persistence/sql/schema/postgres.sql) is what the Postgres migrations
 * produce, and the two dialects agree on every table and column but the differences
 * persistence/sql/schema.ts lists.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migratedSqliteSchema } from '../persistence/drivers/better-sqlite3/schema.ts';
import { migratedPostgresSchema } from '../persistence/drivers/pg/schema.ts';
import { renderSchema, schemaDisagreements } from '../persistence/sql/schema.ts';
import { testPostgresUrl } from './helpers/postgres.ts';

describe('schema dumps on Postgres', () => {
  it('persistence/sql/schema/postgres.sql is the schema the Postgres migrations produce, and it agrees with SQLite but the listed differences', async () => {
    const postgres = await migratedPostgresSchema(testPostgresUrl());
    expect(renderSchema(postgres)).toBe(readFileSync(new URL('../persistence/sql/schema/postgres.sql', import.meta.url), 'utf8'));
    expect(schemaDisagreements(migratedSqliteSchema(), postgres)).toEqual([]);
  });
});
