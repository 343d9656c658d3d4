/**
 * `spool worker`, `spool cancel`, `spool complete` and `spool test`, run as real child processes,
 * on machines written here the way a new user would (a module the project has never seen).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job, JobDetails } from '../src/index.ts';
import { runSpool, type CliRun } from './helpers/spoolCli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'spool.js');
const TMP = join(ROOT, '.vitest-tmp', `cli-worker-${randomBytes(4).toString('hex')}`);
const MODULE = join(TMP, 'orders.ts');
const GAPPY = join(TMP, 'gappy.ts');

const env = () => {
  const e = { ...process.env };
  delete e['NODE_OPTIONS'];
  return e;
};

function spool(args: readonly string[]): Promise<CliRun> {
  return runSpool(args, TMP);
}

async function json<T>(args: readonly string[]): Promise<T> {
  const run = await spool([...args, '--json']);
  expect(run.stderr, run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as T;
}

/** A running `spool worker --json`: its lines arrive as parsed objects; wait on them, never on time. */
function startWorker(db: string): { child: ChildProcessWithoutNullStreams; lines: Record<string, unknown>[]; until: (p: (l: Record<string, unknown>) => boolean) => Promise<Record<string, unknown>>; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> } {
  const child = spawn(process.execPath, [BIN, '--db', db, '--machines', MODULE, 'worker', '--poll-ms', '20', '--json'], { cwd: TMP, env: env() });
  const lines: Record<string, unknown>[] = [];
  const waiters: { p: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  let buffer = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    for (let i = buffer.indexOf('\n'); i >= 0; i = buffer.indexOf('\n')) {
      const line = JSON.parse(buffer.slice(0, i)) as Record<string, unknown>;
      buffer = buffer.slice(i + 1);
      lines.push(line);
      for (const w of [...waiters]) if (w.p(line)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(line));
    }
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const until = (p: (l: Record<string, unknown>) => boolean) => {
    const seen = lines.find(p);
    return seen ? Promise.resolve(seen) : new Promise<Record<string, unknown>>((resolve) => waiters.push({ p, resolve }));
  };
  return { child, lines, until, exit };
}

beforeAll(() => {
  mkdirSync(TMP, { recursive: true });
  writeFileSync(
    MODULE,
    `import { assign, fromPromise, setup } from 'xstate';
let calls = 0;
export const order = setup({
  actors: {
    charge: fromPromise(async ({ input, signal, ...spool }) => {
      calls += 1;
      if ((spool as { attempt: number }).attempt === 1) throw new Error('card network busy');
      return { receipt: 'r-' + (input as { amount: number }).amount };
    }),
    ship: fromPromise(async ({ signal, ...spool }) => {
      const { defer } = spool as unknown as { defer: (f: (t: string) => void) => unknown };
      return defer((token) => { console.error('TOKEN ' + token); });
    }),
  },
}).createMachine({
  id: 'order',
  initial: 'paying',
  context: { receipt: null as string | null, tracking: null as string | null },
  states: {
    paying: {
      invoke: { id: 'charge', src: 'charge', input: { amount: 12 }, onDone: { target: 'shipping', actions: assign({ receipt: ({ event }) => (event.output as { receipt: string }).receipt }) }, onError: 'failed' },
      on: { CANCEL: 'cancelled' },
    },
    shipping: {
      invoke: { id: 'ship', src: 'ship', onDone: { target: 'delivered', actions: assign({ tracking: ({ event }) => (event.output as { tracking: string }).tracking }) } },
      after: { 60000: 'lost' },
      on: { CANCEL: 'cancelled' },
    },
    delivered: { type: 'final' },
    lost: { type: 'final' },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
export const orderDefinition = { machine: order, version: 1, activities: { charge: { maxAttempts: 3, backoff: { initialMs: 10, maxMs: 50 } } } };
`,
  );
  writeFileSync(
    GAPPY,
    `import { setup } from 'xstate';
export const gappy = setup({ guards: { never: () => false } }).createMachine({
  id: 'gappy',
  initial: 'a',
  states: {
    a: { on: { GO: 'b', JUMP: { guard: 'never', target: 'c' } } },
    b: { type: 'final' },
    c: { type: 'final' },
  },
});
`,
  );
});
afterAll(() => rmSync(TMP, { recursive: true, force: true }));

describe('spool worker', () => {
  it('runs activities with retries, hands out a completion token, and stops cleanly on SIGTERM', async () => {
    const db = join(TMP, 'w.db');
    const started = await json<{ created: boolean; job: Job }>(['--db', db, '--machines', MODULE, 'start', 'order', '--id', 'o1']);
    expect(started.job.value).toBe('paying');
    // The command recorded the activity and left it to a worker.
    expect((await json<JobDetails>(['--db', db, '--machines', MODULE, 'show', 'o1'])).effects.map((e) => e.status)).toEqual(['pending']);

    const worker = startWorker(db);
    let stderr = '';
    const tokenLine = new Promise<string>((resolve) =>
      worker.child.stderr.setEncoding('utf8').on('data', (c: string) => {
        stderr += c;
        const m = /TOKEN (\S+)\n/.exec(stderr);
        if (m) resolve(m[1]!);
      }),
    );
    await worker.until((l) => l['type'] === 'activity.finished' && l['outcome'] === 'waiting');
    const token = await tokenLine;
    expect(token).toBeDefined();
    // `show` prints the token of the activity that waits on it, and how to settle it.
    const shown = await spool(['--db', db, '--machines', MODULE, 'show', 'o1']);
    expect(shown.stdout).toMatch(new RegExp(`^ship\\s+waiting\\s+1/\\d+\\s+-\\s+token ${token}$`, 'm'));
    expect(shown.stdout).toContain('spool complete <token>');
    // The first charge attempt's failure, not only the activity's last status.
    expect(shown.stdout).toMatch(/^attempts that failed or were interrupted:\n.*\ncharge\s+1\s+failed\s+\S+ \S+\s+Error: card network busy$/m);
    const attempts = worker.lines.filter((l) => l['type'] === 'activity.finished').map((l) => l['outcome']);
    expect(attempts).toEqual(['retrying', 'succeeded', 'waiting']);

    // Without the module that defines the job's machine, the token is refused and stays good.
    const wrongModule = await spool(['--db', db, 'complete', token!, '{"tracking":"T-0"}']);
    expect(wrongModule.code).toBe(1);
    expect(wrongModule.stderr).toMatch(/^spool: SPOOL_USAGE: Job o1 runs machine order, which .* does not export; pass --machines/);
    const done = await json<Job>(['--db', db, '--machines', MODULE, 'complete', token!, '{"tracking":"T-9"}']);
    expect(done.value).toBe('delivered');
    expect(done.context).toEqual({ receipt: 'r-12', tracking: 'T-9' });
    const again = await spool(['--db', db, '--machines', MODULE, 'complete', token!, '{"tracking":"T-9"}']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^spool: SPOOL_BAD_TOKEN: /);

    worker.child.kill('SIGTERM');
    const exit = await worker.exit;
    expect(exit.code).toBe(0);
    expect(stderr).toContain('SIGTERM');
  });

  it('cancel is a visible request the machine completes', async () => {
    const db = join(TMP, 'c.db');
    await json(['--db', db, '--machines', MODULE, 'start', 'order', '--id', 'o2']);
    const job = await json<Job>(['--db', db, '--machines', MODULE, 'cancel', 'o2', '--reason', 'changed mind']);
    expect(job.value).toBe('cancelled');
    expect(job.cancel).toMatchObject({ reason: 'changed mind', completed: true });
    const again = await spool(['--db', db, '--machines', MODULE, 'cancel', 'o2']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^spool: SPOOL_TERMINAL: /);
  });
});

describe('spool test', () => {
  it('covers every transition of the reference machines and passes the crash replay', async () => {
    const result = await json<{ ok: boolean; machines: { machineId: string; transitions: number; covered: number; gaps: unknown[]; runs: { plain: number; restart: number; child: number } }[] }>([
      'test',
      '--child-crash',
      '0',
    ]);
    expect(result.ok).toBe(true);
    expect(result.machines.map((m) => m.machineId).sort()).toEqual(['approval-flow', 'export-job', 'job-lifecycle', 'retrying-job']);
    for (const m of result.machines) {
      expect(m.covered).toBe(m.transitions);
      expect(m.gaps).toEqual([]);
      expect(m.runs.restart).toBe(m.runs.plain);
    }
  });

  it('reports an unreachable transition as a gap and exits non-zero, with a table for people', async () => {
    const run = await spool(['--machines', GAPPY, 'test', '--child-crash', '0']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/gappy@1\s+\d+\s+2\s+1\s+1\s/);
    expect(run.stdout).toContain('gap: state gappy.a, event JUMP, guard never, target gappy.c');
    expect(run.stderr).toContain('gappy: FAILED');
  });
});
