/**
 * The operations commands of `spool`: `list --stuck/--suspended`, `show` (waiting for, stuck,
 * suspended), `retry [--as-new]`, `suspend`, `resume`, `purge`, `stats`, the global `--owner`,
 * and `worker --log json`. Most run in process through `main()` (the same code as `bin/spool.js`,
 * without the process start-up); the worker runs as a real child process and is stopped with
 * SIGTERM. Records are prepared through the API on the same SQLite files.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { collectDefinitions } from '../src/cli/loadMachines.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { createRuntime, type Job, type JobDetails, type Runtime, type RuntimeStats, type SendResult } from '../src/index.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { opsHooks, resetOpsHooks } from './fixtures/opsMachines.ts';
import * as opsModule from './fixtures/opsMachines.ts';
import { runSpool, type CliRun } from './helpers/spoolCli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin', 'spool.js');
const TMP = join(ROOT, '.vitest-tmp', `cli-ops-${randomBytes(4).toString('hex')}`);
const MACHINES = fileURLToPath(new URL('./fixtures/opsMachines.ts', import.meta.url));
const CARD = '4242424242424242';
const DAY = 86_400_000;

/** `spool --machines <ops machines> ...args` in process. */
function spool(args: readonly string[]): Promise<CliRun> {
  return runCli(['--machines', MACHINES, ...args], TMP);
}

async function ok(args: readonly string[]): Promise<string> {
  const run = await spool(args);
  expect(run.stderr, `stderr of spool ${args.join(' ')}`).toBe('');
  expect(run.code).toBe(0);
  return run.stdout;
}

async function json<T>(args: readonly string[]): Promise<T> {
  return JSON.parse(await ok([...args, '--json'])) as T;
}

