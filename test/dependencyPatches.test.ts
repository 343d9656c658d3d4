import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * patches/ holds the changes `npm install` (the `prepare` script: patch-package) makes to
 * installed dependencies; docs/performance.md, "XState on Node 20: a leading spread", says why.
 * A patch that did not apply leaves Spool working but several times slower where it builds
 * XState actors and snapshots, so the installed files are checked here: each file a patch
 * names holds every line the patch adds, as often as the patch adds it.
 */
const root = join(import.meta.dirname, '..');
const patchDir = join(root, 'patches');

function addedLinesByFile(patch: string): Map<string, string[]> {
  const files = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of patch.split('\n')) {
    const header = /^\+\+\+ b\/(.+)$/.exec(line);
    if (header) files.set(header[1]!, (current = []));
    else if (current && line.startsWith('+') && !line.startsWith('+++')) current.push(line.slice(1));
  }
  return files;
}

const count = (text: string, line: string) => text.split('\n').filter((l) => l === line).length;

describe('dependency patches', () => {
  const patches = readdirSync(patchDir).filter((f) => f.endsWith('.patch'));

  it('patches the XState version the lockfile installs', () => {
    const installed = (createRequire(import.meta.url)('xstate/package.json') as { version: string }).version;
    expect(patches).toContain(`xstate+${installed}.patch`);
  });

  for (const file of patches) {
    it(`${file} is applied to the installed files`, () => {
      const byFile = addedLinesByFile(readFileSync(join(patchDir, file), 'utf8'));
      expect(byFile.size).toBeGreaterThan(0);
      for (const [path, added] of byFile) {
        const text = readFileSync(join(root, path), 'utf8');
        for (const line of new Set(added)) {
          expect({ path, line, times: count(text, line) }).toEqual({ path, line, times: added.filter((l) => l === line).length });
        }
      }
    });
  }
});
