/**
 * `spool serve` (and `spool worker --serve`): the HTTP API and event streams of src/server over
 * the command's runtime, until SIGINT/SIGTERM.
 *
 * @example
 * spool serve --port 7420
 * SPOOL_TOKEN=... spool --machines ./machines.ts worker --serve --host 0.0.0.0
 */
import { Command } from 'commander';
import { runWorker, type Runtime } from '../index.ts';
import type { SpoolServer } from '../server/index.ts';
import { parseWorkerToken, type WorkerToken } from '../server/auth.ts';
import { UsageError } from './errors.ts';
import { onShutdownSignals } from './signals.ts';

/** `--host`, `--port`, `--token`, `--body-limit` as commander gives them. */
export interface ServeFlags {
  host: string;
  port: string;
  token?: string;
  bodyLimit?: string;
  allowedHost?: string[];
  readsNeedToken?: boolean;
  workerToken?: string[];
  claimMs?: string;
  runTimers?: boolean;
}

/** Add the server's options to a command (`serve`, `worker`). */
export function addServeOptions(command: Command): Command {
  return command
    .option('--host <host>', 'interface to listen on (0.0.0.0: every one; then put TLS in front)', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: any free one, printed)', '7420')
    .option('--token <token>', 'the bearer token writes need (default: SPOOL_TOKEN, else a random one, printed)')
    .option('--body-limit <bytes>', 'largest request body (default 1048576)')
    .option('--allowed-host <name>', 'a Host name requests may use besides the address listened on (a proxy\'s); repeatable', (v: string, all: string[] = []) => [...all, v])
    .option('--reads-need-token', 'reads need the token too (always so beyond loopback)')
    .option('--worker-token <token[:activities]>', 'a token for remote workers (`spool worker --server`): the worker routes only, optionally only for these activities (T:charge,ship); repeatable', (v: string, all: string[] = []) => [...all, v])
    .option('--claim-ms <ms>', "how long a remote worker's claim on an attempt lasts without a heartbeat (default 30000)");
}

/** What `spool serve` needs from main.ts. */
export interface ServeCommandHost {
  /**
   * Open the command's runtime (machines, database, owner from the global options), run `work`,
   * close it. `timers`: a runtime that fires timers but runs no activity here (they are remote workers').
   */
  withRuntime(command: Command, work: (runtime: Runtime) => Promise<void>, timers?: boolean): Promise<void>;
  /** Print one line on stdout (JSON lines with --json). */
  print(command: Command, json: Record<string, unknown>, human: string): void;
  stderr(text: string): void;
}

/** Register `spool serve`. */
export function addServeCommand(program: Command, host: ServeCommandHost): void {
  addServeOptions(
    program
      .command('serve')
      .description('an HTTP API and live event streams (SSE, resumable with Last-Event-ID) over the database; writes need a bearer token')
      .addHelpText('after', '\nExamples:\n  spool serve\n  spool serve --port 8080 --token "$(openssl rand -hex 32)"\n  curl localhost:7420/api/jobs'),
  )
    .option('--run-timers', 'also fire due timers and retries (the worker loop, running no activity here); on by default with --worker-token, whose activities run in remote workers')
    .action(async (flags: ServeFlags, command: Command) => {
    checkServeFlags(flags);
    // With worker tokens the activities run in remote workers: the server keeps the clock for their jobs.
    const timers = flags.runTimers === true || (flags.workerToken ?? []).length > 0;
    await host.withRuntime(command, async (runtime) => {
      const stop = new AbortController();
      const release = onShutdownSignals({
        first: (signal) => {
          host.stderr(`spool serve: ${signal}: closing the streams and stopping (again to exit at once)\n`);
          stop.abort();
        },
        second: (signal, code) => host.stderr(`spool serve: second ${signal}: exiting now with code ${code}\n`),
      });
      try {
        const server = await startServer(runtime, flags, (json, human) => host.print(command, json, human));
        // A loop that stops on an error (a damaged database) stops the server too, with that error.
        const loop = timers ? runWorker(runtime, { signal: stop.signal }) : undefined;
        loop?.catch(() => stop.abort());
        try {
          await new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve(), { once: true }));
          await loop;
        } finally {
          await server.close();
        }
      } finally {
        release();
      }
    }, timers);
  });
}

/** Check the flags before anything opens. */
export function checkServeFlags(flags: ServeFlags): void {
  const port = Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError('--port must be an integer from 0 to 65535.');
  if (flags.bodyLimit !== undefined) {
    const n = Number(flags.bodyLimit);
    if (!Number.isSafeInteger(n) || n < 1024) throw new UsageError('--body-limit must be a whole number of bytes, at least 1024.');
  }
  if (flags.claimMs !== undefined) {
    const n = Number(flags.claimMs);
    if (!Number.isInteger(n) || n < 1000 || n > 3_600_000) throw new UsageError('--claim-ms must be a whole number of ms from 1000 to 3600000.');
  }
  workerTokensOf(flags);
}

/** The `--worker-token` flags, parsed (a bad one is a UsageError). */
function workerTokensOf(flags: ServeFlags): WorkerToken[] {
  try {
    return (flags.workerToken ?? []).map(parseWorkerToken);
  } catch (error) {
    throw new UsageError(`--worker-token: ${(error as Error).message}`);
  }
}

/** Listen over `runtime` and print where, with the token when it was made up here. */
export async function startServer(runtime: Runtime, flags: ServeFlags, print: (json: Record<string, unknown>, human: string) => void, warn: (text: string) => void = (t) => process.stderr.write(t)): Promise<SpoolServer> {
  // Imported here: the server (hono, the dashboard) is loaded by the commands that listen, not by every command.
  const { createServer } = await import('../server/index.ts');
  const server = await createServer({
    runtime,
    host: flags.host,
    port: Number(flags.port),
    ...(flags.token !== undefined ? { token: flags.token } : {}),
    ...(flags.bodyLimit !== undefined ? { bodyLimitBytes: Number(flags.bodyLimit) } : {}),
    ...(flags.allowedHost !== undefined ? { allowedHosts: flags.allowedHost } : {}),
    ...(flags.readsNeedToken === true ? { readsNeedToken: true } : {}),
    ...(flags.claimMs !== undefined ? { claimMs: Number(flags.claimMs) } : {}),
    workerTokens: workerTokensOf(flags),
  }).catch((error: unknown) => {
    const code = (error as { code?: unknown }).code;
    if (code === 'EADDRINUSE') throw new UsageError(`Port ${flags.port} on ${flags.host} is in use; pick another with --port (0: any free one).`);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new UsageError(`Cannot listen on ${flags.host}: no such interface here; see --host.`);
    throw error;
  });
  const token = server.tokenGenerated ? server.token : null;
  if (server.exposed) warn(`spool serve: warning: listening on ${server.url}, reachable from other machines over plain HTTP; reads and writes need the token; put TLS in front.\n`);
  const needs = server.readsNeedToken ? 'reads and writes need' : 'writes need';
  print(
    { type: 'serve.ready', url: server.url, dashboard: server.dashboardUrl, token, readsNeedToken: server.readsNeedToken, pid: process.pid },
    `spool serve: listening on ${server.url} (API under /api); ${token === null ? `${needs} the configured token` : `${needs}: Authorization: Bearer ${token}`}\n  dashboard: ${server.dashboardUrl}`,
  );
  return server;
}
