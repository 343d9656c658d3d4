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
 * Run `node bin/spool.js ...args` in `cwd` (without the suite's NODE_OPTIONS, nor any colour,
 * SPOOL_DB/SPOOL_MACHINES or CI setting of its own) and collect what it prints; `stdin`, when given, is
 * what it reads on standard input; `extraEnv` is added to the environment.
 */
export function runSpool(args: readonly string[], cwd: string, stdin?: string, extraEnv: Record<string, string> = {}): Promise<CliRun> {
  const env = childEnv(extraEnv);
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

/** The suite's environment without NODE_OPTIONS and the settings the CLI reads (colour, SPOOL_DB, SPOOL_MACHINES, CI), plus `extraEnv`. */
function childEnv(extraEnv: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['NODE_OPTIONS', 'FORCE_COLOR', 'NO_COLOR', 'SPOOL_DB', 'SPOOL_MACHINES', 'CI']) delete env[name];
  return Object.assign(env, extraEnv);
}

/**
 * Start `node bin/spool.js ...args` in `cwd` and keep it running (same environment rules as
 * {@link runSpool}); `until(re)` resolves with stdout once it matches, `exited` with the exit code.
 */
export function spawnSpool(args: readonly string[], cwd: string, extraEnv: Record<string, string> = {}) {
  const env = childEnv(extraEnv);
  const child = spawn(process.execPath, [SPOOL_BIN, ...args], { cwd, env });
  let stdout = '';
  let stderr = '';
  const waiting: (() => void)[] = [];
  const wake = () => {
    for (const w of waiting.splice(0)) w();
  };
  child.stdout.setEncoding('utf8').on('data', (c: string) => ((stdout += c), wake()));
  child.stderr.setEncoding('utf8').on('data', (c: string) => ((stderr += c), wake()));
  let closed = false;
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      closed = true;
      resolve(code);
      wake();
    }),
  );
  /** Resolves with stdout (or stderr) once it matches `pattern`. */
  const until = async (pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout'): Promise<string> => {
    while (!pattern.test(stream === 'stdout' ? stdout : stderr)) {
      if (closed) throw new Error(`exited ${child.exitCode ?? child.signalCode} before ${pattern}: ${stdout}\n${stderr}`);
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
    return stream === 'stdout' ? stdout : stderr;
  };
  return { child, exited, until, output: () => ({ stdout, stderr }) };
}
