/**
 * `spool show <job> --watch` as a real child process, while another process (this one: `spool
 * start` and `spool send` in process through `main()`) moves the job: it prints the job, then each
 * commit as it is made, and exits 0 by itself when the job ends. Every wait is on the child's
 * output or exit, never on the clock.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Resources } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { spawnSpool } from './helpers/spoolCli.ts';

const res = new Resources();
afterEach(() => res.dispose());

async function send(db: string, dir: string, ...args: string[]): Promise<void> {
  const run = await runCli(['--db', db, 'send', ...args], dir);
  expect(run.code, run.stderr).toBe(0);
}

describe('spool show --watch', () => {
  it("prints the job, then each commit another process makes, and exits 0 when the job ends", async () => {
    const dir = res.tempDir();
    const db = join(dir, 'spool.db');
    const started = await runCli(['--db', db, 'start', 'job-lifecycle', '--id', 'w1', '--input', '{"name":"watched"}'], dir);
    expect(started.code, started.stderr).toBe(0);
    const watch = spawnSpool(['--db', db, 'show', 'w1', '--watch'], dir);
    await watch.until(/watching w1:/);
    expect(watch.output().stdout).toMatch(/^state +queued$/m); // the show view first
    await send(db, dir, 'w1', 'START');
    await watch.until(/w1 \(job-lifecycle\) rev 2 {2}START applied: queued -> processing/);
    await send(db, dir, 'w1', '{"type":"PROGRESS","percent":50}');
    await watch.until(/rev 3 {2}PROGRESS applied: processing -> processing/);
    await send(db, dir, 'w1', 'FINISH');
    expect(await watch.exited).toBe(0);
    const { stdout } = watch.output();
    expect(stdout).toMatch(/w1 has ended:\nstatus +done \(final\)\nstate +completed/);
    // Each commit once, in order.
    expect([...stdout.matchAll(/ rev (\d+) {2}/g)].map((m) => Number(m[1]))).toEqual([2, 3, 4]);
  });

  it('--json: the details, one record a line, then the end; a job already ended prints and exits at once', async () => {
    const dir = res.tempDir();
    const db = join(dir, 'spool.db');
    expect((await runCli(['--db', db, 'start', 'job-lifecycle', '--id', 'j1', '--input', '{"name":"j"}'], dir)).code).toBe(0);
    const watch = spawnSpool(['--db', db, '--json', 'show', 'j1', '--watch'], dir);
    await watch.until(/"type":"details"/);
    await send(db, dir, 'j1', 'CANCEL');
    expect(await watch.exited).toBe(0);
    const lines = watch.output().stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; revision?: number; eventType?: string; job?: { final: boolean } });
    expect(lines.map((l) => l.type)).toEqual(['details', 'record', 'ended']);
    expect(lines[1]).toMatchObject({ revision: 2, eventType: 'CANCEL' });
    expect(lines[2]?.job?.final).toBe(true);

    const again = await runCli(['--db', db, 'show', 'j1', '--watch'], dir);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/j1 has ended:\nstatus +done \(final\)/);
    expect(again.stdout).not.toContain('watching');
  });

  it('stops on Ctrl-C with exit 0, and a missing job is an error', async () => {
    const dir = res.tempDir();
    const db = join(dir, 'spool.db');
    expect((await runCli(['--db', db, 'start', 'job-lifecycle', '--id', 's1', '--input', '{"name":"s"}'], dir)).code).toBe(0);
    const watch = spawnSpool(['--db', db, 'show', 's1', '--watch'], dir);
    await watch.until(/watching s1:/);
    watch.child.kill('SIGINT');
    expect(await watch.exited).toBe(0);
    const missing = await runCli(['--db', db, 'show', 'nope', '--watch'], dir);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^spool: SPOOL_NOT_FOUND: /);
  });
});
