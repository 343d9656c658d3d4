/**
 * The CLI's manners: every command's `--help` (subcommands too) has examples and lists the global
 * options; colour only on a terminal that wants it (the decision as a function, then real runs
 * with FORCE_COLOR and NO_COLOR); `--db` and `--machines` from the environment, a config file or
 * package.json, by one precedence, and a bad config file named in its error.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { buildProgram } from '../src/cli/program.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { ConfigFileError, resolveConfig } from '../src/cli/config.ts';
import { colourWanted, plain, useColour } from '../src/cli/style.ts';
import { jsonText, table } from '../src/cli/format.ts';
import { Resources } from './helpers/resources.ts';
import { runSpool } from './helpers/spoolCli.ts';

const res = new Resources();
afterEach(() => {
  useColour(false);
  return res.dispose();
});

/** Every command under `command`, depth first, with its full name (`schedule add`). */
function walk(command: Command, prefix = ''): { name: string; command: Command }[] {
  return command.commands.flatMap((c) => {
    const name = `${prefix}${c.name()}`;
    return [{ name, command: c }, ...walk(c, `${name} `)];
  });
}

/** What `spool <name> --help` prints, taken from the program's own help output. */
function helpOf(command: Command, sink: { text: string }): string {
  sink.text = '';
  command.outputHelp();
  return sink.text;
}

/** Run main() in process and collect its output. */
const run = (args: readonly string[], io: { cwd: string; env?: Record<string, string> }) => runCli(args, io.cwd, io.env ? { env: io.env } : {});

describe('--help', () => {
  it('every command, subcommands included, shows examples and the global --db, --machines and --json', () => {
    const sink = { text: '' };
    const program = buildProgram({ stdout: (t) => (sink.text += t), stderr: (t) => (sink.text += t), cwd: process.cwd() }, () => {});
    const commands = walk(program);
    // The walk reaches the nested ones too (a regression would quietly check fewer).
    expect(commands.map((c) => c.name)).toEqual(expect.arrayContaining(['start', 'show', 'tail', 'serve', 'demo', 'doctor', 'schedule', 'schedule add', 'schedule remove']));
    const missing: string[] = [];
    for (const { name, command } of commands) {
      const help = helpOf(command, sink);
      if (!/\nExamples?:\n {2}spool /.test(help)) missing.push(`${name}: no example`);
      for (const flag of ['--db <file|url>', '--machines <module>', '--json']) if (!help.includes(flag)) missing.push(`${name}: no ${flag}`);
    }
    expect(missing).toEqual([]);
  });

  it('prints through the real bin, exits 0, and shows the globals under the command', async () => {
    const out = await runSpool(['schedule', 'add', '--help'], process.cwd());
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/Global Options:[\s\S]*--db <file\|url>/);
    expect(out.stdout).toContain('Examples:\n  spool schedule add nightly');
  });
});

/** The examples of every command's help, with the command they belong to (`spool` for the root). */
function helpExamples(): { command: string; line: string }[] {
  const sink = { text: '' };
  const program = buildProgram({ stdout: (t) => (sink.text += t), stderr: (t) => (sink.text += t), cwd: process.cwd() }, () => {});
  return [{ name: 'spool', command: program }, ...walk(program)].flatMap(({ name, command }) => {
    const block = /\nExamples?:\n((?: {2}.*\n?)+)/.exec(helpOf(command, sink))?.[1] ?? '';
    return block.split('\n').filter((l) => l.trim() !== '').map((l) => ({ command: name, line: l.trim() }));
  });
}

