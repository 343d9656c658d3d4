/**
 * `spool doctor`: check a Spool SQLite file, and with `repair` quarantine what is damaged and
 * rebuild its indexes. It never deletes anything: history stays as it is, for a person to read.
 *
 * The checks, cheapest first:
 * 1. SQLite's own: `PRAGMA quick_check` (`quick`) or `PRAGMA integrity_check` (pages, indexes).
 * 2. Every JSON column of every table parses (`json_valid`), each failure named by table, column
 *    and job.
 * 3. The figures the jobs table keeps agree with the records they summarise: its revision with
 *    its history (one row per revision, 1 to revision), its status and state value with its snapshot.
 */
import Database from 'better-sqlite3';
import { storageFault } from './storageFault.ts';
import { DAMAGED_RECORD } from '../../../src/ports/store.ts';
import { damageReason } from '../../sql/records.ts';
import { refuseNonSqliteFile } from './open.ts';
import { isDamage } from '../../../src/runtime/quarantine.ts';

/** One thing found wrong. */
export interface DoctorFinding {
  /** `integrity`: SQLite's check; `record`: a column that does not parse; `derived`: a figure that disagrees with its records. */
  kind: 'integrity' | 'record' | 'derived';
  table: string;
  column?: string;
  /** The job the finding holds back, where known. */
  jobId?: string;
  message: string;
}

/** What `doctor` found, and did. */
export interface DoctorReport {
  path: string;
  /** `quick_check` only (the cheap part), or the full `integrity_check`. */
  check: 'quick_check' | 'integrity_check';
  /** Jobs whose rows were read. */
  jobs: number;
  findings: DoctorFinding[];
  /** With `repair`: the jobs quarantined now, and whether the indexes were rebuilt. */
  repaired: { quarantined: string[]; reindexed: boolean } | null;
  /** True when nothing was found. */
  ok: boolean;
  /** The jobs found damaged that are held back for it (quarantined for damage): each one's way out is `spool purge <job>`. */
  held: string[];
  /** Findings that no such quarantine covers: what still needs `--repair` or a backup (doctor exits 1 for these only). */
  unheld: number;
}

/** Options of {@link doctor}. */
export interface DoctorOptions {
  /** Quarantine the damaged jobs and REINDEX (opens the file for writing). */
  repair?: boolean;
  /** Only the cheap part: `quick_check` and the jobs table's own columns (what a worker runs at start). */
  quick?: boolean;
}

/** Every JSON column, by table, and how a row names its job. */
const JSON_COLUMNS: readonly { table: string; columns: readonly string[]; job: string; from?: string }[] = [
  { table: 'jobs', columns: ['state_value', 'context', 'input', 'snapshot'], job: 'jobs.id' },
  { table: 'transitions', columns: ['payload', 'from_value', 'to_value', 'error'], job: 'transitions.job_id' },
  { table: 'inbox', columns: ['payload', 'error'], job: 'inbox.job_id' },
  { table: 'effects', columns: ['input', 'output', 'error', 'attempt_error'], job: 'effects.job_id' },
  { table: 'effect_attempts', columns: ['error'], job: 'e.job_id', from: 'effect_attempts LEFT JOIN effects e ON e.id = effect_attempts.effect_id' },
  { table: 'timers', columns: ['event'], job: 'timers.job_id' },
  { table: 'assets', columns: ['meta'], job: 'assets.job_id' },
];

/** The jobs table's figures against their records: a row per disagreement. */
const DERIVED: readonly { column: string; sql: string; says: string }[] = [
  {
    column: 'revision',
    sql: `SELECT j.id AS job, j.revision AS kept, count(t.revision) AS n, max(t.revision) AS top FROM jobs j LEFT JOIN transitions t ON t.job_id = j.id
      GROUP BY j.id HAVING n <> j.revision OR top IS NOT j.revision`,
    says: 'the job is at revision {kept}, but its history holds {n} rows up to revision {top}',
  },
  {
    column: 'status',
    sql: `SELECT id AS job, status AS kept, snapshot ->> '$.status' AS top FROM jobs WHERE json_valid(snapshot) AND status IS NOT (snapshot ->> '$.status')`,
    says: 'the status column says {kept}, its snapshot {top}',
  },
  {
    column: 'state_value',
    sql: `SELECT id AS job, state_value AS kept, snapshot -> '$.value' AS top FROM jobs
      WHERE json_valid(snapshot) AND json_valid(state_value) AND json(state_value) IS NOT (snapshot -> '$.value')`,
    says: 'the state_value column says {kept}, its snapshot {top}',
  },
];

/**
 * Check the Spool database at `path` (opened read-only unless `repair`). A file that is not SQLite
 * is refused (NotASpoolDatabaseError); a damaged one SQLite cannot read is one `integrity` finding. Storage faults (a read-only file asked to repair, a
 * busy one) are thrown typed.
 */
export function doctor(path: string, options: DoctorOptions = {}): DoctorReport {
  refuseNonSqliteFile(path);
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: !options.repair, fileMustExist: true, timeout: 5000 });
  } catch (error) {
    throw storageFault(error, { path, call: 'doctor' });
  }
  try {
    return checkDatabase(db, path, options);
  } finally {
    db.close();
  }
}

