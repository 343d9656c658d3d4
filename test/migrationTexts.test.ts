/**
 * The SQL core reads no file: each dialect's migrations reach it as the generated
 * persistence/sql/migrationTexts.ts, which must be what the .sql files (the source of truth) say.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MIGRATION_TEXTS_FILE, migrationFiles, renderMigrationTexts } from '../persistence/migrationFiles.ts';
import { migrationsOf } from '../persistence/sql/migrations.ts';

describe('migration texts', () => {
  it('persistence/sql/migrationTexts.ts is what `npm run migrations:texts` writes from the .sql files as they are', () => {
    expect(readFileSync(MIGRATION_TEXTS_FILE, 'utf8')).toBe(renderMigrationTexts());
  });

  it('each store migrates with every .sql file of its dialect, in order, text for text', () => {
    for (const dialect of ['sqlite', 'postgres'] as const) {
      const files = migrationFiles(dialect);
      expect(files.length).toBeGreaterThan(4);
      expect(files.map((m) => m.version)).toEqual(files.map((_, i) => i + 1));
      expect(migrationsOf(dialect)).toEqual(files);
    }
  });

  it('a migration changed by the caller of migrationsOf does not change what the next caller gets', () => {
    const first = migrationsOf('sqlite');
    first[0]!.sql = 'DROP TABLE jobs';
    expect(migrationsOf('sqlite')[0]!.sql).not.toBe('DROP TABLE jobs');
  });
});
