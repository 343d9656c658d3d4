/**
 * The tree's layers (.dependency-cruiser.cjs): no import cycle, type-only imports included, and
 * base/ and ports/ below step/, step/ below runtime/, the engine, the SQL core and src/client free
 * of Node built-ins and Node database libraries, src/client free of the engine but for its error
 * classes and types; persistence/sql names no driver, no driver imports another,
 * the `spool/postgres` entry never loads better-sqlite3, and the `spool` command's start loads
 * none of the libraries only some commands use.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cruise } from 'dependency-cruiser';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);

interface Cruised {
  summary: { violations: { rule: { name: string }; from: string; to: string; cycle?: { name: string }[] }[]; totalCruised: number };
  modules: { source: string; dependencies: { resolved: string; dynamic: boolean; dependencyTypes: string[] }[] }[];
}

let cruised: Promise<Cruised> | undefined;

/** One cruise of the tree for every test here (it takes seconds). */
function cruiseTree(): Promise<Cruised> {
  cruised ??= (async () => {
    const ruleSet = require('../.dependency-cruiser.cjs');
    const result = await cruise(['src', 'persistence', 'bin', 'scripts'], { ruleSet, validate: true, ...ruleSet.options, outputType: 'json' });
    return (typeof result.output === 'string' ? JSON.parse(result.output) : result.output) as Cruised;
  })();
  return cruised;
}

/** The modules `entry` loads when imported: its static imports, transitively (no type-only import, no dynamic one). */
function loadedBy(output: Cruised, entry: string): Set<string> {
  const edges = new Map(output.modules.map((m) => [m.source, m.dependencies.filter((d) => !d.dynamic && !d.dependencyTypes.includes('type-only')).map((d) => d.resolved)]));
  const seen = new Set<string>([entry]);
  const queue = [entry];
  while (queue.length > 0) for (const next of edges.get(queue.pop()!) ?? []) if (!seen.has(next)) seen.add(next), queue.push(next);
  return seen;
}

describe('layers', () => {
  it('spool/postgres loads no better-sqlite3 and spool/sqlite no pg (each driver its own library; openStore imports a driver only when a --db names it)', async () => {
    const output = await cruiseTree();
    const pkg = require('../package.json') as { exports: Record<string, { default: string }> };
    const source = (entry: string) => pkg.exports[entry]!.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts');
    const postgres = [...loadedBy(output, source('./postgres'))];
    const sqlite = [...loadedBy(output, source('./sqlite'))];
    expect(postgres.filter((m) => /node_modules\/better-sqlite3\//.test(m))).toEqual([]);
    expect(sqlite.filter((m) => /node_modules\/pg\//.test(m))).toEqual([]);
    // The check sees the libraries it looks for: each entry loads its own.
    expect(postgres.some((m) => /node_modules\/pg\//.test(m))).toBe(true);
    expect(sqlite.some((m) => /node_modules\/better-sqlite3\//.test(m))).toBe(true);
  });

  it('spool/sqlite-wasm loads neither better-sqlite3 nor pg (it runs in a browser Worker), and does load sqlite-wasm', async () => {
    const output = await cruiseTree();
    const pkg = require('../package.json') as { exports: Record<string, { default: string }> };
    const wasm = [...loadedBy(output, pkg.exports['./sqlite-wasm']!.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'))];
    expect(wasm.filter((m) => /node_modules\/(better-sqlite3|pg)\/|^persistence\/drivers\/(better-sqlite3|pg)\//.test(m))).toEqual([]);
    expect(wasm.some((m) => /node_modules\/@sqlite\.org\/sqlite-wasm\//.test(m))).toBe(true);
  });

  it("the `spool` command's start loads neither pg, the HTTP server, elkjs nor path testing: the commands that use them import them when they run", async () => {
    // esbuild's graph, which drops type-only imports (the cruiser's parser keeps them).
    const { metafile } = await build({ entryPoints: ['src/cli/main.ts'], bundle: true, write: false, outdir: 'out', platform: 'node', format: 'esm', packages: 'external', metafile: true, logLevel: 'silent' });
    const loaded = new Set(['src/cli/main.ts']);
    const queue = ['src/cli/main.ts'];
    while (queue.length > 0) {
      for (const i of metafile.inputs[queue.pop()!]?.imports ?? []) if (i.kind !== 'dynamic-import' && !loaded.has(i.path)) loaded.add(i.path), queue.push(i.path);
    }
    expect([...loaded].filter((m) => /^(pg|hono|@hono\/node-server|elkjs(\/.*)?|fast-check)$|^src\/server\/(index|app|server)\.ts$|^src\/testing\//.test(m))).toEqual([]);
    // The check sees what the command does load at start.
    expect(loaded.has('commander') && loaded.has('src/cli/program.ts')).toBe(true);
  });

  it('has no import cycle and no import against the layers', async () => {
    const output = await cruiseTree();
    const violations = output.summary.violations.map(
      (v) => `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (${v.cycle.map((c) => c.name).join(' -> ')})` : ''}`,
    );
    expect(violations).toEqual([]);
    expect(output.summary.totalCruised).toBeGreaterThan(150);
  });

  it('src/client imports the engine for its types only (swc, the cruiser\'s parser, does not tell type-only imports apart)', () => {
    const dir = new URL('../src/client/', import.meta.url);
    const values: string[] = [];
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(new URL(file, dir), 'utf8');
      for (const m of text.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        const [, , type, specifier] = m;
        if (type === undefined && /^\.\.\/(ports|runtime)\//.test(specifier!)) values.push(`${file} -> ${specifier}`);
      }
    }
    expect(values).toEqual([]);
  });
});
