/**
 * `npm run migrations:texts`: writes persistence/sql/migrationTexts.ts from the migration files
 * (persistence/sql/migrations/<dialect>/*.sql), so the SQL core reads no file.
 */
import { writeFileSync } from 'node:fs';
import { MIGRATION_TEXTS_FILE, renderMigrationTexts } from '../persistence/migrationFiles.ts';

writeFileSync(MIGRATION_TEXTS_FILE, renderMigrationTexts());
process.stdout.write(`wrote ${MIGRATION_TEXTS_FILE}\n`);
