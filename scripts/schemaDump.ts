/**
 * `npm run schema:dump`: each dialect's schema as its migrations produce it, written to
 * persistence/sql/schema/<dialect>.sql (test/schemaDump*.test.ts fail when a file drifts).
 * Postgres: a scratch database on the server SPOOL_TEST_PG_URL (or the first argument) names.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { migratedSqliteSchema } from '../persistence/drivers/better-sqlite3/schema.ts';
import { migratedPostgresSchema } from '../persistence/drivers/pg/schema.ts';
import { renderSchema, schemaDisagreements } from '../persistence/sql/schema.ts';

const url = process.argv[2] ?? process.env['SPOOL_TEST_PG_URL'];
if (!url) {
  process.stderr.write('schema:dump needs a Postgres server to migrate a scratch database on: set SPOOL_TEST_PG_URL or pass its URL (postgres://user@host:port/db).\n');
  process.exit(2);
}
const sqlite = migratedSqliteSchema();
const postgres = await migratedPostgresSchema(url);
for (const shape of [sqlite, postgres]) {
  const file = fileURLToPath(new URL(`../persistence/sql/schema/${shape.dialect}.sql`, import.meta.url));
  writeFileSync(file, renderSchema(shape));
  process.stdout.write(`wrote ${file}\n`);
}
const disagreements = schemaDisagreements(sqlite, postgres);
if (disagreements.length > 0) {
  process.stderr.write(`The dialects disagree (persistence/sql/schema.ts lists the allowed differences):\n${disagreements.map((d) => `  ${d}`).join('\n')}\n`);
  process.exit(1);
}
