import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

function packageVersion(name: string): string {
  try {
    const text = readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8');
    return (JSON.parse(text) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function git(args: string[]): string | null {
  try {
    return execFileSync('git', args, { cwd: new URL('..', import.meta.url), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

/** What the figures were measured on: they only mean something beside this. */
export function machineInfo() {
  const db = new Database(':memory:');
  const sqlite = db.prepare('SELECT sqlite_version()').pluck().get() as string;
  db.close();
  const cpus = os.cpus();
  const dirty = git(['status', '--porcelain', '--', 'src', 'persistence', 'machines']);
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    loadavg: os.loadavg().map((n) => Math.round(n * 100) / 100),
    totalMemMiB: Math.round(os.totalmem() / 2 ** 20),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    sqlite,
    betterSqlite3: packageVersion('better-sqlite3'),
    xstate: packageVersion('xstate'),
    zod: packageVersion('zod'),
    tmpdir: os.tmpdir(),
    gitCommit: git(['rev-parse', '--short', 'HEAD']),
    /** Uncommitted changes under src/, persistence/, machines/ when measured. */
    gitDirty: dirty === null ? null : dirty.length > 0,
  };
}
