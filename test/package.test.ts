/**
 * The package as a new user gets it: `npm pack` of the built package (dist/, built by the global
 * setup), installed from the tarball into a fresh app outside this repository, then used there
 * as a user would: plain `node` runs an app on the API, `tsc` type-checks a TypeScript app under
 * strict settings (deliberate mistakes must fail to compile), `npx spool` runs commands, and
 * publint and arethetypeswrong find nothing wrong with the tarball.
 *
 * Installing the tarball installs its dependencies from the registry, preferring npm's cache
 * (which the project's own install filled), with install scripts off: better-sqlite3's script
 * compiles its native addon for about two minutes. The addon is copied instead from this
 * project's install of the same better-sqlite3 version, built on this machine for this Node:
 * the very file that compilation would produce. Every other dependency is installed as it is.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** A package of this project's install (some, publint's, export no package.json to resolve). */
const packageDir = (name: string) => join(ROOT, 'node_modules', name);
const versionOf = (name: string) => (JSON.parse(readFileSync(join(packageDir(name), 'package.json'), 'utf8')) as { version: string }).version;
const TSC = join(packageDir('typescript'), 'bin', 'tsc');
const PUBLINT = join(packageDir('publint'), 'src', 'cli.js');
const ATTW = join(packageDir('@arethetypeswrong/cli'), 'dist', 'index.js');

