#!/usr/bin/env node
// `npm run build`: the package as it is published, in dist/ (ESM JavaScript and .d.ts files).
//
// 1. `tsc -p tsconfig.build.json` emits src/, persistence/ and machines/ under dist/ with the same
//    layout. `rewriteRelativeImportExtensions` turns the sources' `./x.ts` imports into `./x.js`
//    in the JavaScript; TypeScript leaves them as written in the declaration files, so
// 2. relative `.ts` specifiers in the .d.ts files are rewritten to `.js` (what a consumer without
//    `allowImportingTsExtensions` resolves, to the .d.ts beside it), and
// 3. the files tsc does not emit are copied as they are: the loader's .mjs hooks, SQL migrations,
//    and any other asset (everything under those folders that is not TypeScript).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const SOURCES = ['src', 'persistence', 'machines'];
/** Written last: its time is the build's. */
const STAMP = join(DIST, '.built');

/** Every file under `dir`, recursively. */
function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

/** True when dist/ was built after every source file, this script and the build's tsconfig last changed. */
function upToDate() {
  if (!existsSync(STAMP)) return false;
  const built = statSync(STAMP).mtimeMs;
  const inputs = [join(ROOT, 'tsconfig.json'), join(ROOT, 'tsconfig.build.json'), fileURLToPath(import.meta.url), ...SOURCES.flatMap((dir) => [...files(join(ROOT, dir))])];
  return inputs.every((path) => statSync(path).mtimeMs < built);
}

// `--if-stale` (the test suite's global setup): leave an up-to-date dist/ as it is.
if (process.argv.includes('--if-stale') && upToDate()) process.exit(0);

// Built beside dist/ and then swapped in, so a process reading dist/ meanwhile never sees it half-built.
const OUT = join(ROOT, `.dist-${process.pid}`);
rmSync(OUT, { recursive: true, force: true });
// typescript's `exports` leave out its bin: found beside its package.json.
const tsc = join(dirname(createRequire(join(ROOT, 'package.json')).resolve('typescript/package.json')), 'bin', 'tsc');
execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', OUT], { stdio: 'inherit' });

// A relative specifier ending in .ts/.mts/.cts, in `from '...'`, `import('...')` and `import '...'`.
const TS_SPECIFIER = /((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]*?)\.([mc]?)ts(['"])/g;
let rewritten = 0;
for (const path of files(OUT)) {
  if (!/\.d\.[mc]?ts$/.test(path)) continue;
  const text = readFileSync(path, 'utf8');
  const next = text.replace(TS_SPECIFIER, (_, head, base, kind, quote) => `${head}${base}.${kind}js${quote}`);
  if (next !== text) {
    writeFileSync(path, next);
    rewritten += 1;
  }
}

let copied = 0;
for (const dir of SOURCES) {
  for (const path of files(join(ROOT, dir))) {
    if (/\.[mc]?tsx?$/.test(path)) continue;
    cpSync(path, join(OUT, relative(ROOT, path)));
    copied += 1;
  }
}
writeFileSync(join(OUT, '.built'), '');
const old = join(ROOT, `.dist-old-${process.pid}`);
if (existsSync(DIST)) renameSync(DIST, old);
renameSync(OUT, DIST);
rmSync(old, { recursive: true, force: true });
console.log(`dist/: built; ${rewritten} declaration files' imports rewritten to .js, ${copied} other files copied`);
