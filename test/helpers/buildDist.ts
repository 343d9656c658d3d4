/**
 * Vitest global setup: build dist/ when a source changed since its last build (`node
 * scripts/build.mjs --if-stale`, a second or two), so the `spool` bin, which runs the built
 * JavaScript, runs the code under test. Once per vitest process, for all its projects.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BUILD = fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url));
const BUILT = Symbol.for('spool.test.distBuilt');

export function setup(): void {
  const flags = globalThis as Record<symbol, unknown>;
  if (flags[BUILT]) return;
  execFileSync(process.execPath, [BUILD, '--if-stale'], { stdio: 'inherit' });
  flags[BUILT] = true;
}