let dir = '';
let app = '';
let tarball = '';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a command in the app (or `cwd`), as the user's shell would: without the suite's NODE_OPTIONS. */
function run(command: string, args: readonly string[], cwd = app): Promise<Run> {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function ok(command: string, args: readonly string[], cwd = app): Promise<string> {
  const result = await run(command, args, cwd);
  expect(result.code, `${command} ${args.join(' ')}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result.stdout;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'spool-package-'));
  app = join(dir, 'app');
  mkdirSync(app);
  // dist/ is built by the global setup; packing runs no build of its own (a second build would
  // swap dist/ under the other test files' `spool` processes).
  const packed = JSON.parse(await ok('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT)) as { filename: string; files: { path: string }[] }[];
  tarball = join(dir, packed[0]!.filename);
  expect(packed[0]!.files.map((f) => f.path)).toEqual(expect.arrayContaining(['bin/spool.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'README.md']));
  expect(packed[0]!.files.some((f) => /^(src|persistence|machines)\//.test(f.path))).toBe(false);

  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'fresh-app', private: true, type: 'module' }, null, 2));
  await ok('npm', ['install', tarball, `@types/node@${versionOf('@types/node')}`, '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund'], app);
  const installed = join(app, 'node_modules', 'better-sqlite3');
  expect(JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version).toBe(versionOf('better-sqlite3'));
  mkdirSync(join(installed, 'build', 'Release'), { recursive: true });
  copyFileSync(join(packageDir('better-sqlite3'), 'build', 'Release', 'better_sqlite3.node'), join(installed, 'build', 'Release', 'better_sqlite3.node'));
}, 240_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the package.json exports', () => {
  it('name every store entry under persistence/ (persistence/memory, each driver of persistence/drivers/: a new one needs its entry), each with types', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types?: string; default?: string } | string> };
    const folders = [...readdirSync(join(ROOT, 'persistence')), ...readdirSync(join(ROOT, 'persistence', 'drivers')).map((d) => `drivers/${d}`)];
    const stores = folders.filter((name) => existsSync(join(ROOT, 'persistence', name, 'index.ts')));
    expect(stores).toEqual(expect.arrayContaining(['memory', 'drivers/better-sqlite3', 'drivers/pg']));
    const targets = Object.values(pkg.exports).map((t) => (typeof t === 'string' ? t : t.default));
    for (const store of stores) {
      expect(targets, `an export of persistence/${store}/index.ts`).toContain(`./dist/persistence/${store}/index.js`);
    }
    for (const [entry, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') continue;
      expect(target.types, `exports["${entry}"].types`).toMatch(/^\.\/dist\/.+\.d\.ts$/);
      expect(existsSync(join(ROOT, target.types!)) && existsSync(join(ROOT, target.default!)), `${entry} is built`).toBe(true);
    }
  });
});

describe('the packed package, installed into a fresh app', () => {
  it('runs a plain `node app.mjs` on the API: jobs started, driven by events and by an activity, to their final states', async () => {
    writeFileSync(
      join(app, 'app.mjs'),
      `import { createRuntime } from 'spool';
import { SqliteStore } from 'spool/sqlite';
import { exportJob, jobLifecycle } from 'spool/machines';

const store = await SqliteStore.open('./app.db');
const runtime = await createRuntime({ store, machines: [jobLifecycle, exportJob] });
const job = await runtime.start('job-lifecycle', { name: 'resize', items: 1 });
await runtime.send(job.id, { type: 'START' });
await runtime.send(job.id, { type: 'ITEM_DONE' });
const exported = await runtime.start('export-job', { dataset: 'sales', rows: 10 });
const done = await runtime.waitFor(exported.id, (j) => j.final, { timeoutMs: 60_000 });
const lifecycle = await runtime.get(job.id);
const assets = (await runtime.details(exported.id)).assets.map((a) => a.uri);
console.log(JSON.stringify({ lifecycle: lifecycle.value, output: lifecycle.output, exported: done.value, assets }));
await runtime.close();
await store.close();
`,
    );
    const out = JSON.parse(await ok('node', ['app.mjs'])) as Record<string, unknown>;
    expect(out).toEqual({
      lifecycle: 'completed',
      output: { outcome: 'completed', succeeded: 1, failed: 0, error: null },
      exported: 'completed',
      assets: [expect.stringMatching(/^provider:\/\/exports\/sales-.+\.csv$/)],
    });
  });

  it('type-checks a TypeScript app under strict, exactOptionalPropertyTypes, verbatimModuleSyntax and erasableSyntaxOnly, without allowImportingTsExtensions; mistakes fail to compile', async () => {
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(appTsconfig(true), null, 2));
    writeFileSync(join(app, 'typed.ts'), TYPED_APP);
    await ok('node', [TSC, '-p', 'tsconfig.json']);
    // Each mistake, without its @ts-expect-error, is an error at its line.
    writeFileSync(join(app, 'typed.ts'), TYPED_APP.replaceAll('// @ts-expect-error', '//'));
    const failing = await run('node', [TSC, '-p', 'tsconfig.json']);
    expect(failing.code).not.toBe(0);
    const lines = TYPED_APP.split('\n');
    const expected = lines.flatMap((line, i) => (line.includes('@ts-expect-error') ? [i + 2] : []));
    const reported = [...failing.stdout.matchAll(/^typed\.ts\((\d+),\d+\): error/gm)].map((m) => Number(m[1]));
    expect([...new Set(reported)]).toEqual(expected);
    writeFileSync(join(app, 'typed.ts'), TYPED_APP);
    // Spool's own declaration files check clean with skipLibCheck off (xstate's own have errors
    // under exactOptionalPropertyTypes, which are theirs: only files of spool and the app count).
    writeFileSync(join(app, 'tsconfig.libcheck.json'), JSON.stringify(appTsconfig(false), null, 2));
    const strict = await run('node', [TSC, '-p', 'tsconfig.libcheck.json']);
    const ours = strict.stdout.split('\n').filter((l) => /^(node_modules\/spool\/|typed\.ts)/.test(l));
    expect(ours).toEqual([]);
  }, 120_000);

  it('runs `npx spool` there: help, a command on a database, and the app\'s own TypeScript machines module', async () => {
    expect(await ok('npx', ['--no-install', 'spool', '--help'])).toContain('Usage: spool');
    const started = JSON.parse(await ok('npx', ['--no-install', 'spool', '--db', 'cli.db', 'start', 'job-lifecycle', '--id', 'j1', '--input', '{"name":"cli"}', '--json'])) as { job: { id: string; value: unknown } };
    expect(started.job).toMatchObject({ id: 'j1', value: 'queued' });
    writeFileSync(join(app, 'machines.ts'), `import { createMachine } from 'xstate';
const states: Record<string, object> = { idle: { on: { PING: 'done' } }, done: { type: 'final' } };
export const ping = createMachine({ id: 'ping', initial: 'idle', states });
`);
    await ok('npx', ['--no-install', 'spool', '--db', 'cli.db', '--machines', 'machines.ts', 'start', 'ping', '--id', 'p1']);
    const sent = JSON.parse(await ok('npx', ['--no-install', 'spool', '--db', 'cli.db', '--machines', 'machines.ts', 'send', 'p1', '{"type":"PING"}', '--json'])) as { status: string; job: { value: unknown; final: boolean } };
    expect(sent).toMatchObject({ status: 'applied', job: { value: 'done', final: true } });
  }, 60_000);

  it('publint and arethetypeswrong report no problems with the tarball', async () => {
    expect(await ok('node', [PUBLINT, 'run', tarball, '--strict'], dir)).toContain('All good!');
    // ESM only, by decision (README, Install): require() and node10 resolution are not offered.
    const attw = await run('node', [ATTW, tarball, '--profile', 'esm-only', '--format', 'json'], dir);
    expect(attw.code, attw.stdout + attw.stderr).toBe(0);
    const report = JSON.parse(attw.stdout) as { analysis: { problems: { kind: string; resolutionKind?: string }[] } };
    expect(report.analysis.problems.filter((p) => p.resolutionKind !== 'node10' && p.resolutionKind !== 'node16-cjs')).toEqual([]);
  }, 60_000);
});

function appTsconfig(skipLibCheck: boolean): object {
  return {
    compilerOptions: {
      target: 'ES2023',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      lib: ['ES2023'],
      types: ['node'],
      strict: true,
      exactOptionalPropertyTypes: true,
      verbatimModuleSyntax: true,
      erasableSyntaxOnly: true,
      noUncheckedIndexedAccess: true,
      noEmit: true,
      skipLibCheck,
    },
    files: ['typed.ts'],
  };
}

/** A user's typed app: its own machine with a typed activity and a checked definition, used with no cast. */
const TYPED_APP = `import { activity, createRuntime, defineJob, runWorker, type Job, type Runtime } from 'spool';
import { SqliteStore } from 'spool/sqlite';
import { MemoryStore } from 'spool/memory';
import { jobLifecycle } from 'spool/machines';
import { VirtualClock } from 'spool/testing';
import { createServer } from 'spool/server';
import { createClient, JobNotFoundError } from 'spool/client';
import { assign, setup } from 'xstate';
import { z } from 'zod';

const render = activity<{ uri: string }, { width: number }>(async ({ input, idempotencyKey, attempt, progress, defer }) => {
  if (attempt > 3) return defer((token) => console.log('settle later with', token));
  await progress(50);
  return { uri: \`s3://renders/\${idempotencyKey}/\${input.width}.png\` };
});

const imageMachine = setup({
  types: { input: {} as { width: number }, context: {} as { width: number; uri: string | null }, events: {} as { type: 'CANCEL' } },
  actors: { render },
}).createMachine({
  id: 'image-render',
  context: ({ input }) => ({ width: input.width, uri: null }),
  initial: 'rendering',
  on: { CANCEL: '.cancelled' },
  states: {
    rendering: { invoke: { id: 'render', src: 'render', input: ({ context }) => ({ width: context.width }), onDone: { target: 'done', actions: assign({ uri: ({ event }) => event.output.uri }) } } },
    done: { type: 'final' },
    cancelled: { type: 'final' },
  },
});

export const image = defineJob({
  machine: imageMachine,
  input: z.strictObject({ width: z.number().int().min(1) }),
  activities: { render: { maxAttempts: 5, backoff: { initialMs: 10 } } },
  cancel: { state: 'cancelled' },
});

const store = await SqliteStore.open('./typed.db');
const runtime = await createRuntime({ store, machines: [image, jobLifecycle], clock: new VirtualClock(0) });
const job = await runtime.start('image-render', { width: 640 });
const done = await runtime.waitFor(job.id, (j) => j.final);
const uri: string | null = done.context.uri;
const lifecycle = await runtime.start('job-lifecycle', { name: 'resize' });
await runtime.send(lifecycle.id, { type: 'PROGRESS', percent: 40 });
const found = await runtime.get(lifecycle.id);
const progress: number = found.context.progress;

// @ts-expect-error a wrong machine id
await runtime.start('image-rendr', { width: 640 });
// @ts-expect-error a wrong input field
await runtime.start('image-render', { widht: 640 });
// @ts-expect-error an unknown event
await runtime.send(lifecycle.id, { type: 'PAUSE' });
// @ts-expect-error an activity the machine does not have
defineJob({ machine: imageMachine, activities: { rendr: { maxAttempts: 2 } } });
// @ts-expect-error a cancel state the machine lacks
defineJob({ machine: imageMachine, cancel: { state: 'canceled' } });

// The HTTP client is typed by the same machines.
const client = createClient<[typeof image, typeof jobLifecycle]>({ url: 'http://127.0.0.1:7420', token: 'a-token-0123456789abcdef' });
const typedInput = async () => (await client.start('image-render', { width: 640 })).context.uri;
// @ts-expect-error the client refuses a wrong machine id too
const wrongClient = async () => client.start('image-rendr', { width: 640 });
// @ts-expect-error and an unknown event
const wrongEvent = async () => client.send(lifecycle.id, { type: 'PAUSE' });
console.log(typeof typedInput, typeof wrongClient, typeof wrongEvent, JobNotFoundError.name);

// The untyped API takes the typed runtime and its jobs.
const loose: Runtime = runtime;
const describe = (j: Job): string => \`\${j.machineId} \${j.revision}\`;
console.log(uri, progress, describe(done), typeof loose.start, typeof runWorker, typeof createServer, typeof MemoryStore);
await runtime.close();
await store.close();
`;
