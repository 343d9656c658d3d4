/**
 * `spool doctor [--db …] [--repair] [--json]`: check a database file (SQLite's integrity check,
 * every job's rows, the figures the jobs table keeps), and with `--repair` quarantine the damaged
 * jobs and rebuild the indexes. It never deletes history. Exit code 1 when anything was found.
 *
 * @example
 * spool doctor
 * spool --db ./spool.db doctor --repair --json
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { checkDatabase, doctor, type DoctorReport } from '../../persistence/drivers/better-sqlite3/doctor.ts';
import type { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import { CHECK } from '../../persistence/sql/faults.ts';
import { DatabaseDamagedError } from '../base/errors.ts';
import { DatabaseError, UsageError } from './errors.ts';
import { isPostgresUrl } from '../../persistence/openStore.ts';
import { keyValues, table } from './format.ts';
import { examples } from './globals.ts';

/** What the doctor command needs from main.ts. */
export interface DoctorCommandHost {
  stdout: (text: string) => void;
  cwd: string;
  /** A command that finished its output but found damage reports exit code 1 here. */
  setExitCode: (code: number) => void;
}

/** Add the `doctor` command to `program`. */
export function addDoctorCommand(program: Command, host: DoctorCommandHost): void {
  program
    .command('doctor')
    .description('check the database file for damage (integrity, unreadable rows, figures that disagree); --repair quarantines what is damaged')
    .addHelpText('after', examples('spool doctor', 'spool --db ./spool.db doctor --repair --json'))
    .option('--repair', 'quarantine the damaged jobs and rebuild the indexes (never deletes history)')
    .option('--quick', 'only the cheap part: quick_check and the jobs table')
    .action((options: { repair?: boolean; quick?: boolean }, command: Command) => {
      const g = command.optsWithGlobals<{ db: string; json?: boolean }>();
      if (isPostgresUrl(g.db)) {
        throw new UsageError('spool doctor checks a SQLite file; a Postgres database is checked with the server\'s own tools (amcheck, pg_dump). Nothing was changed.');
      }
      const path = resolve(host.cwd, g.db);
      if (!existsSync(path)) throw new DatabaseError(`No Spool database at ${g.db}; pass --db <file>.`, { db: g.db });
      const report = doctor(path, { repair: options.repair === true, quick: options.quick === true });
      host.stdout(g.json ? `${JSON.stringify({ ...report, path: g.db }, null, 2)}\n` : `${describe(report, g.db)}\n`);
      // Damage that every finding's job is held back for (quarantined) needs nothing more of doctor.
      if (report.unheld > 0) host.setExitCode(1);
    });
}

/**
 * The cheap part of the doctor, run by `spool worker` before it opens its runtime: SQLite's
 * `quick_check` and the jobs table's columns. Damage to the file itself stops the worker with
 * {@link DatabaseDamagedError} (and the way out); damaged job rows are told through `say` and only
 * those jobs are held back (each is quarantined when read); nothing found says nothing.
 */
export function checkAtStart(store: SqliteStore, label: string, say: (json: Record<string, unknown>, human: string) => void): DoctorReport {
  const report = checkDatabase(store.db, store.path, { quick: true });
  const damage = report.findings.filter((f) => f.kind === 'integrity');
  if (damage.length > 0) {
    const found = damage.slice(0, 3).map((f) => f.message).join('; ');
    throw new DatabaseDamagedError(`The database file ${label} is damaged (${report.check} found ${damage.length} problem${damage.length === 1 ? '' : 's'}: ${found}). ${CHECK}`, {
      path: store.path,
      findings: damage.length,
    });
  }
  if (!report.ok) {
    const jobs = [...new Set(report.findings.map((f) => f.jobId ?? '-'))];
    say(
      { type: 'worker.check', check: report.check, ok: false, findings: report.findings },
      `spool worker: ${report.check} of ${label}: ${report.findings.length} damaged job row(s) (${jobs.join(', ')}); those jobs are held back, the others run. \`spool --db ${label} doctor\` says more.`,
    );
  }
  return report;
}

/** The report as a person reads it. */
function describe(report: DoctorReport, label: string): string {
  const lines = [
    keyValues([
      ['database', label],
      ['check', report.check],
      ['jobs', `${report.jobs} read`],
      ['found', report.ok ? 'nothing: the file is healthy' : `${report.findings.length} problem${report.findings.length === 1 ? '' : 's'}`],
    ]),
  ];
  if (!report.ok) {
    lines.push('', table(['KIND', 'WHERE', 'JOB', 'PROBLEM'], report.findings.map((f) => [f.kind, f.column ? `${f.table}.${f.column}` : f.table, f.jobId ?? '-', f.message])));
  }
  if (report.repaired) {
    const q = report.repaired.quarantined;
    lines.push(
      '',
      keyValues([
        ['quarantined', q.length ? `${q.length} job${q.length === 1 ? '' : 's'}: ${q.join(', ')}` : 'none (already held back, or no job to name)'],
        ['indexes', report.repaired.reindexed ? 'rebuilt' : 'could not be rebuilt: restore a backup'],
        ['history', 'kept as it was (doctor deletes nothing)'],
      ]),
    );
  }
  if (report.unheld > 0 && !report.repaired) {
    lines.push('', `Run \`spool --db ${label} doctor --repair\` to hold the damaged jobs back and rebuild the indexes, or restore a backup.`);
  }
  if (report.held.length > 0) {
    const all = report.unheld === 0 ? 'every problem found belongs to a job ' : '';
    lines.push('', `${all}held back for damage (quarantined): ${report.held.join(', ')}. End each with \`spool --db ${label} purge <job>\`, or restore a backup.`);
  }
  return lines.join('\n');
}
