// `node bundleChild.mjs <entry.ts> <out.mjs>`: bundle a TypeScript child script of the tests and
// everything it imports from this checkout into one ESM file (packages stay imports, resolved from
// the project's node_modules), so the child starts without tsx's loader (test/helpers/childScript.ts).
// Each module keeps its own `import.meta.url` (the file it was read from), so paths it builds from
// it (migrations, machines modules, the package root) are the ones an unbundled run uses.
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const [entry, outfile] = process.argv.slice(2);
if (!entry || !outfile) throw new Error('usage: bundleChild.mjs <entry.ts> <out.mjs>');

await esbuild.build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  conditions: ['development'],
  sourcemap: 'inline',
  logLevel: 'error',
  plugins: [
    {
      name: 'own-import-meta-url',
      setup(build) {
        build.onLoad({ filter: /\.[cm]?[jt]s$/ }, async ({ path }) => {
          const text = await readFile(path, 'utf8');
          const loader = /\.[cm]?ts$/.test(path) ? 'ts' : 'js';
          return { contents: text.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(path).href)), loader };
        });
      },
    },
  ],
});
