/**
 * `spool tail`: a child process follows the commits other processes make to the file, from now
 * (or `--from-start`), filtered, one JSON line each, and stops on SIGINT with exit 0. Every wait
 * is on the child's output or exit. On the postgres project the same, on a Postgres database
 * (`spool --db postgres://... tail`).
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { Resources } from './helpers/resources.ts';
import { SPOOL_BIN } from './helpers/spoolCli.ts';
import { dbArgFor } from './helpers/stores.ts';

const res = new Resources();
afterEach(() => res.dispose());

/** Start `spool --db <db> --json tail ...args`; `lines(n)` resolves with its first n JSON lines. */
function tail(db: string, cwd: string, args: readonly string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, [SPOOL_BIN, '--db', db, '--json', 'tail', ...args], { cwd, env });
  let out = '';
  let stderr = '';
  const waiting: (() => void)[] = [];
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    out += c;
    for (const w of waiting.splice(0)) w();
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
    for (const w of waiting.splice(0)) w();
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const parsed = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { jobId: string; revision: number; eventType: string });
  const lines = async (n: number) => {
    while (parsed().length < n) {
      if (child.exitCode !== null) throw new Error(`tail exited: ${stderr}`);
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
    return parsed();
  };
  /** Resolves once the tail has found where it follows from (its first line on stderr). */
  const ready = async () => {
    while (!stderr.includes('spool tail: following')) {
      if (child.exitCode !== null) throw new Error(`tail exited: ${stderr}`);
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };
  return { child, exited, lines, ready };
}

describe('spool tail', () => {
  it("follows other processes' commits from now, filtered; --from-start replays the earlier ones first", async () => {
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    const runtime = await res.runtime({ store: await res.sqlite(db), machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'before' }, { jobId: 'before' });
    const now = tail(await dbArgFor(db), dir, ['--machine', 'job-lifecycle']);
    const all = tail(await dbArgFor(db), dir, ['--from-start', '--kind', 'started']);
    expect((await all.lines(1)).map((l) => l.jobId)).toEqual(['before']);
    // The "from now" tail has found the newest commit (before's): it shows none of what came before.
    await now.ready();
    await runtime.start('job-lifecycle', { name: 'after' }, { jobId: 'after' });
    await runtime.send('after', { type: 'START' });
    const seen = await now.lines(2);
    expect(seen.map((l) => [l.jobId, l.revision, l.eventType])).toEqual([
      ['after', 1, 'xstate.init'],
      ['after', 2, 'START'],
    ]);
    expect((await all.lines(2)).map((l) => l.jobId)).toEqual(['before', 'after']);
    for (const t of [now, all]) {
      t.child.kill('SIGINT');
      expect(await t.exited).toBe(0);
    }
  });

  it('--job and --machine filter together: only that job of that machine, and a job under another machine id shows nothing', async () => {
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    const runtime = await res.runtime({ store: await res.sqlite(db), machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
    await runtime.start('job-lifecycle', { name: 'b' }, { jobId: 'b' });
    const url = await dbArgFor(db);
    const both = tail(url, dir, ['--from-start', '--job', 'a', '--machine', 'job-lifecycle']);
    const byJob = tail(url, dir, ['--from-start', '--job', 'b']);
    const wrongMachine = tail(url, dir, ['--from-start', '--job', 'a', '--machine', 'approval-flow']);
    const allOfMachine = tail(url, dir, ['--from-start', '--machine', 'job-lifecycle']);
    await Promise.all([both.ready(), wrongMachine.ready()]);
    // b moves first, then a: a leak of b into a's tail would come before a's second line.
    await runtime.send('b', { type: 'START' });
    await runtime.send('a', { type: 'START' });
    expect((await both.lines(2)).map((l) => [l.jobId, l.revision])).toEqual([
      ['a', 1],
      ['a', 2],
    ]);
    expect((await byJob.lines(2)).map((l) => [l.jobId, l.revision])).toEqual([
      ['b', 1],
      ['b', 2],
    ]);
    // Every commit reaches the machine-wide tail; whatever the wrong-machine tail read by then had to be empty.
    expect((await allOfMachine.lines(4)).map((l) => `${l.jobId}${l.revision}`)).toEqual(['a1', 'b1', 'b2', 'a2']);
    for (const t of [both, byJob, wrongMachine, allOfMachine]) {
      t.child.kill('SIGINT');
      expect(await t.exited).toBe(0);
    }
    expect(await wrongMachine.lines(0)).toEqual([]);
  });
});
