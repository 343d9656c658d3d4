/**
 * `spool migrate-store --from spool.db --to postgres://…`, run as a user runs it (bin/spool.js in
 * child processes) against a real SQLite file and a real Postgres database: it refuses while a
 * worker holds leases on the source (copying nothing); killed midway (SIGKILL, in a child
 * process) and run again it finishes the copy without doubling anything; the counts agree and
 * every job reads back through the Postgres store's port as it reads through SQLite's.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, type Runtime } from '../src/index.ts';
import { approvalFlow, exportJob, jobLifecycle } from '../machines/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { Resources } from './helpers/resources.ts';
import { runSpool, SPOOL_BIN } from './helpers/spoolCli.ts';

const JOBS = 300;
const res = new Resources();
let file: string;
let target: { url: string; drop: () => Promise<void> };
const machines = [jobLifecycle, exportJob, approvalFlow];

/** A source store with finished and waiting jobs: history, inbox, effects and attempts, timers, a schedule. */
async function fill(runtime: Runtime): Promise<void> {
  for (let i = 0; i < JOBS; i += 30) {
    await Promise.all(
      Array.from({ length: 30 }, async (_, k) => {
        const n = i + k;
        if (n % 3 === 0) await runtime.start('approval-flow', { subject: `s${n}`, remindAfterMs: 60_000, deadlineMs: 600_000 }, { jobId: `a-${n}` });
        // e-1's first attempt fails and is retried: an effect_attempts row (a latest attempt is on its effect row).
        else if (n % 3 === 1) await runtime.start('export-job', { dataset: `d${n}`, rows: 2, flakyAttempts: n === 1 ? 1 : 0 }, { jobId: `e-${n}` });
        else {
          await runtime.start('job-lifecycle', { name: `j${n}`, items: 1 }, { jobId: `l-${n}` });
          await runtime.send(`l-${n}`, { type: 'CANCEL' }).catch(() => undefined);
        }
      }),
    );
  }
  await runtime.waitFor('e-1', (job) => job.final);
  // An event accepted and still waiting (its job suspended): an inbox row whatever the timing of
  // the sends above (an event applied in the commit that accepts it is recorded by history alone).
  await runtime.suspend('a-0', 'held for the copy');
  await runtime.send('a-0', { type: 'CANCEL', reason: 'waits while suspended' });
  await runtime.schedule({ id: 'nightly', machineId: 'export-job', input: { dataset: 'nightly', rows: 1 }, cron: '0 3 * * *', overlap: 'allow-all', catchUp: 'skip-missed' });
}

beforeAll(async () => {
  file = join(res.tempDir(), 'spool.db');
  const runtime = await createRuntime({ store: await SqliteStore.open(file), machines });
  await fill(runtime);
  await runtime.close();
  target = await freshDatabase();
}, 120_000);
afterAll(async () => {
  await target?.drop();
  res.dispose();
});

/** Run migrate-store in a child process; kill it with SIGKILL once a progress line shows `killAt` jobs done. */
function migrate(killAt?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; progress: { copied: number; skipped: number; total: number }[] }> {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SPOOL_BIN, '--json', 'migrate-store', '--from', file, '--to', target.url], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const progress: { copied: number; skipped: number; total: number }[] = [];
    let stdout = '';
    let buf = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        const p = JSON.parse(line) as { copied: number; skipped: number; total: number };
        progress.push(p);
        if (killAt !== undefined && p.copied + p.skipped >= killAt) child.kill('SIGKILL');
      }
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, progress }));
  });
}

describe('spool migrate-store (SQLite file → Postgres)', () => {
  it('refuses while a worker holds leases on the source, and copies nothing', async () => {
    // A worker's claim of an activity leases its job (as a running `spool worker` holds it).
    const starter = await createRuntime({ store: await SqliteStore.open(file), machines, runEffects: false });
    await starter.start('export-job', { dataset: 'leased', rows: 1 }, { jobId: 'leased' });
    await starter.close();
    const store = await SqliteStore.open(file);
    try {
      const [effect] = await store.listEffects('leased');
      const now = Date.now();
      expect(await store.claimEffect(effect!.id, 'worker-elsewhere', now, now + 600_000)).toBeDefined();
      expect(await store.leaseHolders(now)).toEqual(['worker-elsewhere']);
      const run = await runSpool(['--json', 'migrate-store', '--from', file, '--to', target.url], process.cwd());
      expect(run.code).not.toBe(0);
      expect(JSON.parse(run.stderr.trim().split('\n').at(-1)!)).toMatchObject({ code: 'SPOOL_INVALID', holders: ['worker-elsewhere'] });
      expect(run.stderr).toContain('hold leases');
    } finally {
      // The worker stops: its leases end, and the copy may run.
      await store.releaseLeases('worker-elsewhere', 'all');
      await store.close();
    }
    const pg = await PostgresStore.open(target.url);
    try {
      expect(await pg.listJobs({ limit: 10 })).toEqual([]);
    } finally {
      await pg.close();
    }
  }, 60_000);

  it('killed midway and run again, copies every row once and verifies the counts', async () => {
    const killed = await migrate(JOBS / 3);
    expect(killed.signal).toBe('SIGKILL');
    const last = killed.progress.at(-1)!;
    expect(last.copied).toBeGreaterThan(0);
    expect(last.copied).toBeLessThan(JOBS);

    const again = await migrate();
    expect(again.code).toBe(0);
    const report = JSON.parse(again.stdout) as { copied: number; skipped: number; total: number; verified: boolean; counts: Record<string, { source: number; target: number }> };
    expect(report.verified).toBe(true);
    expect(report.total).toBe(JOBS + 1); // and the leased one of the first test
    expect(report.skipped).toBeGreaterThanOrEqual(last.copied);
    expect(report.copied + report.skipped).toBe(report.total);
    for (const table of ['jobs', 'transitions', 'inbox', 'effects', 'effect_attempts', 'timers', 'schedules']) expect(report.counts[table]!.source, table).toBeGreaterThan(0);
    for (const [table, c] of Object.entries(report.counts)) expect(c.target, table).toBe(c.source);
  }, 120_000);

  it('reads back through the Postgres port as through the SQLite port', async () => {
    const from = await SqliteStore.open(file);
    const to = await PostgresStore.open(target.url);
    try {
      for (const id of ['a-3', 'e-4', 'l-5', `a-${JOBS - 3}`]) {
        expect(await to.getJob(id), id).toEqual(await from.getJob(id));
        expect(await to.history(id)).toEqual(await from.history(id));
        expect(await to.listEvents(id)).toEqual(await from.listEvents(id));
        expect(await to.listEffects(id)).toEqual(await from.listEffects(id));
        expect(await to.listAttempts(id)).toEqual(await from.listAttempts(id));
        expect(await to.listTimers(id)).toEqual(await from.listTimers(id));
      }
      expect(await to.listSchedules({})).toEqual(await from.listSchedules({}));
    } finally {
      await from.close();
      await to.close();
    }
  }, 60_000);
});