/** An example line as arguments: the shell's quotes undone, `VAR=x` prefixes, `# comments`, `| ...` and `> file` left out. */
function exampleArgs(line: string, vars: Record<string, string>): { env: Record<string, string>; args: string[] } {
  const words: string[] = [];
  const pattern = /'([^']*)'|"([^"]*)"|(\S+)/g;
  for (let m = pattern.exec(line); m !== null; m = pattern.exec(line)) {
    const word = m[1] ?? (m[2] ?? m[3]!).replace(/\$(\w+)/g, (_, name: string) => vars[name] ?? '');
    if (m[3] !== undefined && ['|', '>', '#'].includes(m[3])) break;
    words.push(word);
  }
  const env: Record<string, string> = {};
  while (/^\w+=/.test(words[0] ?? '')) {
    const [name, ...value] = words.shift()!.split('=');
    env[name!] = value.join('=');
  }
  expect(words.shift()).toBe('spool');
  return { env, args: words };
}

describe('--version and --json after a command', () => {
  it("--version is the package's only before any command; after one it is the command's own option", async () => {
    const dir = res.tempDir();
    const version = (await run(['--version'], { cwd: dir })).stdout;
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await run(['--db', 'x.db', '--version', 'graph', 'job-lifecycle'], { cwd: dir })).toMatchObject({ code: 0, stdout: version });
    const graph = await run(['graph', 'job-lifecycle', '--version', '1'], { cwd: dir });
    expect(graph).toMatchObject({ code: 0, stderr: '' });
    expect(graph.stdout).toMatch(/^stateDiagram-v2\n/);
    const exported = await run(['--json', 'export', 'job-lifecycle', '--version', '1'], { cwd: dir });
    expect(JSON.parse(exported.stdout)).toMatchObject({ machine: 'job-lifecycle', source: expect.stringContaining('createMachine') });
    const missing = await run(['export', 'job-lifecycle', '--version', '9'], { cwd: dir });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/SPOOL_USAGE: Machine job-lifecycle has no version 9/);
    // A command without a --version of its own refuses it instead of printing the package's.
    expect(await run(['list', '--version'], { cwd: dir })).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining("unknown option '--version'") });
  });

  it('graph with --json, before or after the command, prints the JSON tree', async () => {
    const dir = res.tempDir();
    for (const args of [['--json', 'graph', 'job-lifecycle'], ['graph', 'job-lifecycle', '--json']]) {
      const out = await run(args, { cwd: dir });
      expect(out.code, out.stderr).toBe(0);
      const tree = JSON.parse(out.stdout) as { root: { states: { key: string; transitions: unknown[] }[] } };
      expect(tree.root.states.map((s) => s.key)).toContain('queued');
      expect(tree.root.states.flatMap((s) => s.transitions).length).toBeGreaterThan(0);
    }
    const both = await run(['--json', 'graph', 'job-lifecycle', '--format', 'svg'], { cwd: dir });
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/SPOOL_USAGE.*--json prints the JSON tree/);
  });
});

describe('JSON output', () => {
  it('gives machine versions as the numbers definitions use, and leaves the user\'s values as they were', async () => {
    const dir = res.tempDir();
    const started = JSON.parse((await run(['--json', 'start', 'job-lifecycle', '--id', 'n1', '--input', '{"name":"n"}'], { cwd: dir })).stdout) as { job: { machineVersion: unknown } };
    expect(started.job.machineVersion).toBe(1);
    expect((JSON.parse((await run(['--json', 'list'], { cwd: dir })).stdout) as { machineVersion: unknown }[])[0]!.machineVersion).toBe(1);
    const shown = JSON.parse((await run(['--json', 'show', 'n1'], { cwd: dir })).stdout) as { job: { machineVersion: unknown }; history: { machineVersion?: unknown }[] };
    expect(shown.job.machineVersion).toBe(1);
    const machines = JSON.parse((await run(['--json', 'machines'], { cwd: dir })).stdout) as { machines: { id: string; version: unknown }[] };
    expect(machines.machines.find((m) => m.id === 'job-lifecycle')!.version).toBe(1);
    expect(JSON.parse((await run(['--json', 'export', 'job-lifecycle'], { cwd: dir })).stdout)).toMatchObject({ version: 1 });
    expect(JSON.parse((await run(['--json', 'graph', 'job-lifecycle'], { cwd: dir })).stdout)).toMatchObject({ id: 'job-lifecycle', version: 1 });
    // One printer decides: a version that is not a number stays text, and the user's data is never rewritten.
    const user = { machineVersion: '7', version: '2', nested: [{ machineId: 'x', machineVersion: '3' }] };
    expect(JSON.parse(jsonText({ id: 'j', machineId: 'm', machineVersion: 'v2', context: user, input: user, job: { id: 'k', machineId: 'm', machineVersion: '12' } }))).toEqual({
      id: 'j', machineId: 'm', machineVersion: 'v2', context: user, input: user, job: { id: 'k', machineId: 'm', machineVersion: 12 },
    });
  });
});

