import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { childScriptArgs } from './childScript.ts';
import { PROJECT_ROOT } from './resources.ts';

export const WORKER = fileURLToPath(new URL('../fixtures/worker.ts', import.meta.url));

export type Message = { type: string; [key: string]: unknown };

/**
 * A real child process running test/fixtures/worker.ts (bundled: childScript.ts), with its stdout parsed as
 * JSON lines. Waits are on the child's own output or exit: never on the clock.
 */
export class Worker {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly messages: Message[] = [];
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #waiters: Array<{ match: (m: Message) => boolean; resolve: (m: Message) => void; reject: (e: Error) => void }> = [];
  #done = false;

  constructor(args: string[], env: { SPOOL_CRASH_AT?: string } = {}) {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '--conditions=development' };
    delete childEnv['SPOOL_CRASH_AT'];
    if (env.SPOOL_CRASH_AT) childEnv['SPOOL_CRASH_AT'] = env.SPOOL_CRASH_AT;
    this.proc = spawn(process.execPath, [...childScriptArgs(WORKER), ...args], { cwd: PROJECT_ROOT, env: childEnv, stdio: 'pipe' });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (chunk: string) => (this.stderr += chunk));
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      let msg: Message;
      try {
        msg = JSON.parse(line) as Message;
      } catch {
        return;
      }
      this.messages.push(msg);
      this.#waiters = this.#waiters.filter((w) => (w.match(msg) ? (w.resolve(msg), false) : true));
    });
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.#done = true;
        for (const w of this.#waiters.splice(0)) {
          w.reject(new Error(`worker exited (code ${code}, signal ${signal}) before the awaited message; stderr:\n${this.stderr}`));
        }
        resolve({ code, signal });
      });
    });
  }

  /** Resolves with the first message (already received or future) that matches. */
  waitFor(match: (m: Message) => boolean): Promise<Message> {
    const seen = this.messages.find(match);
    if (seen) return Promise.resolve(seen);
    if (this.#done) return Promise.reject(new Error(`worker already exited; stderr:\n${this.stderr}`));
    return new Promise((resolve, reject) => this.#waiters.push({ match, resolve, reject }));
  }

  send(line: string): void {
    this.proc.stdin.write(`${line}\n`);
  }

  /** Send a last line and close the child's stdin. */
  sendLast(line: string): void {
    this.proc.stdin.end(`${line}\n`);
  }

  /** Kill it if the test left it running (by its own pid, nothing broader). */
  async stop(): Promise<void> {
    if (!this.#done) this.proc.kill('SIGKILL');
    await this.exited;
  }
}
