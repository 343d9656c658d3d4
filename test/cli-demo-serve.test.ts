/**
 * `spool demo` with its dashboard server (what `npm start` does on a terminal): after the jobs it
 * keeps `spool serve` up over the same SQLite file, prints the dashboard's URL and the write
 * token, runs a worker, and stops on Ctrl-C with exit 0. Without a terminal it runs and exits
 * (test/cli.test.ts's demo tests). Every wait is on the child's output or exit.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Job } from '../src/index.ts';
import { main } from '../src/cli/main.ts';
import { Resources } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { spawnSpool } from './helpers/spoolCli.ts';

const res = new Resources();
afterEach(() => res.dispose());

describe('spool demo --serve', () => {
  it('runs the jobs, serves the API and dashboard over the same database with a token for writes, runs a worker, and stops on Ctrl-C', async () => {
    const dir = res.tempDir();
    const demo = spawnSpool(['demo', '--serve', '--port', '0'], dir);
    const out = await demo.until(/Bearer \S+\n[^\n]*Ctrl-C/);
    const url = /^Dashboard: (http:\/\/127\.0\.0\.1:\d+)\/#token=/m.exec(out)?.[1];
    const token = /Authorization: Bearer (\S+)/.exec(out)?.[1];
    expect(url, out).toBeDefined();
    // The full address, token and all, before the jobs run (the server listens first), and again after.
    const addresses = [...out.matchAll(/^Dashboard: (\S+)/gm)].map((m) => [m[1], m.index]);
    expect(addresses.map(([a]) => a)).toEqual([`${url}/#token=${encodeURIComponent(token!)}`, `${url}/#token=${encodeURIComponent(token!)}`]);
    expect(addresses[0]![1]).toBeLessThan(out.search(/START\s+queued -> processing/));
    expect(out).toMatch(/START\s+queued -> processing/);
    const listed = (await (await fetch(`${url}/api/jobs`)).json()) as { jobs: Job[] };
    expect(listed.jobs).toHaveLength(8);
    expect(listed.jobs.every((j) => j.final)).toBe(true);
    // Writes need the printed token; with it, a job started from outside runs on this server's worker.
    const body = JSON.stringify({ input: { name: 'from-api', items: 1, autoStart: true }, jobId: 'from-api' });
    expect((await fetch(`${url}/api/machines/retrying-job/jobs`, { method: 'POST', body, headers: { 'content-type': 'application/json' } })).status).toBe(401);
    const started = await fetch(`${url}/api/machines/retrying-job/jobs`, { method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } });
    expect(started.status, await started.clone().text()).toBe(201);
    const stream = await fetch(`${url}/api/jobs/from-api/stream`);
    expect(stream.status).toBe(200);
    await stream.text(); // a job's stream closes after its final event: the worker ran it to its end
    const job = (await (await fetch(`${url}/api/jobs/from-api`)).json()) as { job: Job };
    expect(job.job).toMatchObject({ final: true, value: 'completed' });
    demo.child.kill('SIGINT');
    expect(await demo.exited).toBe(0);
    // The same default ./spool.db, readable by the next command.
    const after = await runCli(['list', '--json'], dir);
    expect((JSON.parse(after.stdout) as Job[]).map((j) => j.id)).toContain('from-api');
  });

  it('falls back to a free port when the default one is taken, and refuses a taken port that was asked for', async () => {
    // Hold 7420 (or find it held already by someone else: the same case).
    const holder = createServer();
    await new Promise<void>((resolve) => holder.once('error', () => resolve()).listen(7420, '127.0.0.1', () => resolve()));
    try {
      const dir = res.tempDir();
      const demo = spawnSpool(['demo', '--serve'], dir);
      const out = await demo.until(/^Dashboard: http:\/\/127\.0\.0\.1:\d+\/#token=\S+$/m);
      expect(out).not.toMatch(/^Dashboard: http:\/\/127\.0\.0\.1:7420\//m);
      demo.child.kill('SIGINT');
      expect(await demo.exited).toBe(0);
      const asked = await runCli(['--db', join(dir, 'z.db'), 'demo', '--serve', '--port', '7420'], dir);
      expect(asked.code).toBe(1);
      expect(asked.stderr).toMatch(/^spool: SPOOL_USAGE: Port 7420 on 127\.0\.0\.1 is in use/);
      expect(asked.stdout).toBe(''); // refused before the demo ran a job
      const after = await runCli(['--db', join(dir, 'z.db'), 'list', '--json'], dir);
      expect(JSON.parse(after.stdout)).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => (holder.listening ? holder.close(() => resolve()) : resolve()));
    }
  });

  it('--no-serve runs the jobs and exits even on a terminal; without a terminal that is the default', async () => {
    const dir = res.tempDir();
    let stdout = '';
    const code = await main(['--db', join(dir, 'x.db'), 'demo', '--no-serve'], { stdout: (t) => (stdout += t), stderr: (t) => (stdout += t), cwd: dir, interactive: true });
    expect(code, stdout).toBe(0);
    expect(stdout).toContain('Look around:');
    expect(stdout).not.toContain('Dashboard:');
    // Not a terminal (the bin's stdout into a pipe; test/cli.test.ts runs `npm start`'s demo so).
    const piped = await runCli(['--db', join(dir, 'y.db'), 'demo'], dir, { interactive: false });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stdout).not.toContain('Dashboard:');
  });
});