describe('the examples in the help texts', () => {
  // Long-running or reaching outside (a server, a worker, an inspector, another database): their
  // arguments are still parsed below, with --help.
  const longRunning = /^(worker|serve|demo|inspect|tail|test|migrate-store)$/;
  // An example may name state this scratch database does not have (a token, a failed event, a job
  // a previous example ended); it must not be refused as a command line or as input.
  const refusedAsWritten = new Set(['SPOOL_USAGE', 'SPOOL_BAD_JSON', 'SPOOL_INVALID', 'SPOOL_BAD_MACHINES_MODULE', 'SPOOL_INTERNAL']);

  it('each one runs as printed, in order, on one database: none is refused as usage or input', async () => {
    const dir = res.tempDir();
    const bundled = fileURLToPath(new URL('../machines/index.ts', import.meta.url));
    writeFileSync(join(dir, 'my-machines.ts'), `export * from ${JSON.stringify(bundled)};\n`);
    writeFileSync(join(dir, 'input.json'), JSON.stringify({ subject: 'from a file' }));
    writeFileSync(join(dir, 'output.json'), JSON.stringify({ url: 's3://bucket/out.csv' }));
    const failures: string[] = [];
    const seen = new Set<string>();
    const home = process.cwd();
    process.chdir(dir); // `@input.json` is read from the process's directory
    onTestFinished(() => process.chdir(home));
    for (const { command, line } of helpExamples()) {
      if (!line.startsWith('spool ') && !/^\w+=\S+ spool /.test(line)) continue; // curl against serve
      if (seen.has(line)) continue;
      seen.add(line);
      const { env, args } = exampleArgs(line, { TOKEN: 'tok-none', DATABASE_URL: 'postgres://x' });
      const runArgs = longRunning.test(command.split(' ')[0]!) || args.includes('--watch') ? [...args, '--help'] : args;
      const out = await run(runArgs, { cwd: dir, env });
      const code = /^spool: (\w+):/.exec(out.stderr)?.[1] ?? 'none';
      if (out.code !== 0 && refusedAsWritten.has(code)) failures.push(`${line}: exit ${out.code}: ${out.stderr.trim()}`);
      if (/^\d+\.\d+\.\d+\n$/.test(out.stdout)) failures.push(`${line}: printed the package version`);
    }
    expect(seen.size).toBeGreaterThan(40);
    expect(failures).toEqual([]);
  }, 120_000);
});

