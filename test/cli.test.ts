/**
 * The `spool` command on temp database files. Every assertion is on what a user sees: exit code,
 * stdout, stderr. Most run in process through `main()` (the code the bin runs, from the sources);
 * what only a process shows runs the real bin (`node bin/spool.js`, the built package): its exit
 * codes, the built default module, a TypeScript module loaded through the bin's tsx registration,
 * standard input, output into a pipe, and `npm start`'s demo.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMachine } from 'xstate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectDefinitions } from '../src/cli/loadMachines.ts';
import { describeWork } from '../src/cli/demo.ts';
import { createRuntime, type Job, type JobDetails, type SendResult, type TransitionRecord } from '../src/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../machines/index.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { SPOOL_BIN, runSpool, type CliRun } from './helpers/spoolCli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// Under the project (gitignored) so a user module's `import 'xstate'` resolves.
const TMP = join(ROOT, '.vitest-tmp', `cli-${randomBytes(4).toString('hex')}`);

/** How a case runs the command: {@link spool} in process, or `runSpool` through the bin. */
type Runner = (args: readonly string[], cwd: string) => Promise<CliRun>;

/** Run `spool ...args` in process in `cwd` (default: the temp dir) and collect what it prints. */
function spool(args: readonly string[], cwd = TMP): Promise<CliRun> {
  return runCli(args, cwd);
}

/** Run, expect success, and parse the one JSON document on stdout. */
async function spoolJson<T>(args: readonly string[], cwd = TMP, run: Runner = spool): Promise<T> {
  const out = await spoolOk([...args, '--json'], cwd, run);
  return JSON.parse(out) as T;
}

async function spoolOk(args: readonly string[], cwd = TMP, run: Runner = spool): Promise<string> {
  const done = await run(args, cwd);
  expect(done.stderr, `stderr of spool ${args.join(' ')}`).toBe('');
  expect(done.code).toBe(0);
  return done.stdout;
}

