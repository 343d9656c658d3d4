/**
 * Files of Spool's own that code finds by path: the same code runs from its TypeScript sources
 * (tests, tsx) and built (dist/, what the package ships and `bin/spool.js` runs), where modules
 * end in `.js` and sit one folder deeper below the package root.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `.ts` when Spool runs from its sources, `.js` when it runs built. */
export const OWN_EXTENSION: '.ts' | '.js' = import.meta.url.endsWith('.ts') ? '.ts' : '.js';

/**
 * The path of one of Spool's modules, relative to `base` (an `import.meta.url`) and without its
 * extension, as it exists where Spool runs.
 *
 * @example
 * ownModule('../../machines/index', import.meta.url) // …/machines/index.ts, or …/dist/machines/index.js
 */
export function ownModule(relativePath: string, base: string): string {
  return fileURLToPath(new URL(`${relativePath}${OWN_EXTENSION}`, base));
}

/** Spool's package.json, found from this file upwards (the package root is one level further up when built). */
export function ownPackageJson(): { version?: unknown; name?: unknown } {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { version?: unknown; name?: unknown };
      if (pkg.name === 'spool') return pkg;
    }
    const parent = dirname(dir);
    if (parent === dir) return {};
    dir = parent;
  }
}
