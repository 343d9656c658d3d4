#!/usr/bin/env node
// Build the browser example into examples/browser/dist/ (or --outdir): the page and its Worker
// bundled by esbuild for the browser, its stylesheet, index.html (with the dashboard's icon) and
// SQLite's wasm binary. The Worker runs the machines of examples/browser/src/machines.ts, or of the
// module --machines (or SPOOL_EXAMPLE_MACHINES) names: any module that exports machines as
// `spool worker --machines` takes them.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const { values } = parseArgs({ options: { machines: { type: 'string' }, outdir: { type: 'string' } } });
const machines = resolve(values.machines ?? process.env.SPOOL_EXAMPLE_MACHINES ?? join(here, 'src/machines.ts'));
const outdir = resolve(values.outdir ?? join(here, 'dist'));

/** `spool-example:machines`, what the Worker imports its machines from: the module chosen above. */
const machinesModule = {
  name: 'spool-example-machines',
  setup(b) {
    b.onResolve({ filter: /^spool-example:machines$/ }, () => ({ path: machines }));
  },
};

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: { page: join(here, 'src/page.ts'), worker: join(here, 'src/worker.ts'), style: join(here, 'page.css') },
  outdir,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  sourcemap: true,
  minify: true,
  // A machines module outside this tree finds xstate and zod here, as `spool --machines` does.
  nodePaths: [join(root, 'node_modules')],
  plugins: [machinesModule],
  logLevel: 'warning',
});
copyFileSync(join(here, 'index.html'), join(outdir, 'index.html'));
copyFileSync(join(root, 'src/server/dashboard/favicon.svg'), join(outdir, 'favicon.svg'));
// sqlite-wasm loads its binary from beside the script that bundles it (the Worker).
const require = createRequire(import.meta.url);
copyFileSync(require.resolve('@sqlite.org/sqlite-wasm/sqlite3.wasm'), join(outdir, 'sqlite3.wasm'));
console.log(`built ${outdir} (machines: ${machines})`);
