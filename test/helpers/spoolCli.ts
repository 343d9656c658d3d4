import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The `spool` bin, run as a new user runs it. */
export const SPOOL_BIN = fileURLToPath(new URL('../../bin/spool.js', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `node bin/spool.js ...args` in `cwd` (without the suite's NODE_OPTIONS) and collect what it
 * prints; `stdin`, when given, is what it reads on standard input; `extraEnv` is added to its environment.
 */
export function runSpool(args: readonly string[], cwd: string, stdin?: string, extraEnv: Record<string, string> = {}): Promise<CliRun> {
  const env = { ...process.env, ...extraEnv };
  delete env['NODE_OPTIONS'];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SPOOL_BIN, ...args], { cwd, env, stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    if (stdin !== undefined) child.stdin!.end(stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
