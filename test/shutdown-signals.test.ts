/**
 * `spool worker` shutting down under load, as a real child process: the first SIGTERM lets running
 * activities finish within --grace-ms and exits 0 with their outcomes recorded; a second signal
 * while an activity still runs exits at once (143 for SIGTERM, 130 for SIGINT) with one line
 * saying so, and a fresh runtime on the same file takes the attempt over and finishes the job:
 * nothing accepted is lost. Also `worker --concurrency` and `--activity-concurrency`, and a job the worker holds (its
 * lease) seen from other processes: `spool send` leaves the event to the holder. The activities in the child wait
 * until the test sends SIGUSR2 and return the most attempts they saw running at once; every wait
 * is on the child's output or exit, never on time.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { createRuntime } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';
import { SPOOL_BIN, runSpool } from './helpers/spoolCli.ts';

/** The machines module the worker loads: `work` waits until the process gets SIGUSR2 (or is aborted). */
const MODULE_SOURCE = `import { fromPromise, setup } from 'xstate';
const waiting = new Set<() => void>();
let released = false;
/** Attempts running now in this process, and the most seen at once: each attempt returns it. */
let running = 0;
let most = 0;
process.on('SIGUSR2', () => {
  released = true;
  for (const resolve of waiting) resolve();
  waiting.clear();
});
export const slow = setup({
  actors: {
    work: fromPromise(async ({ signal }) => {
      running += 1;
      most = Math.max(most, running);
      try {
        if (!released) {
          await new Promise<void>((resolve, reject) => {
            waiting.add(resolve);
            signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
          });
        }
        return { most };
      } finally {
        running -= 1;
      }
    }),
  },
}).createMachine({
  id: 'slow',
  initial: 'working',
  on: { PING: { actions: () => undefined } },
  states: { working: { invoke: { id: 'work', src: 'work', onDone: 'done' } }, done: { type: 'final' } },
});
`;

/** The same machine in this process, with an activity that finishes at once. */
const slowHere = setup({ actors: { work: fromPromise(async () => 'worked') } }).createMachine({
  id: 'slow',
  initial: 'working',
  on: { PING: { actions: () => undefined } },
  states: { working: { invoke: { id: 'work', src: 'work', onDone: 'done' } }, done: { type: 'final' } },
});

const res = new Resources();
const children: ChildProcessWithoutNullStreams[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await res.dispose();
});

type Line = Record<string, unknown>;

/** `spool worker --json` as a child: its stdout lines parsed, its stderr collected; waits are on them. */
function worker(db: string, module: string, extra: string[] = []) {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, [SPOOL_BIN, '--db', db, '--machines', module, '--json', 'worker', '--poll-ms', '20', '--grace-ms', '600000', ...extra], {
    cwd: res.tempDir(),
    env,
  });
  children.push(child);
  const lines: Line[] = [];
  let stderr = '';
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());
  let buffer = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    for (let i = buffer.indexOf('\n'); i >= 0; i = buffer.indexOf('\n')) {
      lines.push(JSON.parse(buffer.slice(0, i)) as Line);
      buffer = buffer.slice(i + 1);
    }
    notify();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    notify();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let exited = false;
  void exit.then(() => {
    exited = true;
    notify();
  });
  /** Resolve when `predicate` holds over what the child printed so far; reject if it exits first. */
  const until = (what: string, predicate: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (predicate()) {
          waiters.delete(check);
          resolve();
        } else if (exited) {
          waiters.delete(check);
          reject(new Error(`worker exited before ${what}; stderr:\n${stderr}`));
        }
      };
      waiters.add(check);
      check();
    });
  return { child, lines, stderr: () => stderr, exit, until };
}

/** A database with `ids` started (their activities recorded, not run), and the worker's module. */
async function prepare(ids: string[]): Promise<{ db: string; module: string }> {
  const dir = res.tempDir();
  const module = join(dir, 'slow.ts');
  writeFileSync(module, MODULE_SOURCE);
  const db = join(dir, 'spool.db');
  const runtime = await createRuntime({ store: await res.sqlite(db), machines: [slowHere], runEffects: false });
  for (const id of ids) await runtime.start('slow', {}, { jobId: id });
  await runtime.close();
  return { db, module };
}

const startedCount = (lines: Line[]) => lines.filter((l) => l['type'] === 'activity.started').length;

