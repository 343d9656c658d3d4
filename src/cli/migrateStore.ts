/**
 * `spool migrate-store --from spool.db --to postgres://… [--json]`: copy a SQLite store into a
 * Postgres database (persistence/migrateStore.ts): refuses while workers hold leases on the
 * source, resumable (run it again after an interruption), counts verified at the end (exit code
 * 1 when they differ). Progress goes to stderr; `--json` prints one report on stdout.
 *
 * @example
 * spool migrate-store --from ./spool.db --to postgres://spool@db.internal/spool
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { MigrateReport } from '../../persistence/migrateStore.ts';
import { isPostgresUrl } from '../../persistence/openStore.ts';
import { DatabaseError, UsageError } from './errors.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import { table } from './format.ts';

/** Add the `migrate-store` command to `program`. */
export function addMigrateStoreCommand(program: Command, io: CliIO, setExitCode: (code: number) => void): void {
  program
    .command('migrate-store')
    .description('copy every job (history, inbox, effects, attempts, timers, notes, assets) and the schedules from a SQLite file into a Postgres database; resumable; verifies counts')
    .requiredOption('--from <file>', 'the SQLite database file to copy')
    .requiredOption('--to <url>', 'the Postgres database (postgres://…) to copy into')
    .addHelpText('after', examples('spool migrate-store --from spool.db --to postgres://spool@127.0.0.1:5432/spool', 'spool --json migrate-store --from spool.db --to "$DATABASE_URL"'))
    .action(async (options: { from: string; to: string }, command: Command) => {
      const g = globals(command);
      if (isPostgresUrl(options.from)) throw new UsageError('--from names a SQLite file; copying from Postgres is not supported. Nothing was changed.');
      if (!isPostgresUrl(options.to)) throw new UsageError(`--to takes a postgres:// URL; got "${options.to}". Nothing was changed.`);
      const from = resolve(io.cwd, options.from);
      if (!existsSync(from)) throw new DatabaseError(`No Spool database at ${options.from}; pass --from <file>.`, { db: options.from });
      let shown = 0;
      // Imported here: it loads the Postgres driver, which no other command needs at start.
      const { migrateStore } = await import('../../persistence/migrateStore.ts');
      const report = await migrateStore({
        from,
        to: options.to,
        onProgress: (p) => {
          const done = p.copied + p.skipped;
          // About every 2% (and the last), so a big copy shows it moves without flooding the terminal.
          if (done - shown >= Math.max(1, Math.floor(p.total / 50)) || done === p.total) {
            shown = done;
            io.stderr(`${g.json ? JSON.stringify({ type: 'progress', ...p }) : `migrate-store: ${done}/${p.total} jobs (${p.copied} copied, ${p.skipped} already there)`}\n`);
          }
        },
      });
      if (!report.verified) setExitCode(1);
      write(io, g, report, () => describe(report));
    });
}

function describe(r: MigrateReport): string {
  const rows = Object.entries(r.counts).map(([t, c]) => [t, String(c.source), String(c.target), c.source === c.target ? 'ok' : 'DIFFERENT']);
  return [
    `Copied ${r.copied} job(s) into ${r.to.replace(/\/\/[^@]*@/, '//')} (${r.skipped} already there, ${r.total} on the source).`,
    table(['table', 'source rows', 'target rows', ''], rows),
    r.verified ? 'Every count agrees.' : 'Some counts differ: the target holds rows the source does not, or the copy was changed meanwhile.',
  ].join('\n');
}
