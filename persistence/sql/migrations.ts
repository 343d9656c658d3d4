/**
 * The numbered migrations of each dialect (persistence/sql/migrations/<dialect>/NNNN_name.sql,
 * shipped as the generated migrationTexts.ts: no file is read) and the refusals every store
 * shares when it opens: another application's schema, a newer Spool's.
 */
import { SchemaTooNewError, SpoolError } from '../../src/base/errors.ts';
import { MIGRATION_TEXTS } from './migrationTexts.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The SQL dialects Spool ships migrations for: persistence/sql/migrations/<dialect>/. */
export type Dialect = 'sqlite' | 'postgres';

/** A dialect's migrations shipped with this code, in order. */
export function migrationsOf(dialect: Dialect): Migration[] {
  return MIGRATION_TEXTS[dialect].map((m) => ({ ...m }));
}

/**
 * The file is not SQLite at all, or holds another application's schema (tables, views, indexes
 * or triggers) and no Spool migrations table: Spool refuses to install its schema into it. Nothing was changed.
 */
export class NotASpoolDatabaseError extends SpoolError {
  readonly code = 'SPOOL_NOT_A_SPOOL_DATABASE';
  readonly category = 'bad-input';
}

/** The refusal of a schema newer than this code (any Spool store). */
export function tooNew(path: string, current: number, latest: number): SchemaTooNewError {
  return new SchemaTooNewError(
    `Database ${path} has schema version ${current}, but this Spool knows only up to ${latest}. ` +
      'It was written by a newer Spool: upgrade Spool to open it (nothing was changed).',
    { path, schemaVersion: current, supported: latest },
  );
}
