import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { childScriptArgs } from './childScript.ts';
import { PROJECT_ROOT } from './resources.ts';

export type Line = { type: string; [key: string]: unknown };

/**
 * A real child process running a TypeScript fixture (bundled: childScript.ts; development conditions), its
 * stdout parsed as one JSON object per line. Waits are on the child's own output or exit, never on
 * the clock. `kill()` signals this child by its own pid, nothing broader.
 */
export class ChildScript {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly lines: Line[] = [];
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #listeners = new Set<(line: Line) => void>();
  #done = false;

  /** `extraEnv` adds variables (e.g. `SPOOL_CRASH_AT`); the parent's own `SPOOL_CRASH_AT` is never inherited. */
  constructor(script: string, args: string[], extraEnv: Record<string, string> = {}) {
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '--conditions=development' };
    delete env['SPOOL_CRASH_AT'];
    Object.assign(env, extraEnv);
    this.proc = spawn(process.execPath, [...childScriptArgs(script), ...args], { cwd: PROJECT_ROOT, env, stdio: 'pipe' });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (chunk: string) => (this.stderr += chunk));
    createInterface({ input: this.proc.stdout }).on('line', (text) => {
      let line: Line;
      try {
        line = JSON.parse(text) as Line;
      } catch {
        return;
      }
      this.lines.push(line);
      for (const listener of [...this.#listeners]) listener(line);
    });
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.#done = true;
        for (const listener of [...this.#listeners]) listener({ type: '(exit)', code, signal });
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return !this.#done;
  }

  /** Call `listener` for every line from now on; returns the unsubscribe function. */
  onLine(listener: (line: Line) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The first line (already received or future) that matches; rejects if the child exits first. */
  waitFor(match: (line: Line) => boolean): Promise<Line> {
    const seen = this.lines.find(match);
    if (seen) return Promise.resolve(seen);
    if (this.#done) return Promise.reject(new Error(`child already exited; stderr:\n${this.stderr}`));
    return new Promise((resolve, reject) => {
      const off = this.onLine((line) => {
        if (line.type === '(exit)') {
          off();
          reject(new Error(`child exited (code ${String(line['code'])}, signal ${String(line['signal'])}) before the awaited line; stderr:\n${this.stderr}`));
        } else if (match(line)) {
          off();
          resolve(line);
        }
      });
    });
  }

  /** SIGKILL (default) or another signal to this child; resolves when it has exited (and been reaped). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.#done) this.proc.kill(signal);
    return this.exited;
  }
}