/** {@link doctor} over an open connection (the worker's cheap check at start uses its own). */
export function checkDatabase(db: Database.Database, path: string, options: DoctorOptions = {}): DoctorReport {
  const check = options.quick ? 'quick_check' : 'integrity_check';
  const findings: DoctorFinding[] = [...sqliteCheck(db, check)];
  const tables = options.quick ? JSON_COLUMNS.slice(0, 1) : JSON_COLUMNS;
  for (const t of tables) findings.push(...guarded(t.table, () => recordFindings(db, t)));
  if (!options.quick) for (const d of DERIVED) findings.push(...guarded('jobs', () => derivedFindings(db, d)));
  const jobs = guarded('jobs', () => [db.prepare('SELECT count(*) FROM jobs').pluck().get() as number])[0];
  const repaired = options.repair ? repair(db, findings) : null;
  const held = heldForDamage(db, findings as DoctorFinding[]);
  const unheld = (findings as DoctorFinding[]).filter((f) => f.jobId === undefined || !held.includes(f.jobId)).length;
  return { path, check, jobs: typeof jobs === 'number' ? jobs : 0, findings, repaired, ok: findings.length === 0, held, unheld };
}

/** The jobs `findings` name that are quarantined for damage (sorted). */
function heldForDamage(db: Database.Database, findings: readonly DoctorFinding[]): string[] {
  const named = [...new Set(findings.flatMap((f) => (f.jobId === undefined ? [] : [f.jobId])))];
  const read = db.prepare('SELECT quarantine FROM jobs WHERE id = ?').pluck();
  return guarded('jobs', () => named.filter((id) => isDamage(String(read.get(id) ?? ''))))
    .filter((id): id is string => typeof id === 'string')
    .sort();
}

/** SQLite's own check of the file (pages, indexes): one `integrity` finding per problem, none when healthy. */
export function sqliteCheck(db: Database.Database, check: 'quick_check' | 'integrity_check'): DoctorFinding[] {
  return guarded('database', () => {
    const lines = db.pragma(check, { simple: false }) as Record<string, string>[];
    return lines
      .map((row) => Object.values(row)[0] ?? '')
      .filter((line) => line !== 'ok')
      .map((line) => ({ kind: 'integrity' as const, table: tableNamed(line), message: line }));
  });
}

/** A check that could not run because SQLite refused to read: the refusal is the finding. */
function guarded<T>(table: string, read: () => T[]): (T | DoctorFinding)[] {
  try {
    return read();
  } catch (error) {
    return [{ kind: 'integrity', table, message: `${table} cannot be read: ${(error as Error).message}` }];
  }
}

function recordFindings(db: Database.Database, t: (typeof JSON_COLUMNS)[number]): DoctorFinding[] {
  const found: DoctorFinding[] = [];
  for (const column of t.columns) {
    const rows = db
      .prepare(`SELECT ${t.job} AS job FROM ${t.from ?? t.table} WHERE ${t.table}.${column} IS NOT NULL AND NOT json_valid(${t.table}.${column})`)
      .all() as { job: string | null }[];
    for (const r of rows) {
      found.push({
        kind: 'record',
        table: t.table,
        column,
        ...(r.job === null ? {} : { jobId: r.job }),
        message: damageReason(t.table, [column]) + (r.job === null ? '' : ` (job ${r.job})`),
      });
    }
  }
  return found;
}

function derivedFindings(db: Database.Database, d: (typeof DERIVED)[number]): DoctorFinding[] {
  return (db.prepare(d.sql).all() as Record<string, unknown>[]).map((r) => ({
    kind: 'derived' as const,
    table: 'jobs',
    column: d.column,
    jobId: String(r['job']),
    message: `job ${String(r['job'])}: ${d.says.replace(/\{(\w+)\}/g, (_m, k: string) => String(r[k]))}`,
  }));
}

/** Quarantine each damaged job (unless it already is) with its first finding, then rebuild the indexes. Deletes nothing. */
function repair(db: Database.Database, findings: readonly (DoctorFinding | unknown)[]): { quarantined: string[]; reindexed: boolean } {
  const byJob = new Map<string, string>();
  for (const f of findings as DoctorFinding[]) {
    if (f.jobId === undefined || byJob.has(f.jobId)) continue;
    byJob.set(f.jobId, f.kind === 'record' ? damageReason(f.table, [f.column ?? '?']) : `${DAMAGED_RECORD}${f.table}.${f.column ?? '?'} disagrees with its records: ${f.message}`);
  }
  const quarantined: string[] = [];
  // A job held back for another reason (its snapshot did not fit) is held for its damage now: its way out is purge.
  const read = db.prepare('SELECT quarantine FROM jobs WHERE id = ?').pluck();
  const set = db.prepare('UPDATE jobs SET quarantine = ? WHERE id = ?');
  db.transaction(() => {
    for (const [id, reason] of byJob) {
      const now = read.get(id);
      if (now === undefined || (typeof now === 'string' && isDamage(now))) continue;
      if (set.run(reason, id).changes === 1) quarantined.push(id);
    }
  }).immediate();
  let reindexed = false;
  try {
    db.exec('REINDEX');
    reindexed = true;
  } catch {
    // A table too damaged to rebuild its indexes from: the finding stays; restore a backup.
  }
  return { quarantined, reindexed };
}

/** The table or index an integrity message names ("row 3 missing from index jobs_status"). */
function tableNamed(line: string): string {
  return /(?:index|table|tree)\s+([A-Za-z_]\w*)/.exec(line)?.[1] ?? 'database';
}
