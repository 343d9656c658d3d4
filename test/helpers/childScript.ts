import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TMP_ROOT } from './resources.ts';

const BUNDLER = fileURLToPath(new URL('./bundleChild.mjs', import.meta.url));
const PREFIX = 'child-bundles-';
const bundles = new Map<string, string>();
let dir: string | undefined;

/**
 * The node arguments that run `script` (a TypeScript child of the tests) in a child process: its
 * bundle (test/helpers/bundleChild.mjs), built once per test process, the first time it is asked
 * for. The child runs the same sources as `node --import tsx <script>` would, without tsx's loader
 * thread and a transform per module: that start-up took about 1.2 s of CPU a child, the bundle's
 * about 0.35 s, and the crash harness starts more than a hundred children a run.
 */
export function childScriptArgs(script: string): string[] {
  let bundle = bundles.get(script);
  if (bundle === undefined) {
    if (dir === undefined) {
      // Under .vitest-tmp/ (in the project), so the bundle's package imports resolve to its node_modules.
      const made = join(TMP_ROOT, `${PREFIX}${process.pid}`);
      mkdirSync(made, { recursive: true });
      removeStaleBundles();
      process.on('exit', () => rmSync(made, { recursive: true, force: true }));
      dir = made;
    }
    bundle = join(dir, `${bundles.size}-${basename(script).replace(/\.ts$/, '')}.mjs`);
    execFileSync(process.execPath, [BUNDLER, script, bundle], { stdio: ['ignore', 'ignore', 'inherit'] });
    bundles.set(script, bundle);
  }
  return ['--enable-source-maps', bundle];
}

/** Remove the bundle folders of test processes that are gone (a worker ended by vitest runs no exit handler). */
function removeStaleBundles(): void {
  for (const name of readdirSync(TMP_ROOT)) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number(name.slice(PREFIX.length));
    if (pid === process.pid || alive(pid)) continue;
    rmSync(join(TMP_ROOT, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