describe('spool worker shutdown under load', () => {
  it('first SIGTERM: running activities finish within the grace period, their outcomes are recorded, exit 0', async () => {
    const { db, module } = await prepare(['s1', 's2']);
    const w = worker(db, module);
    await w.until('both activities started', () => startedCount(w.lines) === 2);

    w.child.kill('SIGTERM');
    await w.until('the graceful stop line', () => w.stderr().includes('SIGTERM: claiming no new work'));
    w.child.kill('SIGUSR2'); // the activities may finish now
    expect(await w.exit).toEqual({ code: 0, signal: null });
    expect(w.stderr().trimEnd().split('\n')).toHaveLength(1);
    expect(w.lines.filter((l) => l['type'] === 'activity.finished').map((l) => [l['jobId'], l['outcome']]).sort()).toEqual([
      ['s1', 'succeeded'],
      ['s2', 'succeeded'],
    ]);

    const after = await createRuntime({ store: await res.sqlite(db), machines: [slowHere], runEffects: false });
    for (const id of ['s1', 's2']) {
      const details = await after.details(id);
      expect(details.job.value).toBe('done');
      expect(details.attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'succeeded']]);
    }
    await after.close();
  });

  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const)('a second %s while an activity runs exits at once with %i; a fresh runtime takes the attempt over and finishes the job', async (signal, code) => {
    const { db, module } = await prepare(['s3']);
    const w = worker(db, module);
    await w.until('the activity started', () => startedCount(w.lines) === 1);

    w.child.kill(signal);
    await w.until('the graceful stop line', () => w.stderr().includes(`${signal}: claiming no new work`));
    w.child.kill(signal); // the grace period is 10 minutes: only the second signal can end it now
    expect(await w.exit).toEqual({ code, signal: null });
    const stderr = w.stderr().trimEnd().split('\n');
    expect(stderr).toHaveLength(2);
    expect(stderr[1]).toBe(
      `spool worker: second ${signal}: exiting now with code ${code}, without waiting for running activities; the next worker takes them over`,
    );
    expect(w.lines.filter((l) => l['type'] === 'activity.finished')).toEqual([]);

    // Nothing accepted is lost: the attempt is still claimed by the dead process; a fresh runtime
    // on this host sees its runner gone, takes it over at once and finishes the job.
    const runtime = await createRuntime({ store: await res.sqlite(db), machines: [slowHere] });
    expect((await runtime.details('s3')).attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'running']]);
    await runtime.tick();
    expect((await runtime.waitFor('s3', (j) => j.final)).value).toBe('done');
    expect((await runtime.details('s3')).attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'succeeded'],
    ]);
    await runtime.close();
  });
});

