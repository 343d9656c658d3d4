import { main } from '../../src/cli/main.ts';
import type { CliRun } from './spoolCli.ts';

export interface InProcessOptions {
  /** What `SPOOL_DB`/`SPOOL_MACHINES` are read from. Default: none (spoolCli.ts's `runSpool` clears them for the bin). */
  env?: Record<string, string>;
  /** Stdout is a terminal a person watches (the bin's `process.stdout.isTTY`). Default: no. */
  interactive?: boolean;
}

/**
 * Run `spool ...args` in this process through `main()` (the code `bin/spool.js` runs, from the
 * sources: no build, no node start-up), relative paths resolved against `cwd`, and collect what it
 * prints and its exit code, as spoolCli.ts's `runSpool` does for the bin. No colour, no standard input.
 * A machines module is imported once per path (the module cache): a test that rewrites one writes
 * it under a new name.
 */
export async function runCli(args: readonly string[], cwd: string, options: InProcessOptions = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, {
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    cwd,
    env: options.env ?? {},
    interactive: options.interactive ?? false,
  });
  return { code, stdout, stderr };
}