describe('colour', () => {
  it('is on for a terminal, off for a pipe, off with NO_COLOR, and FORCE_COLOR decides when set', () => {
    expect(colourWanted(true, {})).toBe(true);
    expect(colourWanted(false, {})).toBe(false);
    expect(colourWanted(undefined, {})).toBe(false);
    expect(colourWanted(true, { NO_COLOR: '1' })).toBe(false);
    expect(colourWanted(true, { NO_COLOR: '' })).toBe(true); // no-color.org: present and not empty
    expect(colourWanted(true, { TERM: 'dumb' })).toBe(false);
    expect(colourWanted(true, { NODE_DISABLE_COLORS: '1' })).toBe(false);
    expect(colourWanted(false, { FORCE_COLOR: '1' })).toBe(true);
    expect(colourWanted(false, { FORCE_COLOR: '' })).toBe(true);
    expect(colourWanted(false, { FORCE_COLOR: '3', NO_COLOR: '1' })).toBe(true);
    expect(colourWanted(true, { FORCE_COLOR: '0' })).toBe(false);
    expect(colourWanted(true, { FORCE_COLOR: 'false' })).toBe(false);
  });

  it('keeps tables aligned: widths are measured without the escapes', () => {
    useColour(true);
    const text = table(['ID', 'STATUS', 'NOTE'], [['a', '\u001b[32mdone\u001b[39m', 'x'], ['bbbbbb', 'active', 'y']]);
    expect(text).toContain('\u001b[');
    expect(plain(text)).toBe('ID      STATUS  NOTE\na       done    x\nbbbbbb  active  y');
  });

  it('a real run with FORCE_COLOR colours states, statuses, headings and the error prefix; with NO_COLOR none', async () => {
    const dir = res.tempDir();
    const db = join(dir, 'spool.db');
    const start = await runSpool(['--db', db, 'start', 'job-lifecycle', '--id', 'c1', '--input', '{"name":"c"}'], dir);
    expect(start.code).toBe(0);
    expect(start.stdout).not.toContain('\u001b['); // a pipe: plain
    const coloured = await runSpool(['--db', db, 'show', 'c1'], dir, undefined, { FORCE_COLOR: '1' });
    expect(coloured.code).toBe(0);
    expect(coloured.stdout).toContain('\u001b[36mqueued\u001b[39m'); // the state
    expect(coloured.stdout).toContain('\u001b[33mactive\u001b[39m'); // the status
    expect(coloured.stdout).toContain('\u001b[1mhistory:\u001b[22m'); // a heading
    const failed = await runSpool(['--db', db, 'show', 'nope'], dir, undefined, { FORCE_COLOR: '1' });
    expect(failed.stderr).toMatch(/^\u001b\[1m\u001b\[31mspool: SPOOL_NOT_FOUND:/);
    const uncoloured = await runSpool(['--db', db, 'show', 'c1'], dir, undefined, { NO_COLOR: '1' });
    expect(uncoloured.stdout).not.toContain('\u001b[');
    expect(uncoloured.stdout).toBe(plain(coloured.stdout));
    // --json is never coloured.
    const json = await runSpool(['--db', db, 'show', 'c1', '--json'], dir, undefined, { FORCE_COLOR: '1' });
    expect(json.stdout).not.toContain('\u001b[');
  });
});

describe('--db and --machines from the environment and config files', () => {
  it('takes the flag over SPOOL_DB over spool.config.json over package.json over the default, each setting on its own', () => {
    const dir = res.tempDir();
    const cwd = join(dir, 'app', 'sub');
    mkdirSync(cwd, { recursive: true });
    expect(resolveConfig({ flags: {}, env: {}, cwd: dir })).toEqual({ db: { value: './spool.db', source: 'default' }, machines: undefined });
    writeFileSync(join(dir, 'app', 'package.json'), JSON.stringify({ name: 'app', spool: { db: 'pkg.db', machines: './machines.ts' } }));
    const pkgFile = join(dir, 'app', 'package.json');
    expect(resolveConfig({ flags: {}, env: {}, cwd })).toEqual({
      // Relative to the package.json that says it, not to the working directory below it.
      db: { value: join(dir, 'app', 'pkg.db'), source: 'package.json', file: pkgFile },
      machines: { value: join(dir, 'app', 'machines.ts'), source: 'package.json', file: pkgFile },
    });
    writeFileSync(join(cwd, 'spool.config.json'), JSON.stringify({ db: 'config.db' }));
    const configFile = join(cwd, 'spool.config.json');
    expect(resolveConfig({ flags: {}, env: {}, cwd })).toEqual({
      db: { value: 'config.db', source: 'config', file: configFile },
      machines: { value: join(dir, 'app', 'machines.ts'), source: 'package.json', file: pkgFile },
    });
    expect(resolveConfig({ flags: {}, env: { SPOOL_DB: 'env.db', SPOOL_MACHINES: 'env.ts' }, cwd })).toEqual({
      db: { value: 'env.db', source: 'env' },
      machines: { value: 'env.ts', source: 'env' },
    });
    expect(resolveConfig({ flags: { db: 'flag.db' }, env: { SPOOL_DB: 'env.db', SPOOL_DB_UNUSED: 'x' }, cwd }).db).toEqual({ value: 'flag.db', source: 'flag' });
    // A URL is the store's business: passed through as written.
    writeFileSync(configFile, JSON.stringify({ db: 'postgres://spool@localhost/spool' }));
    expect(resolveConfig({ flags: {}, env: {}, cwd }).db.value).toBe('postgres://spool@localhost/spool');
  });

  it('refuses a bad config file or package.json field with a typed error that names the file', () => {
    const dir = res.tempDir();
    const configFile = join(dir, 'spool.config.json');
    const cases: [string, RegExp][] = [
      ['{"db": ', /is not valid JSON/],
      ['{"db": 3}', /"db"/],
      ['{"database": "x.db"}', /unknown setting "database"/],
      ['["x.db"]', /not usable/],
    ];
    for (const [text, message] of cases) {
      writeFileSync(configFile, text);
      const attempt = () => resolveConfig({ flags: {}, env: {}, cwd: dir });
      expect(attempt).toThrow(ConfigFileError);
      expect(attempt).toThrow(message);
      expect(attempt).toThrow(configFile);
    }
    const pkgDir = res.tempDir();
    writeFileSync(join(pkgDir, 'package.json'), JSON.stringify({ spool: { machine: './m.ts' } }));
    expect(() => resolveConfig({ flags: {}, env: {}, cwd: pkgDir })).toThrow(/package\.json: its "spool" field is not usable: unknown setting "machine"/);
  });

  it('every command uses it: SPOOL_DB through the bin, spool.config.json in process, and a bad file stops the command before it touches anything', async () => {
    const dir = res.tempDir();
    const viaEnv = await runSpool(['start', 'job-lifecycle', '--id', 'e1', '--input', '{"name":"e"}', '--json'], dir, undefined, { SPOOL_DB: 'from-env.db' });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    const listed = await runSpool(['--db', 'from-env.db', 'list', '--json'], dir);
    expect((JSON.parse(listed.stdout) as { id: string }[]).map((j) => j.id)).toEqual(['e1']);

    writeFileSync(join(dir, 'spool.config.json'), JSON.stringify({ db: 'from-config.db' }));
    expect((await run(['start', 'job-lifecycle', '--id', 'c1', '--input', '{"name":"c"}'], { cwd: dir })).code).toBe(0);
    const fromConfig = await run(['list', '--json'], { cwd: dir });
    expect((JSON.parse(fromConfig.stdout) as { id: string }[]).map((j) => j.id)).toEqual(['c1']);
    // The environment wins over the file.
    const fromEnv = await run(['list', '--json'], { cwd: dir, env: { SPOOL_DB: 'from-env.db' } });
    expect((JSON.parse(fromEnv.stdout) as { id: string }[]).map((j) => j.id)).toEqual(['e1']);

    writeFileSync(join(dir, 'spool.config.json'), '{"db": "x.db",}');
    const bad = await run(['start', 'job-lifecycle', '--id', 'never', '--input', '{"name":"n"}'], { cwd: dir });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(new RegExp(`^spool: SPOOL_BAD_CONFIG: ${join(dir, 'spool.config.json').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not valid JSON`));
    expect((await run(['--db', 'from-config.db', 'list', '--json'], { cwd: dir })).stdout).not.toContain('never');
  });
});
