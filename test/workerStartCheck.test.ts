/**
 * `spool worker` runs the cheap doctor check (`quick_check`, the jobs table) before it opens its
 * runtime: a damaged page stops it with the typed error and the way out, before recovery touches
 * anything; damaged job rows are told, and only those jobs are held back.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { checkAtStart } from '../src/cli/doctor.ts';
import { main } from '../src/cli/main.ts';
import { DatabaseDamagedError } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
afterEach(() => res.dispose());

async function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), cwd: process.cwd() });
  return { code, stdout, stderr };
}

/** A Spool database whose first page of `what` (by default the jobs table's first index) is overwritten with `bytes`. */
async function damagedFile(what = "type = 'index' AND tbl_name = 'jobs'", bytes?: Buffer): Promise<string> {
  const path = res.dbPath();
  await (await res.sqlite(path)).close();
  const raw = res.raw(path);
  const root = raw.prepare(`SELECT rootpage FROM sqlite_master WHERE ${what} ORDER BY rootpage`).pluck().get() as number;
  const pageSize = raw.pragma('page_size', { simple: true }) as number;
  raw.pragma('wal_checkpoint(TRUNCATE)');
  raw.close();
  const fd = openSync(path, 'r+');
  writeSync(fd, bytes ?? Buffer.alloc(pageSize, 0xab), 0, pageSize, (root - 1) * pageSize);
  closeSync(fd);
  return path;
}

describe('the worker check at start', () => {
  it('a damaged page stops `spool worker` with SPOOL_DATABASE_DAMAGED and how to check and restore', async () => {
    const path = await damagedFile();
    const out = await run(['--db', path, '--json', 'worker']);
    expect(out.code).not.toBe(0);
    expect(out.stdout).not.toContain('worker.ready');
    const said = out.stdout + out.stderr;
    expect(said).toContain('SPOOL_DATABASE_DAMAGED');
    expect(said).toContain('spool doctor');
    expect(said).toContain('quick_check found'); // the check at start said it, before the runtime opened
  });

  it('damaged job rows are told, not thrown (only those jobs are held back); a healthy file says nothing', async () => {
    const path = res.dbPath();
    const store = await res.sqlite(path);
    const told: string[] = [];
    expect(checkAtStart(store, 'spool.db', (_json, human) => told.push(human)).ok).toBe(true);
    expect(told).toEqual([]);
    const runtime = await res.runtime({ store, machines: [jobLifecycle], processEvents: false });
    await runtime.start('job-lifecycle', { name: 'b' }, { jobId: 'bad' });
    const raw = new Database(path);
    raw.prepare(`UPDATE jobs SET state_value = '{not json' WHERE id = 'bad'`).run();
    raw.close();
    const report = checkAtStart(store, 'spool.db', (_json, human) => told.push(human));
    expect(report.findings).toContainEqual(expect.objectContaining({ kind: 'record', table: 'jobs', column: 'state_value', jobId: 'bad' }));
    expect(told).toHaveLength(1);
    expect(told[0]).toMatch(/1 damaged job row\(s\) \(bad\); those jobs are held back/);
  });

  it('a damaged page refuses the first write of any command (`spool start`) with SPOOL_DATABASE_DAMAGED naming doctor', async () => {
    // Random bytes over a page `start` never reads (the assets table's): only a check of the file finds them.
    const path = await damagedFile("type = 'table' AND name = 'assets'", randomBytes(65536));
    const before = readFileSync(path);
    const out = await run(['--db', path, 'start', 'job-lifecycle', '--input', '{"name":"after-damage"}']);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/^spool: SPOOL_DATABASE_DAMAGED: .*quick_check found .*writes to it are refused.*spool doctor/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('throws the typed error on damage to the file itself', async () => {
    const path = await damagedFile();
    const store = await res.sqlite(path);
    expect(() => checkAtStart(store, 'x.db', () => undefined)).toThrow(DatabaseDamagedError);
  });
});
