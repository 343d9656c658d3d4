/**
 * The docs cannot drift from the code:
 * - every fenced sample marked runnable in README.md and docs/*.md runs, in order, page by page,
 *   in a fresh directory with a fresh database, as a new user would run it (docs/development.md,
 *   "Runnable samples", documents the markers);
 * - every relative link in those files resolves to a file the package ships (and a heading of it).
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SPOOL_BIN } from './helpers/spoolCli.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const TSX_CLI = join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');

/** One fenced block marked runnable: ```sh runnable, ```ts runnable, ```ts runnable file=NAME, ```sh runnable postgres. */
interface Sample {
  page: string;
  line: number;
  lang: 'sh' | 'ts';
  /** Written to this file in the page's directory instead of run. */
  file: string | null;
  postgres: boolean;
  code: string;
}

function samplesOf(page: string): Sample[] {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
  const samples: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S+)(.*)$/.exec(lines[i]!);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.startsWith('```')) end++;
    const words = open[2]!.trim().split(/\s+/);
    if (words.includes('runnable')) {
      const lang = open[1];
      if (lang !== 'sh' && lang !== 'ts') throw new Error(`${page}:${i + 1}: a runnable sample is sh or ts, not ${lang}`);
      const file = words.find((w) => w.startsWith('file='))?.slice('file='.length) ?? null;
      samples.push({ page, line: i + 1, lang, file, postgres: words.includes('postgres'), code: lines.slice(i + 1, end).join('\n') + '\n' });
    }
    i = end;
  }
  return samples;
}

/** A directory like a new user's app: `spool`, `xstate` and `zod` installed (linked to this checkout), ESM. */
function freshApp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'spool-docs-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'spool'), 'dir');
  for (const dep of ['xstate', 'zod']) symlinkSync(join(ROOT, 'node_modules', dep), join(dir, 'node_modules', dep), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'docs-sample-app', private: true, type: 'module' }));
  return dir;
}

/** `npx spool ...` and `spool ...` in a shell sample run this checkout's built bin, never the registry. */
const SHELL_PRELUDE = `set -euo pipefail
spool() { node ${JSON.stringify(SPOOL_BIN)} "$@"; }
npx() { if [ "$1" = spool ]; then shift; spool "$@"; else echo "docs test: only npx spool is offered, not npx $1" >&2; return 127; fi; }
`;

function run(cmd: string, args: string[], cwd: string, extraEnv: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const env = { ...process.env };
  for (const name of ['NODE_OPTIONS', 'FORCE_COLOR', 'NO_COLOR', 'SPOOL_DB', 'SPOOL_MACHINES', 'SPOOL_TOKEN']) delete env[name];
  Object.assign(env, extraEnv);
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', fail);
    child.on('close', (code) => done({ code, out }));
  });
}

/** Run a page's samples in order in one fresh app directory; a failure names the sample and shows its output. */
async function runPage(samples: Sample[], extraEnv: Record<string, string> = {}): Promise<void> {
  const dir = freshApp();
  try {
    for (const [n, sample] of samples.entries()) {
      const where = `${sample.page}:${sample.line}`;
      if (sample.file) {
        writeFileSync(join(dir, sample.file), sample.code);
        continue;
      }
      const script = join(dir, `sample-${n}.${sample.lang}`);
      writeFileSync(script, sample.lang === 'sh' ? SHELL_PRELUDE + sample.code : sample.code);
      const result = sample.lang === 'sh' ? await run('bash', [script], dir, extraEnv) : await run(process.execPath, [TSX_CLI, script], dir, extraEnv);
      if (result.code !== 0) throw new Error(`the runnable sample at ${where} exited ${result.code}:\n${sample.code}\n--- its output ---\n${result.out}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const ALL = PAGES.flatMap(samplesOf);
const pagesWith = (pick: (s: Sample) => boolean): [string, Sample[]][] =>
  [...new Set(ALL.filter(pick).map((s) => s.page))].map((page) => [page, ALL.filter((s) => s.page === page && pick(s))]);

describe.concurrent('runnable samples', () => {
  it('cover what a new user needs: the quick start, a first job, a path test, a stuck job, Postgres', () => {
    const code = ALL.map((s) => s.code).join('\n');
    expect(code).toContain('npx spool demo');
    expect(code).toContain("from 'spool'");
    expect(code).toMatch(/npx spool (--machines \S+ )?test\b/);
    expect(code).toContain('stuck: true');
    expect(code).toContain('migrate-store');
    expect(ALL.length).toBeLessThanOrEqual(16); // each runs a process: keep the test under a minute
  });

  for (const [page, samples] of pagesWith((s) => !s.postgres)) {
    it(`${page}: its ${samples.length} runnable sample(s) run against a fresh database`, () => runPage(samples), 180_000);
  }

  const pgUrl = process.env['SPOOL_TEST_PG_URL'];
  for (const [page, samples] of pagesWith((s) => s.postgres)) {
    if (!pgUrl) {
      it(`${page}: its Postgres samples (skipped: SPOOL_TEST_PG_URL is not set)`, () => {
        console.log(`docs.test: ${page}'s Postgres samples not run: set SPOOL_TEST_PG_URL to a server where databases may be created`);
      });
      continue;
    }
    it(`${page}: its ${samples.length} Postgres sample(s) run against a fresh database`, async () => {
      const { scratchDatabase } = await import('../persistence/drivers/pg/scratch.ts');
      const db = await scratchDatabase(pgUrl, 'spool_docs');
      try {
        await runPage(samples, { DATABASE_URL: db.url });
      } finally {
        await db.drop();
      }
    }, 180_000);
  }
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchorsOf(path: string): Set<string> {
  const text = readFileSync(path, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

describe('links in the docs', () => {
  it('every relative link in README.md and docs/*.md names a file the package ships, and a heading in it', () => {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as { files: { path: string }[] }[];
    const shipped = new Set(packed[0]!.files.map((f) => f.path));
    const broken: string[] = [];
    let links = 0;
    for (const page of PAGES) {
      const text = readFileSync(join(ROOT, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
      for (const m of text.matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue;
        links++;
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const path = file === '' ? join(ROOT, page) : resolve(dirname(join(ROOT, page)), file);
        const inPackage = relative(ROOT, path);
        if (!shipped.has(inPackage)) broken.push(`${page}: ${target} (${inPackage} is not in the package)`);
        else if (anchor && !anchorsOf(path).has(anchor)) broken.push(`${page}: ${target} (no heading #${anchor} in ${inPackage})`);
      }
    }
    expect(links).toBeGreaterThan(10);
    expect(broken).toEqual([]);
  }, 60_000);
});