describe('spool worker --concurrency and --activity-concurrency', () => {
  it('runs one attempt of the named activity at a time; the other waits in the database and runs next', async () => {
    const { db, module } = await prepare(['s4', 's5']);
    const w = worker(db, module, ['--activity-concurrency', 'work=1']);
    await w.until('one activity started', () => startedCount(w.lines) === 1);
    w.child.kill('SIGUSR2'); // let every attempt finish from now on
    const finished = (l: Line) => l['type'] === 'activity.finished';
    await w.until('both finished', () => w.lines.filter(finished).length === 2);
    expect(w.lines.filter((l) => l['type'] === 'activity.started').map((l) => l['jobId'])).toEqual(['s4', 's5']);
    w.child.kill('SIGTERM');
    expect(await w.exit).toEqual({ code: 0, signal: null });

    const after = await createRuntime({ store: await res.sqlite(db), machines: [slowHere], runEffects: false });
    for (const id of ['s4', 's5']) {
      const details = await after.details(id);
      expect(details.job.value).toBe('done');
      expect(details.effects.map((e) => e.output)).toEqual([{ most: 1 }]); // never two at once
    }
    await after.close();
  });

  it('--concurrency 1: one activity at a time in all; the other waits in the database and runs next', async () => {
    const { db, module } = await prepare(['s7', 's8']);
    const w = worker(db, module, ['--concurrency', '1', '--synchronous', 'NORMAL']);
    await w.until('one activity started', () => startedCount(w.lines) === 1);
    // The ready line says what the worker runs with, durability as SQLite reports it.
    expect(w.lines.find((l) => l['type'] === 'worker.ready')).toMatchObject({ concurrency: 1, synchronous: 'NORMAL' });
    w.child.kill('SIGUSR2');
    await w.until('both finished', () => w.lines.filter((l) => l['type'] === 'activity.finished').length === 2);
    expect(w.lines.filter((l) => l['type'] === 'activity.started').map((l) => l['jobId'])).toEqual(['s7', 's8']);
    w.child.kill('SIGTERM');
    expect(await w.exit).toEqual({ code: 0, signal: null });
    const after = await createRuntime({ store: await res.sqlite(db), machines: [slowHere], runEffects: false });
    for (const id of ['s7', 's8']) expect((await after.details(id)).effects.map((e) => e.output)).toEqual([{ most: 1 }]);
    await after.close();
  });

  it('refuses a malformed list, an unknown activity, a bad --concurrency or --synchronous with one error line (JSON with --json)', async () => {
    const { db, module } = await prepare([]);
    for (const [value, code, pattern] of [
      ['work', 'SPOOL_USAGE', /^--activity-concurrency takes name=count pairs/],
      ['wrok=1', 'SPOOL_INVALID', /^activityConcurrency names "wrok", which no registered machine has in setup\(\{ actors \}\); known: work\.$/],
    ] as const) {
      const w = worker(db, module, ['--activity-concurrency', value]);
      expect((await w.exit).code).toBe(1);
      expect(w.stderr().trimEnd().split('\n')).toHaveLength(1);
      const error = JSON.parse(w.stderr()) as { code: string; message: string };
      expect(error.code).toBe(code);
      expect(error.message).toMatch(pattern);
    }
    for (const value of ['0', '1.5', 'many']) {
      const w = worker(db, module, ['--concurrency', value]);
      expect((await w.exit).code).toBe(1);
      expect(JSON.parse(w.stderr())).toMatchObject({ code: 'SPOOL_USAGE', message: '--concurrency must be an integer from 1 to 1024.' });
    }
    const w = worker(db, module, ['--synchronous', 'OFF']);
    expect((await w.exit).code).toBe(1);
    expect(w.stderr().trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(w.stderr())).toMatchObject({ code: 'SPOOL_USAGE' });
    expect((JSON.parse(w.stderr()) as { message: string }).message).toMatch(/synchronous.*FULL, NORMAL/);
  });
});

describe('a job leased by a running worker, seen from other processes', () => {
  it('`spool send` accepts durably and leaves the event to the holder; `show` and `stats` name the lease; the worker applies it', async () => {
    const { db, module } = await prepare(['s6']);
    const w = worker(db, module);
    await w.until('the activity started', () => startedCount(w.lines) === 1);
    expect(w.lines.find((l) => l['type'] === 'worker.ready')).toMatchObject({ concurrency: 8, synchronous: 'FULL' }); // the defaults
    const runner = w.lines.find((l) => l['type'] === 'worker.ready')!['runner'] as string;
    const cwd = res.tempDir();
    const cli = (...args: string[]) => runSpool(['--db', db, '--machines', module, ...args], cwd);

    const shown = await cli('show', 's6');
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`lease\\s+held by ${runner.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(fence 1\\) until `));
    const sent = await cli('send', 's6', '{"type":"PING"}', '--event-id', 'ping-1');
    expect(sent.code).toBe(0);
    expect(sent.stdout).toMatch(/outcome\s+pending/);
    expect(sent.stdout).toContain(`${runner} holds the job (its activity runs there) and applies it`);
    const stats = await cli('--json', 'stats');
    expect((JSON.parse(stats.stdout) as { leases: unknown }).leases).toEqual([{ runner, jobs: 1, earliestUntil: expect.any(Number) }]);

    w.child.kill('SIGUSR2'); // the activity finishes; the worker applies the waiting PING, then the outcome
    await w.until('the job ended', () => w.lines.some((l) => l['type'] === 'job.committed' && l['jobId'] === 's6' && l['final'] === true));
    w.child.kill('SIGTERM');
    expect(await w.exit).toEqual({ code: 0, signal: null });

    const after = await createRuntime({ store: await res.sqlite(db), machines: [slowHere], runEffects: false });
    const details = await after.details('s6');
    expect(details.job).toMatchObject({ value: 'done', lease: null });
    expect(details.history.slice(1).map((h) => [h.eventType, h.runner])).toEqual([
      ['PING', runner],
      ['xstate.done.actor.work', runner],
    ]);
    await after.close();
  });
});