/** A failed command: exit 1, nothing on stdout, exactly one `spool: CODE: message` line on stderr. */
async function spoolFails(args: readonly string[], code: string, cwd = TMP): Promise<string> {
  const run = await spool(args, cwd);
  expect(run.code, `exit code of spool ${args.join(' ')}`).toBe(1);
  expect(run.stdout).toBe('');
  expect(run.stderr.endsWith('\n')).toBe(true);
  const lines = run.stderr.trimEnd().split('\n');
  expect(lines, run.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^spool: ${code}: \\S`));
  expect(run.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

/** A line `key   value` of a key/value block. */
function field(output: string, key: string): string | undefined {
  return new RegExp(`^${key} +(.*)$`, 'm').exec(output)?.[1];
}

beforeAll(() => mkdirSync(TMP, { recursive: true }));
afterAll(() => rmSync(TMP, { recursive: true, force: true }));

describe('spool --help and machines', () => {
  it('prints help with the commands and exits 0 (the bin)', async () => {
    const out = await spoolOk(['--help'], TMP, runSpool);
    expect(out).toContain('Usage: spool');
    for (const command of ['start', 'send', 'show', 'list', 'machines', 'demo']) expect(out).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
  });

  it('lists the reference machines, human and --json', async () => {
    const out = await spoolOk(['machines']);
    expect(out).toMatch(/^MACHINE\s+VERSION\s+EVENTS\s+DESCRIPTION$/m);
    expect(out).toMatch(/^job-lifecycle\s+1\s+CANCEL, FAIL, FINISH, ITEM_DONE, ITEM_FAILED, PROGRESS, START\s+queued/m);

    const json = await spoolJson<{ module: string; machines: { id: string; version: string; events: string[]; description: string | null }[] }>(
      ['machines'],
      TMP,
      runSpool,
    );
    // The bin runs the built package: its default module is the built reference machines.
    expect(json.module).toBe(join(ROOT, 'dist', 'machines', 'index.js'));
    expect(json.machines).toContainEqual(
      expect.objectContaining({
        id: 'job-lifecycle',
        version: 1,
        events: ['CANCEL', 'FAIL', 'FINISH', 'ITEM_DONE', 'ITEM_FAILED', 'PROGRESS', 'START'],
      }),
    );
    const ids = json.machines.map((m) => m.id);
    expect(ids).toEqual([...ids].sort());
    // Every machine in the table is one in the JSON, and the other way round.
    expect(out.split('\n').filter((l) => /^[a-z]/.test(l)).map((l) => l.split(/\s+/)[0])).toEqual(ids);
  });
});

describe('start, send, show, list', () => {
  const db = () => ['--db', join(TMP, 'basic.db')];

  it('drives a job in human mode', async () => {
    const started = await spoolOk([...db(), 'start', 'job-lifecycle', '--id', 'h-1', '--input', '{"name":"resize","items":2}']);
    expect(field(started, 'job')).toBe('h-1');
    expect(field(started, 'machine')).toBe('job-lifecycle@1');
    expect(field(started, 'created')).toBe('yes');
    expect(field(started, 'state')).toBe('queued');
    expect(field(started, 'revision')).toBe('1');

    const sent = await spoolOk([...db(), 'send', 'h-1', 'START']);
    expect(field(sent, 'outcome')).toBe('applied');
    expect(field(sent, 'revision')).toBe('2');
    expect(field(sent, 'state')).toBe('processing');

    const ignored = await spoolOk([...db(), 'send', 'h-1', '{"type":"START"}']);
    expect(field(ignored, 'outcome')).toBe('ignored');
    expect(field(ignored, 'state')).toBe('processing');

    await spoolOk([...db(), 'send', 'h-1', '{"type":"ITEM_FAILED","reason":"timeout"}']);
    const last = await spoolOk([...db(), 'send', 'h-1', 'ITEM_DONE']);
    expect(field(last, 'outcome')).toBe('applied');
    expect(field(last, 'revision')).toBe('5');
    expect(field(last, 'state')).toBe('partial');
    expect(field(last, 'status')).toBe('done (final)');
    expect(field(last, 'output')).toBe('{"outcome":"partial","succeeded":1,"failed":1,"error":null}');

    const shown = await spoolOk([...db(), 'show', 'h-1']);
    expect(field(shown, 'machine')).toBe('job-lifecycle@1');
    expect(field(shown, 'status')).toBe('done (final)');
    expect(field(shown, 'state')).toBe('partial');
    expect(field(shown, 'revision')).toBe('5');
    expect(shown).toMatch(/^REV\s+EVENT\s+OUTCOME\s+FROM -> TO\s+TIME\s+RUNNER \(FENCE\)$/m);
    const rows = shown.split('\n').filter((l) => /^\d+ /.test(l)).map((l) => l.split(/\s{2,}/).slice(0, 4));
    // Each CLI command is a runner of its own: every commit names it, under a fence that grows.
    const runners = shown.split('\n').filter((l) => /^\d+ /.test(l)).map((l) => / (\S+\/\d+\/\S+) \((\d+)\)$/.exec(l)?.slice(1));
    expect(runners.map((r) => r?.[1])).toEqual(['0', '1', '2', '3', '4']);
    expect(new Set(runners.map((r) => r?.[0])).size).toBe(5);
    expect(rows).toEqual([
      ['1', 'xstate.init', 'started', '- -> queued'],
      ['2', 'START', 'applied', 'queued -> processing'],
      ['3', 'START', 'ignored', 'processing -> processing'],
      ['4', 'ITEM_FAILED', 'applied', 'processing -> processing'],
      ['5', 'ITEM_DONE', 'applied', 'processing -> partial'],
    ]);
    expect(shown).toContain('pending events: none');
    // A long history prints its latest rows; --json keeps every one.
    const latest = await spoolOk([...db(), 'show', 'h-1', '--history', '2']);
    expect(latest).toContain('history (the latest 2; 3 earlier, see --history all):');
    expect(latest.split('\n').filter((l) => /^\d+ /.test(l)).map((l) => l.split(/\s+/)[0])).toEqual(['4', '5']);
    expect((await spoolJson<JobDetails>([...db(), 'show', 'h-1', '--history', '2'])).history).toHaveLength(5);

    await spoolOk([...db(), 'start', 'job-lifecycle', '--id', 'h-2', '--input', '{"name":"other"}']);
    const listed = await spoolOk([...db(), 'list']);
    expect(listed).toMatch(/^ID\s+MACHINE\s+STATUS\s+STATE\s+PROGRESS\s+REV\s+UPDATED$/m);
    expect(listed).toMatch(/^h-1\s+job-lifecycle@1\s+done \(final\)\s+partial\s+100%\s+5\s+\d{4}-/m);
    expect(listed).toMatch(/^h-2\s+job-lifecycle@1\s+active\s+queued\s+0%\s+1\s+\d{4}-/m);
    const active = await spoolOk([...db(), 'list', '--status', 'active']);
    expect(active).toMatch(/^h-2\s/m);
    expect(active).not.toMatch(/^h-1\s/m);
    expect(await spoolOk([...db(), 'list', '--state', 'processing'])).toBe('No jobs match.\n');
  });

  it('drives a job in --json mode, every output one JSON document', async () => {
    const started = await spoolJson<{ created: boolean; job: Job }>([...db(), 'start', 'job-lifecycle', '--id', 'j-1', '--input', '{"name":"json"}']);
    expect(started.created).toBe(true);
    expect(started.job).toMatchObject({ id: 'j-1', machineId: 'job-lifecycle', machineVersion: 1, value: 'queued', revision: 1, final: false });

    const sent = await spoolJson<SendResult>([...db(), 'send', 'j-1', '{"type":"START"}']);
    expect(sent).toMatchObject({ jobId: 'j-1', status: 'applied', revision: 2, duplicate: false, error: null });
    expect(sent.job.value).toBe('processing');

    const progress = await spoolJson<SendResult>([...db(), 'send', 'j-1', '{"type":"PROGRESS","percent":40}']);
    expect(progress.status).toBe('applied');
    expect(progress.job.context).toMatchObject({ progress: 40 });

    const shown = await spoolJson<JobDetails>([...db(), 'show', 'j-1']);
    expect(shown.job.revision).toBe(3);
    expect(shown.history.map((h) => [h.revision, h.eventType, h.outcome])).toEqual([
      [1, 'xstate.init', 'started'],
      [2, 'START', 'applied'],
      [3, 'PROGRESS', 'applied'],
    ]);
    expect(shown.events.map((e) => [e.type, e.status, e.revision])).toEqual([
      ['START', 'applied', 2],
      ['PROGRESS', 'applied', 3],
    ]);
    expect(shown.effects).toEqual([]);

    const listed = await spoolJson<Job[]>([...db(), 'list', '--state', 'processing']);
    expect(listed.map((j) => j.id)).toEqual(['j-1']);
    const all = await spoolJson<Job[]>([...db(), 'list', '--machine', 'job-lifecycle']);
    expect(all.map((j) => j.id)).toEqual(['h-1', 'h-2', 'j-1']);
    expect(await spoolJson<Job[]>([...db(), 'list', '--machine', 'other'])).toEqual([]);
  });

  it('returns the first outcome for a repeated --event-id, and rejects reuse with another event', async () => {
    await spoolOk([...db(), 'start', 'job-lifecycle', '--id', 'dup-1', '--input', '{"name":"dup"}']);
    await spoolOk([...db(), 'send', 'dup-1', 'START']);
    const first = await spoolJson<SendResult>([...db(), 'send', 'dup-1', '{"type":"PROGRESS","percent":40}', '--event-id', 'hook-7']);
    expect(first).toMatchObject({ eventId: 'hook-7', status: 'applied', revision: 3, duplicate: false });

    const again = await spoolJson<SendResult>([...db(), 'send', 'dup-1', '{"type":"PROGRESS","percent":40}', '--event-id', 'hook-7']);
    expect(again).toMatchObject({ eventId: 'hook-7', status: 'applied', revision: 3, duplicate: true });
    expect(again.job.revision).toBe(3);

    const human = await spoolOk([...db(), 'send', 'dup-1', '{"type":"PROGRESS","percent":40}', '--event-id', 'hook-7']);
    expect(field(human, 'duplicate')).toMatch(/^yes/);
    expect(field(human, 'revision')).toBe('3');

    const line = await spoolFails([...db(), 'send', 'dup-1', '{"type":"PROGRESS","percent":50}', '--event-id', 'hook-7'], 'SPOOL_IDEMPOTENCY_CONFLICT');
    expect(line).toContain('hook-7');

    const shown = await spoolJson<{ history: TransitionRecord[] }>([...db(), 'show', 'dup-1']);
    expect(shown.history.filter((h) => h.eventType === 'PROGRESS')).toHaveLength(1);
  });

  it('returns the same job for a repeated --idempotency-key with the same input, and refuses other input', async () => {
    const args = [...db(), 'start', 'job-lifecycle', '--input', '{"name":"upload-42"}', '--idempotency-key', 'upload-42'];
    const first = await spoolJson<{ created: boolean; job: Job }>(args);
    const second = await spoolJson<{ created: boolean; job: Job }>(args);
    expect(first.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.job.id).toBe(first.job.id);
    expect(second.job.idempotencyKey).toBe('upload-42');

    const human = await spoolOk(args);
    expect(field(human, 'job')).toBe(first.job.id);
    expect(field(human, 'created')).toMatch(/^no/);

    await spoolFails(
      [...db(), 'start', 'job-lifecycle', '--input', '{"name":"something-else"}', '--idempotency-key', 'upload-42'],
      'SPOOL_IDEMPOTENCY_CONFLICT',
    );
    const jobs = await spoolJson<Job[]>([...db(), 'list']);
    expect(jobs.filter((j) => j.idempotencyKey === 'upload-42')).toHaveLength(1);
  });

  it('lists a page at a time with --limit and --after, in id order', async () => {
    const paged = ['--db', join(TMP, 'paged.db')];
    for (const id of ['p-3', 'p-1', 'p-2']) await spoolOk([...paged, 'start', 'job-lifecycle', '--id', id, '--input', '{"name":"page"}']);
    const first = await spoolJson<Job[]>([...paged, 'list', '--limit', '2']);
    expect(first.map((j) => j.id)).toEqual(['p-1', 'p-2']);
    expect(await spoolOk([...paged, 'list', '--limit', '2'])).toContain('(2 shown; the next page: --after p-2)');
    expect((await spoolJson<Job[]>([...paged, 'list', '--after', 'p-2'])).map((j) => j.id)).toEqual(['p-3']);
    await spoolFails([...paged, 'list', '--limit', '0'], 'SPOOL_USAGE');
  });
});

describe('output into a pipe read late', () => {
  it('delivers all of a --json list far past the pipe\'s 64 KiB before the process exits', async () => {
    const db = join(TMP, 'pipe.db');
    const store = await SqliteStore.open(db);
    const runtime = await createRuntime({ store, machines: [jobLifecycle], processEvents: false });
    for (let i = 0; i < 400; i++) await runtime.start('job-lifecycle', { name: `pipe ${'x'.repeat(150)}` }, { jobId: `pipe-${String(i).padStart(3, '0')}` });
    await runtime.close();
    await store.close();
    const child = spawn(process.execPath, [SPOOL_BIN, '--db', db, '--json', 'list', '--limit', '1000'], { cwd: TMP, env: { PATH: process.env['PATH'] ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // Read nothing until the first output is there: the bin has written all it will before it could
    // exit, and a broken one exits with the rest still queued behind the full pipe.
    await Promise.race([once(child.stdout, 'readable'), exited]);
    const chunks: Buffer[] = [];
    const ended = new Promise((resolve) => child.stdout.on('end', resolve));
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    expect(await exited).toBe(0);
    await ended;
    const out = Buffer.concat(chunks).toString('utf8');
    expect(out.length).toBeGreaterThan(2 * 65_536);
    expect((JSON.parse(out) as Job[]).map((j) => j.id)).toHaveLength(400);
  }, 120_000);
});

describe('errors: one line on stderr, exit 1, nothing changed', () => {
  const db = () => ['--db', join(TMP, 'errors.db')];

  beforeAll(async () => {
    await spoolOk([...db(), 'start', 'job-lifecycle', '--id', 'live', '--input', '{"name":"live"}']);
    await spoolOk([...db(), 'start', 'job-lifecycle', '--id', 'ended', '--input', '{"name":"ended"}']);
    await spoolOk([...db(), 'send', 'ended', 'CANCEL']);
  });

  const cases: [string, string[], string, RegExp][] = [
    ['unknown machine', ['start', 'no-such-machine'], 'SPOOL_UNKNOWN_MACHINE', /no-such-machine.*registered: .*job-lifecycle/],
    ['unknown event', ['send', 'live', 'EXPLODE'], 'SPOOL_UNKNOWN_EVENT', /EXPLODE.*known: CANCEL/],
    ['malformed JSON input', ['start', 'job-lifecycle', '--input', '{name: x}'], 'SPOOL_BAD_JSON', /--input is not valid JSON/],
    ['malformed JSON event', ['send', 'live', '{"type":'], 'SPOOL_BAD_JSON', /event is not valid JSON/],
    ['an event that is not an object', ['send', 'live', '[1,2]'], 'SPOOL_BAD_JSON', /JSON object with a "type"/],
    ['wrong-typed input', ['start', 'job-lifecycle', '--input', '{"name":5}'], 'SPOOL_INVALID', /name: .*expected string/],
    ['wrong-typed event', ['send', 'live', '{"type":"PROGRESS","percent":"lots"}'], 'SPOOL_INVALID', /PROGRESS.*percent/],
    ['job not found (show)', ['show', 'ghost'], 'SPOOL_NOT_FOUND', /No job "ghost"/],
    ['job not found (send)', ['send', 'ghost', 'START'], 'SPOOL_NOT_FOUND', /No job "ghost"/],
    ['event to a finished job', ['send', 'ended', 'START'], 'SPOOL_TERMINAL', /ended.*accepts no more events/],
    ['a bad job id', ['start', 'job-lifecycle', '--input', '{"name":"x"}', '--id', 'has space'], 'SPOOL_INVALID', /job id/],
    ['a missing argument', ['start'], 'SPOOL_USAGE', /missing required argument 'machine'/],
    ['an unknown command', ['explode'], 'SPOOL_USAGE', /unknown command 'explode'/],
    ['an unknown option', ['list', '--colour'], 'SPOOL_USAGE', /unknown option '--colour'/],
    ['a bad --status', ['list', '--status', 'sleeping'], 'SPOOL_USAGE', /Allowed choices are active, done, error, stopped/],
  ];

  // Independent read-only failures: run side by side (each is its own process).
  it.concurrent.each(cases)('%s', async (_name, args, code, message) => {
    const line = await spoolFails([...db(), ...args], code);
    expect(line).toMatch(message);
  });

  it('prints the error as one JSON object on stderr with --json (the bin exits 1)', async () => {
    const run = await runSpool([...db(), 'send', 'live', 'EXPLODE', '--json'], TMP);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(run.stderr)).toMatchObject({ code: 'SPOOL_UNKNOWN_EVENT', category: 'bad-input', eventType: 'EXPLODE' });

    const usage = await runSpool([...db(), 'start', '--json'], TMP);
    expect(usage.code).toBe(1);
    expect(JSON.parse(usage.stderr)).toMatchObject({ code: 'SPOOL_USAGE', category: 'bad-input' });
  });

  it('left the jobs as they were', async () => {
    const jobs = await spoolJson<Job[]>([...db(), 'list']);
    expect(jobs.map((j) => [j.id, j.revision, j.value])).toEqual([
      ['ended', 2, 'cancelled'],
      ['live', 1, 'queued'],
    ]);
  });

  it('refuses to read a database that does not exist, without creating it', async () => {
    const missing = join(TMP, 'missing.db');
    const line = await spoolFails(['--db', missing, 'list'], 'SPOOL_DATABASE');
    expect(line).toContain('No Spool database');
    await spoolFails(['--db', missing, 'show', 'x'], 'SPOOL_DATABASE');
    // `start` creates it; `list` then finds one job.
    await spoolOk(['--db', missing, 'start', 'job-lifecycle', '--input', '{"name":"first"}']);
    expect(await spoolJson<Job[]>(['--db', missing, 'list'])).toHaveLength(1);
  });

  it('says a damaged file is damaged, and what to do, not that Spool has a bug', async () => {
    const path = join(TMP, 'damaged.db');
    const store = await SqliteStore.open(path);
    const runtime = await createRuntime({ store, machines: [jobLifecycle] });
    for (let i = 0; i < 20; i += 1) await runtime.start('job-lifecycle', { name: `j${i}` });
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    const root = store.db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'jobs_status'").pluck().get() as number;
    await runtime.close();
    // Overwrite the status index's root page: reads through it fail with SQLITE_CORRUPT.
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.concat([Buffer.from([0x0d, 0, 0, 0xff]), Buffer.alloc(200, 0xee)]), 0, 204, 4096 * (root - 1));
    closeSync(fd);
    const line = await spoolFails(['--db', path, 'stats'], 'SPOOL_DATABASE_DAMAGED');
    expect(line).toContain(`The database file ${path} is damaged (SQLITE_CORRUPT`);
    expect(line).toContain('restore it from a backup');
    expect(line).toContain('`spool doctor`');
    expect(line).not.toContain('please report it');
  });
});

describe('a machines module the project has never seen', () => {
  const db = () => ['--db', join(TMP, 'user.db')];
  const modulePath = () => join(TMP, 'order-machines.ts');
  const withModule = () => [...db(), '--machines', modulePath()];

  beforeAll(() => {
    writeFileSync(
      modulePath(),
      `import { createMachine } from 'xstate';
import { z } from 'zod';

export const orderMachine = createMachine({
  id: 'order',
  initial: 'checkout',
  context: ({ input }: { input: { sku: string; card?: string } }) => ({ sku: input.sku, card: input.card ?? null }),
  states: {
    checkout: {
      initial: 'cart',
      states: {
        cart: { on: { PAY: 'paying' } },
        paying: { on: { PAID: '#order.shipping', DECLINED: 'cart' } },
      },
    },
    shipping: { on: { DELIVERED: 'delivered' } },
    delivered: { type: 'final' },
  },
});

/** Wraps orderMachine: the bare export above must not be registered a second time. */
export const order = {
  machine: orderMachine,
  version: 2,
  input: z.object({ sku: z.string(), card: z.string().optional() }),
  sensitive: ['card'],
  description: 'checkout with a nested state',
};

const ping = createMachine({ id: 'ping', initial: 'idle', states: { idle: { on: { PING: 'done' } }, done: { type: 'final' } } });
export default { ping, note: 'not a machine' };
export const notAMachine = 42;
`,
    );
  });

  it('registers its exports (definition, default object) and not the wrapped bare machine twice', async () => {
    const json = await spoolJson<{ machines: { id: string; version: number; events: string[]; description: string | null }[] }>([
      '--machines',
      modulePath(),
      'machines',
    ]);
    expect(json.machines.map((m) => [m.id, m.version, m.events])).toEqual([
      ['order', 2, ['DECLINED', 'DELIVERED', 'PAID', 'PAY']],
      ['ping', 1, ['PING']],
    ]);
    expect(json.machines[0]!.description).toBe('checkout with a nested state');
  });

  it('starts a job, moves through the nested state, and drives it to its end', async () => {
    // A relative --machines path is resolved against the working directory.
    const started = await spoolJson<{ job: Job }>([
      ...db(),
      '--machines',
      './order-machines.ts',
      'start',
      'order',
      '--id',
      'o-1',
      '--input',
      '{"sku":"A-1","card":"4111-1111"}',
    ]);
    expect(started.job).toMatchObject({
      machineId: 'order',
      machineVersion: 2,
      value: { checkout: 'cart' },
      // `sensitive: ['card']`: the CLI never prints it.
      input: { sku: 'A-1', card: '[redacted]' },
      context: { sku: 'A-1', card: '[redacted]' },
    });
    await spoolFails([...withModule(), 'start', 'order', '--input', '{"sku":7}'], 'SPOOL_INVALID');

    const paying = await spoolOk([...withModule(), 'send', 'o-1', '{"type":"PAY","card":"4111-2222"}']);
    expect(field(paying, 'state')).toBe('checkout.paying');

    const inCheckout = await spoolJson<Job[]>([...withModule(), 'list', '--state', 'checkout']);
    expect(inCheckout.map((j) => j.id)).toEqual(['o-1']);
    expect(await spoolOk([...withModule(), 'list', '--state', 'checkout.paying'])).toMatch(/^o-1\s+order@2\s+active\s+checkout\.paying\s+-\s+2\s/m);

    const shown = await spoolOk([...withModule(), 'show', 'o-1']);
    expect(field(shown, 'machine')).toBe('order@2');
    expect(field(shown, 'context')).toBe('{"sku":"A-1","card":"[redacted]"}');
    const shownJson = await spool([...withModule(), 'show', 'o-1', '--json']);
    expect(shownJson.stdout).toContain('"card": "[redacted]"');
    expect(`${shown}${shownJson.stdout}${await spoolOk([...withModule(), 'list', '--json'])}`).not.toContain('4111');
    expect(shown).toMatch(/^2\s+PAY\s+applied\s+checkout\.cart -> checkout\.paying\s/m);

    const declined = await spoolJson<SendResult>([...withModule(), 'send', 'o-1', 'DECLINED']);
    expect(declined.job.value).toEqual({ checkout: 'cart' });
    await spoolOk([...withModule(), 'send', 'o-1', 'PAY']);
    const paid = await spoolJson<SendResult>([...withModule(), 'send', 'o-1', 'PAID']);
    expect(paid.job.value).toBe('shipping');
    const delivered = await spoolJson<SendResult>([...withModule(), 'send', 'o-1', '{"type":"DELIVERED"}']);
    expect(delivered.job).toMatchObject({ value: 'delivered', status: 'done', final: true, revision: 6 });
    await spoolFails([...withModule(), 'send', 'o-1', 'PAY'], 'SPOOL_TERMINAL');
  });

  it('a command without the job\'s machine changes nothing: reads hide what may be sensitive, writes are refused', async () => {
    await spoolOk([...withModule(), 'start', 'order', '--id', 'o-2', '--input', '{"sku":"B-2","card":"4222-2222"}']);
    const before = await spoolJson<JobDetails>([...withModule(), 'show', 'o-2']);

    // The default module has no `order`: list, show and stats read, and write nothing.
    const listed = await spoolJson<Job[]>([...db(), 'list']);
    expect(listed.find((j) => j.id === 'o-2')).toMatchObject({ quarantine: null, revision: 1, updatedAt: before.job.updatedAt });
    const shown = await spool([...db(), 'show', 'o-2']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('[hidden: machine order is not in this --machines module');
    expect(`${shown.stdout}${JSON.stringify(listed)}${await spoolOk([...db(), 'show', 'o-2', '--json'])}`).not.toContain('4222-2222');
    await spoolOk([...db(), 'stats']);
    // A command that would run the job is refused, with what to do, and leaves it as it was.
    const refused = await spoolFails([...db(), 'send', 'o-2', 'PAY'], 'SPOOL_USAGE');
    expect(refused).toContain('Job o-2 runs machine order, which');
    expect(refused).toContain('pass --machines');
    await spoolFails([...db(), 'cancel', 'o-2'], 'SPOOL_USAGE');
    const after = await spoolJson<JobDetails>([...withModule(), 'show', 'o-2']);
    expect(after.job).toEqual(before.job);
    expect(after.history).toEqual(before.history);

    const paying = await spoolJson<SendResult>([...withModule(), 'send', 'o-2', 'PAY']);
    expect(paying.job).toMatchObject({ value: { checkout: 'paying' }, quarantine: null, revision: 2 });
  });

  it('a worker without the job\'s machine quarantines it, shown by list and show; with its machine again it goes on', async () => {
    await spoolOk([...withModule(), 'start', 'order', '--id', 'o-3', '--input', '{"sku":"C-3"}']);
    // A runtime that runs jobs (here one opened by the API with only the reference machines, as
    // `spool worker` without --machines would) recovers the store on open: the job is held back.
    const store = await SqliteStore.open(db()[1]!);
    const runtime = await createRuntime({ store, machines: [jobLifecycle, retryingJob, exportJob, approvalFlow] });
    await runtime.close();

    const listed = await spoolOk([...db(), 'list']);
    expect(listed).toMatch(/^ID\s+MACHINE\s+STATUS\s+STATE\s+PROGRESS\s+REV\s+UPDATED\s+QUARANTINED$/m);
    expect(listed).toMatch(/^o-3\s+order@2\s+active\s+checkout\.cart\s+-\s+1\s+\S+ \S+\s+machine order is not registered$/m);
    const quarantined = await spoolJson<Job[]>([...db(), 'list', '--quarantined']);
    expect(quarantined.map((j) => [j.id, j.quarantine])).toContainEqual(['o-3', 'machine order is not registered']);
    expect(field(await spoolOk([...db(), 'show', 'o-3']), 'quarantine')).toBe('machine order is not registered');

    // With its machine, the next command that runs the job releases it.
    const paying = await spoolJson<SendResult>([...withModule(), 'send', 'o-3', 'PAY']);
    expect(paying.job).toMatchObject({ value: { checkout: 'paying' }, quarantine: null });
  });

  it('reads an event or input from a file (@file) or standard input (-): payloads past the command line\'s size', async () => {
    const fdb = ['--db', join(TMP, 'files.db'), '--machines', modulePath()];
    const input = join(TMP, 'input.json');
    writeFileSync(input, JSON.stringify({ sku: 'from-file' }));
    const started = await spoolJson<{ job: Job }>([...fdb, 'start', 'order', '--id', 'f-1', '--input', `@${input}`]);
    expect(started.job.context).toMatchObject({ sku: 'from-file' });
    // 200 KB: more than one command-line argument may carry here, less than maxPayloadBytes.
    const big = join(TMP, 'big-event.json');
    writeFileSync(big, JSON.stringify({ type: 'PAY', note: 'x'.repeat(200_000) }));
    expect(await spoolJson<SendResult>([...fdb, 'send', 'f-1', `@${big}`])).toMatchObject({ status: 'applied', job: { value: { checkout: 'paying' } } });
    // The bin: standard input, and the TypeScript module loaded through its tsx registration.
    const piped = await runSpool([...fdb, 'send', 'f-1', '-', '--json'], TMP, '{"type":"DECLINED"}');
    expect(piped.code).toBe(0);
    expect((JSON.parse(piped.stdout) as SendResult).job.value).toEqual({ checkout: 'cart' });
    const missing = await spoolFails([...fdb, 'send', 'f-1', `@${join(TMP, 'nope.json')}`], 'SPOOL_USAGE');
    expect(missing).toContain('The event: cannot read');
    expect(missing).toContain('nope.json');
  });

  it('send says when an action failed after the commit, and show keeps it as a note', async () => {
    const mod = join(TMP, 'notify-machines.ts');
    writeFileSync(
      mod,
      `import { setup } from 'xstate';
export const notify = setup({
  actions: { ring: () => { throw new Error('bell is broken'); } },
}).createMachine({ id: 'notify', initial: 'idle', states: { idle: { on: { RING: { target: 'rung', actions: 'ring' } } }, rung: {} } });
`,
    );
    const ndb = ['--db', join(TMP, 'notify.db'), '--machines', mod];
    await spoolOk([...ndb, 'start', 'notify', '--id', 'n-1']);
    const out = await spoolOk([...ndb, 'send', 'n-1', 'RING']);
    expect(field(out, 'outcome')).toBe('applied');
    expect(out).toContain('warning: action ring failed after the commit (the transition stands): bell is broken');
    const json = await spoolJson<SendResult & { actionsFailed: unknown }>([...ndb, 'send', 'n-1', 'RING', '--event-id', 'again']);
    expect(json.status).toBe('ignored');
    const details = await spoolJson<JobDetails>([...ndb, 'show', 'n-1']);
    expect(details.notes).toEqual([expect.objectContaining({ kind: 'action-failed', message: 'action ring failed after the commit of revision 2 (the transition stands): bell is broken' })]);
  });

  it('refuses to send to a job whose machine version the module does not register, changing nothing', async () => {
    const v3 = join(TMP, 'order-v3-machines.ts');
    writeFileSync(v3, readFileSync(modulePath(), 'utf8').replace('version: 2,', 'version: 3,'));
    const vdb = ['--db', join(TMP, 'versions.db')];
    await spoolOk([...vdb, '--machines', modulePath(), 'start', 'order', '--id', 'v-1', '--input', '{"sku":"a"}']);
    const before = await spoolJson<JobDetails>([...vdb, '--machines', modulePath(), 'show', 'v-1']);
    const line = await spoolFails([...vdb, '--machines', v3, 'send', 'v-1', 'PAY'], 'SPOOL_USAGE');
    expect(line).toContain('Job v-1 runs order version 2;');
    expect(line).toContain('registers version 3 and no migration from 2');
    expect(await spoolJson<JobDetails>([...vdb, '--machines', modulePath(), 'show', 'v-1'])).toEqual(before);
  });

  it('records an activity without running it (a worker runs activities) and shows it', async () => {
    const effects = join(TMP, 'upload-machines.ts');
    writeFileSync(
      effects,
      `import { fromPromise, setup } from 'xstate';

export const upload = setup({
  actors: { upload: fromPromise(async () => { throw new Error('a CLI command must not run activities'); }) },
}).createMachine({
  id: 'upload',
  initial: 'uploading',
  states: {
    uploading: { invoke: { id: 'upload', src: 'upload', onDone: 'done', onError: 'failed' }, on: { CANCEL: 'cancelled' } },
    done: { type: 'final' },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
`,
    );
    const args = ['--db', join(TMP, 'upload.db'), '--machines', effects];
    await spoolOk([...args, 'start', 'upload', '--id', 'u-1']);
    const details = await spoolJson<JobDetails>([...args, 'show', 'u-1']);
    expect(details.job.value).toBe('uploading');
    expect(details.effects.map((e) => [e.src, e.status, e.attempt, e.active])).toEqual([['upload', 'pending', 0, true]]);
    expect(details.attempts).toEqual([]);
    const human = await spoolOk([...args, 'show', 'u-1']);
    expect(human).toMatch(/^activities:\nSRC\s+STATUS\s+ATTEMPTS\s+NEXT RUN\s+RESULT\nupload\s+pending\s+0\/\d+/m);
    expect(human).toContain('run in a worker process');
    expect(field(human, 'waiting for')).toBe('activity upload (pending); or an event: CANCEL');

    const cancelled = await spoolJson<SendResult>([...args, 'send', 'u-1', 'CANCEL']);
    expect(cancelled.job).toMatchObject({ value: 'cancelled', final: true });
    const after = await spoolJson<JobDetails>([...args, 'show', 'u-1']);
    expect(after.effects.map((e) => [e.attempt, e.active])).toEqual([[0, false]]);
    expect(after.attempts).toEqual([]);
  });

  it('refuses to run the demo without job-lifecycle, before touching the database', async () => {
    const db = join(TMP, 'demo-refused.db');
    const line = await spoolFails(['--db', db, '--machines', modulePath(), 'demo'], 'SPOOL_USAGE');
    expect(line).toContain('job-lifecycle');
    expect(existsSync(db)).toBe(false);
  });

  it('refuses a module that exports no machines, with a clear message', async () => {
    const empty = join(TMP, 'no-machines.ts');
    writeFileSync(empty, `export const answer = 42;\nexport default { greeting: 'hello' };\n`);
    const line = await spoolFails(['--db', join(TMP, 'empty.db'), '--machines', empty, 'list'], 'SPOOL_BAD_MACHINES_MODULE');
    expect(line).toContain(`No machines found in ${empty} (exports: answer, default)`);
    expect(line).toContain('createMachine');
    await spoolFails(['--machines', empty, 'machines'], 'SPOOL_BAD_MACHINES_MODULE');
  });

  it('refuses a module that cannot be loaded, or is not there', async () => {
    const broken = join(TMP, 'broken.ts');
    writeFileSync(broken, `import { gone } from './does-not-exist.ts';\nexport const m = gone;\n`);
    expect(await spoolFails(['--machines', broken, 'machines'], 'SPOOL_BAD_MACHINES_MODULE')).toContain('Could not load machines module');
    expect(await spoolFails(['--machines', join(TMP, 'nowhere.ts'), 'machines'], 'SPOOL_BAD_MACHINES_MODULE')).toContain('No machines module at');
  });
});

describe('collectDefinitions', () => {
  const a = createMachine({ id: 'a', initial: 's', states: { s: {} } });
  const b = createMachine({ id: 'b', initial: 's', states: { s: {} } });
  const c = createMachine({ id: 'c', initial: 's', states: { s: {} } });

  it('takes definitions, bare machines, arrays and a default export of each kind', () => {
    const defA = { machine: a, version: 3 };
    expect(collectDefinitions({ defA, list: [b, 'x', 1], default: { c, other: {} } })).toEqual([defA, b, c]);
    expect(collectDefinitions({ default: [a, b] })).toEqual([a, b]);
    expect(collectDefinitions({ default: defA })).toEqual([defA]);
    expect(collectDefinitions({ default: c })).toEqual([c]);
  });

  it('leaves out a bare machine a definition wraps, and takes each value once', () => {
    const defA = { machine: a, version: 2 };
    expect(collectDefinitions({ a, defA, again: [defA, a], alsoB: b, b })).toEqual([defA, b]);
  });

  it('finds nothing in a module without machines', () => {
    expect(collectDefinitions({ x: 1, default: { y: 'z' }, list: [{}] })).toEqual([]);
  });
});

describe("the worker's lines", () => {
  it('a timer fired late (after a downtime) says when it was due and that its deadline was kept; one on time says nothing more', () => {
    const due = Date.parse('2026-01-01T00:00:00Z');
    const fired = (late: number) => describeWork({ type: 'timer.fired', jobId: 'j', timerId: 't', eventType: 'REMIND', dueAt: due, firedAt: due + late });
    expect(fired(5_000)).toBe('  j  timer fired: REMIND (due 2026-01-01T00:00:00.000Z, 5 s late: the original deadline was kept)');
    expect(fired(7_200_000)).toContain('2.0 h late');
    expect(fired(20)).toBe('  j  timer fired: REMIND');
  });
});

describe('spool demo (npm start)', () => {
  const dir = () => join(TMP, 'demo');

  it('drives eight jobs to their ends (four by events, four through the worker loop), tells what to try next, and runs again on the same database', async () => {
    mkdirSync(dir(), { recursive: true });
    // `npm start`: the bin, without a terminal, runs the demo and exits.
    const out = await spoolOk(['demo'], dir(), runSpool);
    expect(out).toContain('Spool demo on ./spool.db');
    for (const command of ['npx spool list', 'npx spool show demo-', 'npx spool machines', 'npx spool start job-lifecycle', 'npx spool send mine-']) {
      expect(out).toContain(command);
    }
    expect(out).toMatch(/START\s+queued -> processing/);
    expect(out).toMatch(/START\s+ignored: no transition in processing/);

    expect(existsSync(join(dir(), 'spool.db'))).toBe(true);
    const jobs = await spoolJson<Job[]>(['list'], dir()); // default --db ./spool.db, as the demo used
    expect(jobs).toHaveLength(8);
    expect(jobs.every((j) => j.final && j.status === 'done')).toBe(true);
    const lifecycle = jobs.filter((j) => j.machineId === 'job-lifecycle');
    expect(lifecycle.map((j) => (j.context as { outcome: string }).outcome).sort()).toEqual(['cancelled', 'completed', 'failed', 'partial']);
    const byWorker = Object.fromEntries(jobs.filter((j) => j.machineId !== 'job-lifecycle').map((j) => [j.id.replace(/^demo-\w+-/, ''), j.value]));
    expect(byWorker).toEqual({ retry: 'completed', export: 'completed', approval: 'expired', approved: 'approved' });
    expect(out).toMatch(/activity process attempt 1 started/);
    expect(out).toMatch(/activity attempt 1 retrying/);
    expect(out).toMatch(/timer fired: xstate\.after\.deadline/);
    // The suggested `show` names one of them.
    const suggested = /npx spool show (demo-\S+)/.exec(out)?.[1];
    expect(jobs.map((j) => j.id)).toContain(suggested);

    const again = await spoolJson<{ db: string; jobs: Job[] }>(['demo'], dir());
    expect(again.jobs).toHaveLength(8);
    const all = await spoolJson<Job[]>(['list'], dir());
    expect(all).toHaveLength(16);
    expect(new Set(all.map((j) => j.id)).size).toBe(16);
    expect(all.every((j) => j.final)).toBe(true);
    expect(await spoolJson<Job[]>(['list', '--status', 'active'], dir())).toEqual([]);
  });

  it('uses --db and repeats it in the suggested commands', async () => {
    const db = join(TMP, 'demo-elsewhere.db');
    const out = await spoolOk(['--db', db, 'demo']);
    expect(out).toContain(`npx spool --db ${db} list`);
    expect(await spoolJson<Job[]>(['--db', db, 'list'])).toHaveLength(8);
  });
});