/** A failed command: exit 1, nothing on stdout, one `spool: CODE: message` line. */
async function fails(args: readonly string[], code: string): Promise<string> {
  const run = await spool(args);
  expect(run.code, `exit code of spool ${args.join(' ')}`).toBe(1);
  expect(run.stdout).toBe('');
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^spool: ${code}: \\S`));
  return lines[0]!;
}

const field = (output: string, key: string) => new RegExp(`^${key} +(.*)$`, 'm').exec(output)?.[1];

let dbCount = 0;
const newDb = () => join(TMP, `ops-${(dbCount += 1)}.db`);

/** A runtime of the test on a CLI database (closed before the CLI runs). */
async function api(db: string, options: { clock?: VirtualClock; owner?: string } = {}): Promise<Runtime> {
  const store = await SqliteStore.open(db);
  return createRuntime({ store, machines: collectDefinitions(opsModule), ...options });
}

beforeAll(() => mkdirSync(TMP, { recursive: true }));
afterAll(() => rmSync(TMP, { recursive: true, force: true }));
beforeEach(() => resetOpsHooks());
afterEach(() => resetOpsHooks());

describe('--owner: tenant scoping', () => {
  it("another owner's job reads exactly like a missing one, for every command", async () => {
    const db = newDb();
    const other = newDb();
    await ok(['--db', db, '--owner', 'acme', 'start', 'dead-end', '--id', 'theirs']);
    await ok(['--db', other, 'start', 'dead-end', '--id', 'someone-else']); // a database where "theirs" does not exist
    for (const command of [
      ['show', 'theirs'],
      ['send', 'theirs', 'GO'],
      ['cancel', 'theirs'],
      ['suspend', 'theirs'],
      ['resume', 'theirs'],
      ['retry', 'theirs'],
      ['retry', 'theirs', '--as-new'],
      ['purge', 'theirs'],
    ]) {
      for (const json of [[], ['--json']]) {
        const missing = await spool(['--db', other, ...command, ...json]);
        expect(missing.code).toBe(1);
        expect(missing.stderr).toMatch(/SPOOL_NOT_FOUND/);
        for (const owner of [['--owner', 'globex'], []]) {
          expect(await spool(['--db', db, ...owner, ...command, ...json]), `${owner.join(' ')} ${command.join(' ')} ${json.join(' ')}`).toEqual(missing);
        }
      }
    }
    // Its owner sees it, and nothing above changed it.
    expect((await json<JobDetails>(['--db', db, '--owner', 'acme', 'show', 'theirs'])).job).toMatchObject({ value: 'idle', revision: 1, owner: 'acme', suspended: null });
    expect((await json<Job[]>(['--db', db, '--owner', 'acme', 'list'])).map((j) => j.id)).toEqual(['theirs']);
    expect(await json<Job[]>(['--db', db, 'list'])).toEqual([]);
    expect(await json<RuntimeStats>(['--db', db, '--owner', 'acme', 'stats'])).toMatchObject({ owner: 'acme', jobs: [{ machineId: 'dead-end', value: 'idle', count: 1 }] });
    expect(await json<RuntimeStats>(['--db', db, '--owner', 'globex', 'stats'])).toMatchObject({ owner: 'globex', jobs: [] });
    // Jobs started under an owner belong to it.
    expect(await json<{ job: Job }>(['--db', db, '--owner', 'globex', 'start', 'dead-end', '--id', 'mine'])).toMatchObject({ job: { owner: 'globex' } });
    await fails(['--db', db, '--owner', '', 'list'], 'SPOOL_USAGE');
  });
});

describe('list --stuck, list --suspended, show, suspend, resume', () => {
  it('shows what a job waits for, lists stuck jobs, and suspends and resumes one', async () => {
    const db = newDb();
    await ok(['--db', db, 'start', 'dead-end', '--id', 'limbo']);
    await ok(['--db', db, 'send', 'limbo', 'GO']);
    await ok(['--db', db, 'start', 'dead-end', '--id', 'idle']);

    const stuck = await ok(['--db', db, 'list', '--stuck']);
    expect(stuck).toMatch(/^ID +MACHINE/);
    expect(stuck).toMatch(/^limbo +dead-end@1 +active +limbo /m);
    expect(stuck).not.toMatch(/^idle /m);
    const limbo = await ok(['--db', db, 'show', 'limbo']);
    expect(field(limbo, 'waiting for')).toBe('no event');
    expect(field(limbo, 'stuck')).toMatch(/^yes: no pending event, timer or activity/);
    const idle = await ok(['--db', db, 'show', 'idle']);
    expect(field(idle, 'waiting for')).toBe('CANCEL, GO, HOLD');
    expect(field(idle, 'stuck')).toBeUndefined();
    expect(await json<JobDetails>(['--db', db, 'show', 'idle'])).toMatchObject({ waitingFor: ['CANCEL', 'GO', 'HOLD'], stuck: false });

    const suspended = await ok(['--db', db, 'suspend', 'idle', '--reason', 'audit']);
    expect(field(suspended, 'suspended')).toMatch(/^since \d{4}-\d\d-\d\d .* \(audit\)$/);
    expect(field(suspended, 'status')).toBe('active, suspended');
    const sent = await json<SendResult>(['--db', db, 'send', 'idle', 'GO', '--event-id', 'go-1']);
    expect(sent).toMatchObject({ status: 'pending', revision: null, job: { value: 'idle', suspended: { reason: 'audit' } } });
    expect(field(await ok(['--db', db, 'send', 'idle', 'GO', '--event-id', 'go-1']), 'outcome')).toBe('pending');
    expect((await json<Job[]>(['--db', db, 'list', '--suspended'])).map((j) => j.id)).toEqual(['idle']);
    expect(await ok(['--db', db, 'list', '--suspended'])).toMatch(/^idle +dead-end@1 +active, suspended +idle /m);
    const shown = await ok(['--db', db, 'show', 'idle']);
    expect(field(shown, 'suspended')).toMatch(/\(audit\): events stay pending, timers and activities wait \(`spool resume idle`\)$/);
    expect(shown).toMatch(/pending events \(accepted, not yet applied\):\nSEQ +EVENT ID +TYPE +ACCEPTED\n\d+ +go-1 +GO /);
    expect((await json<RuntimeStats>(['--db', db, 'stats'])).backlog).toMatchObject({ events: 1, held: 1 });

    const resumed = await ok(['--db', db, 'resume', 'idle']);
    expect(field(resumed, 'suspended')).toBe('no');
    expect(field(resumed, 'state')).toBe('limbo');
    expect((await json<Job[]>(['--db', db, 'list', '--stuck'])).map((j) => j.id)).toEqual(['idle', 'limbo']);
    expect((await json<JobDetails>(['--db', db, 'show', 'idle'])).notes.map((n) => n.kind)).toEqual(['suspended', 'resumed']);
    await fails(['--db', db, 'suspend', 'nope'], 'SPOOL_NOT_FOUND');
  });
});

describe('retry', () => {
  it('redrives an exhausted activity, refuses what it cannot redrive with a reason, and --as-new starts a job with the same input', async () => {
    const db = newDb();
    const clock = new VirtualClock(Date.now() - DAY);
    const runtime = await api(db, { clock });
    opsHooks.charge = async () => {
      throw new Error('card declined');
    };
    await runtime.start('fragile', { card: CARD, amount: 7 }, { jobId: 'f1' });
    await runtime.idle(); // attempt 1 failed: backoff
    clock.advance(opsModule.FRAGILE_POLICY.backoff.initialMs);
    await runtime.tick();
    await runtime.idle(); // attempt 2 failed: out of attempts; the machine has no onError
    expect((await runtime.details('f1')).effects).toMatchObject([{ status: 'failed', attempt: 2, maxAttempts: 2 }]);
    await runtime.close();

    const out = await ok(['--db', db, 'retry', 'f1']);
    expect(field(out, 'redriven')).toBe('charge: attempts 3 to 4 may run (idempotency key f1~charge~r1)');
    expect(field(out, 'next')).toBe('a worker runs the attempts (`spool worker`)');
    const details = await json<JobDetails>(['--db', db, 'show', 'f1']);
    expect(details.effects).toMatchObject([{ status: 'pending', attempt: 2, maxAttempts: 4 }]);
    expect(details.notes.map((n) => n.kind)).toEqual(['retry']);
    expect(JSON.stringify(details)).not.toContain(CARD);
    expect(await fails(['--db', db, 'retry', 'f1'], 'SPOOL_RETRY_REFUSED')).toContain('has no failed activity: charge is pending. A worker runs it');

    await ok(['--db', db, 'cancel', 'f1']);
    expect(await fails(['--db', db, 'retry', 'f1'], 'SPOOL_RETRY_REFUSED')).toContain('a finished job never runs again. Start a new job with the same input: `spool retry --as-new f1`');
    const sensitive = await fails(['--db', db, 'retry', 'f1', '--as-new'], 'SPOOL_RETRY_REFUSED');
    expect(sensitive).toContain('sensitive fields (card)');
    expect(sensitive).not.toContain(CARD);
    const refusal = JSON.parse((await spool(['--db', db, 'retry', 'f1', '--as-new', '--json'])).stderr) as Record<string, unknown>;
    expect(refusal).toMatchObject({ code: 'SPOOL_RETRY_REFUSED', category: 'conflict', reason: 'sensitive-input', fields: ['card'] });

    await ok(['--db', db, 'start', 'dead-end', '--id', 'd1']);
    await ok(['--db', db, 'cancel', 'd1']);
    const asNew = await ok(['--db', db, 'retry', 'd1', '--as-new', '--id', 'd2']);
    expect([field(asNew, 'job'), field(asNew, 'retry of'), field(asNew, 'created'), field(asNew, 'state')]).toEqual(['d2', 'd1', 'yes', 'idle']);
    expect(await json<{ created: boolean; job: Job }>(['--db', db, 'retry', 'd1', '--as-new'])).toMatchObject({ retryOf: 'd1', created: false, job: { id: 'd2' } });
    await fails(['--db', db, 'retry', 'd1', '--id', 'x'], 'SPOOL_USAGE');
  });
});

describe('purge', () => {
  it('deletes one finished job, or every finished job older than a duration, and prints how many', async () => {
    const db = newDb();
    const clock = new VirtualClock(Date.parse('2020-01-01T00:00:00Z'));
    const runtime = await api(db, { clock });
    for (const id of ['old-1', 'old-2', 'old-3']) {
      await runtime.start('dead-end', {}, { jobId: id });
      await runtime.cancel(id, 'done with it');
    }
    await runtime.start('dead-end', {}, { jobId: 'old-active' });
    await runtime.close();
    await ok(['--db', db, 'start', 'dead-end', '--id', 'new-1']);
    await ok(['--db', db, 'cancel', 'new-1']);

    await fails(['--db', db, 'purge'], 'SPOOL_USAGE');
    await fails(['--db', db, 'purge', 'old-1', '--older-than', '1d'], 'SPOOL_USAGE');
    expect(await fails(['--db', db, 'purge', '--older-than', 'soon'], 'SPOOL_USAGE')).toContain('--older-than must be a duration like 30d');
    await fails(['--db', db, 'purge', '--status', 'done'], 'SPOOL_USAGE');
    await fails(['--db', db, 'purge', 'old-active'], 'SPOOL_NOT_FINISHED');

    expect(await ok(['--db', db, 'purge', 'old-1'])).toBe('purged job old-1 with its history, events, activities, timers, notes and assets\n');
    await fails(['--db', db, 'show', 'old-1'], 'SPOOL_NOT_FOUND');
    expect(await json(['--db', db, 'purge', '--older-than', '30d', '--status', 'error'])).toMatchObject({ purged: 0, status: 'error' });
    expect(await ok(['--db', db, 'purge', '--older-than', '30d'])).toMatch(/^purged 2 finished job\(s\) last updated before \d{4}-\d\d-\d\d /);
    expect((await json<Job[]>(['--db', db, 'list'])).map((j) => j.id)).toEqual(['new-1', 'old-active']);
    expect(await json(['--db', db, 'purge', '--older-than', '1d12h'])).toMatchObject({ purged: 0 });
  });
});

describe('stats', () => {
  it('prints the figures for people, and as JSON', async () => {
    const db = newDb();
    await ok(['--db', db, 'start', 'dead-end', '--id', 'limbo']);
    await ok(['--db', db, 'send', 'limbo', 'GO']);
    await ok(['--db', db, 'start', 'fragile', '--id', 'f', '--input', JSON.stringify({ card: CARD, amount: 1 })]);
    const human = await ok(['--db', db, 'stats']);
    expect(field(human, 'stuck')).toBe('1');
    expect(field(human, 'backlog')).toBe('0 pending event(s) of 0 job(s), 0 held; oldest waiting -');
    expect(human).toMatch(/^jobs:\nMACHINE +STATUS +STATE +JOBS\ndead-end@1 +active +limbo +1\nfragile@1 +active +charging +1$/m);
    expect(human).toMatch(/^activities:\nSRC .*\ncharge +1 +0 +0 /m);
    expect(human).toContain('claims held: none');
    expect(human).not.toContain(CARD);
    const stats = await json<RuntimeStats>(['--db', db, 'stats']);
    expect(stats).toMatchObject({ owner: null, stuck: 1, waitingForInput: 0, suspended: 0, activities: [{ src: 'charge', effects: 1, attempts: 0 }], running: [] });
  });
});

describe('spool worker --log json', () => {
  it('prints one JSON log line per lifecycle event, with the card number an activity error quotes redacted everywhere', async () => {
    const module = join(TMP, 'payments.ts');
    writeFileSync(
      module,
      `import { fromPromise, setup } from 'xstate';
export const payment = {
  version: 1,
  sensitive: ['card'],
  activities: { charge: { maxAttempts: 2, backoff: { initialMs: 10, maxMs: 10, jitter: 0 } } },
  machine: setup({
    actors: {
      charge: fromPromise(async ({ input }: { input: { card: string } }) => {
        throw new Error('issuer refused card ' + input.card + ' (do not honour)');
      }),
    },
  }).createMachine({
    id: 'payment',
    initial: 'charging',
    context: ({ input }: { input: { card: string } }) => ({ card: input.card }),
    states: {
      charging: { invoke: { id: 'charge', src: 'charge', input: ({ context }: { context: { card: string } }) => ({ card: context.card }), onError: 'declined', onDone: 'paid' } },
      paid: { type: 'final' },
      declined: { type: 'final' },
    },
  }),
};
`,
    );
    const db = join(TMP, 'worker-log.db');
    const env = { ...process.env };
    delete env['NODE_OPTIONS'];
    const run = (args: string[]) => runSpool(['--db', db, '--machines', module, ...args], TMP);
    const started = await run(['start', 'payment', '--id', 'p1', '--input', JSON.stringify({ card: CARD })]);
    expect(started).toMatchObject({ code: 0, stderr: '' });

    const worker = spawn(process.execPath, [BIN, '--db', db, '--machines', module, 'worker', '--poll-ms', '20', '--log', 'json'], { cwd: TMP, env });
    const lines: Record<string, unknown>[] = [];
    let raw = '';
    let stderr = '';
    let onLine: (() => void) | undefined;
    worker.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      raw += chunk;
      const parts = raw.split('\n');
      raw = parts.pop()!;
      for (const p of parts) lines.push(JSON.parse(p) as Record<string, unknown>);
      onLine?.();
    });
    worker.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exit = new Promise<number | null>((resolve) => worker.on('exit', (code) => resolve(code)));
    await new Promise<void>((resolve) => {
      onLine = () => {
        if (lines.some((l) => l['msg'] === 'job finished')) resolve();
      };
      onLine();
    });
    worker.kill('SIGTERM');
    expect(await exit).toBe(0);
    const all = [...lines];
    expect(all.every((l) => typeof l['at'] === 'number' && typeof l['level'] === 'string' && typeof l['msg'] === 'string')).toBe(true);
    expect(all.map((l) => l['msg'])).toEqual(
      expect.arrayContaining(['worker started', 'activity started', 'activity retrying', 'activity failed', 'job finished', 'worker stopped']),
    );
    expect(all.find((l) => l['msg'] === 'activity failed')).toMatchObject({ jobId: 'p1', error: { message: 'issuer refused card [redacted] (do not honour)' } });
    expect(all.find((l) => l['msg'] === 'job finished')).toMatchObject({ jobId: 'p1', state: 'declined' });
    expect(`${raw}${JSON.stringify(all)}${stderr}${started.stdout}`).not.toContain(CARD);
    expect(all.some((l) => l['type'] !== undefined)).toBe(false); // log lines only, no runtime-event lines
  });
});
