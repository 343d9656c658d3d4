/**
 * What `spool demo` (and so `npm start`) does on a terminal: listen with a `spool serve` server
 * over the demo's database before the jobs run (so a taken port stops it before anything is
 * written, and the dashboard sees the jobs move) and print the dashboard's address with the token
 * in it; then, after the jobs, print it again with the write token and run the worker loop, so
 * jobs started or moved from the dashboard make progress, until Ctrl-C. `--no-serve`, or stdout not a terminal, keeps the old
 * run-and-exit behaviour.
 */
import { runWorker, type Runtime } from '../index.ts';
import type { SpoolServer } from '../server/index.ts';
import { UsageError } from './errors.ts';
import { startServer, type ServeFlags } from './serve.ts';
import { onShutdownSignals } from './signals.ts';
import { paintHeading } from './style.ts';

/** Where the demo's server prints. */
export interface DemoServeOutput {
  /** One line for people (no trailing newline). */
  print: (line: string) => void;
  /** `--json`: the ready line as one JSON object instead. */
  json?: (value: Record<string, unknown>) => void;
  stderr: (text: string) => void;
}

/**
 * Listen over `runtime`; `portGiven` false: a taken default port falls back to any free one rather
 * than no dashboard. `print` (not with --json) says where at once, with the token in the address,
 * so the jobs can be watched moving.
 */
export async function listenForDemo(runtime: Runtime, flags: ServeFlags, portGiven: boolean, print?: (line: string) => void): Promise<SpoolServer> {
  const quiet = () => {};
  const server = await startServer(runtime, flags, quiet).catch((error: unknown) => {
    if (error instanceof UsageError && !portGiven) return startServer(runtime, { ...flags, port: '0' }, quiet);
    throw error;
  });
  print?.(`${paintHeading('Dashboard:')} ${server.dashboardUrl}  (listening now: open it to watch the jobs move)`);
  print?.('');
  return server;
}

/** Say where the dashboard is, run `runtime`'s worker loop until SIGINT/SIGTERM, then close the server. */
export async function serveDemo(runtime: Runtime, server: SpoolServer, out: DemoServeOutput): Promise<void> {
  const stop = new AbortController();
  const release = onShutdownSignals({
    first: (signal) => {
      out.stderr(`spool demo: ${signal}: stopping the server and the worker (again to exit at once)\n`);
      stop.abort();
    },
    second: (signal, code) => out.stderr(`spool demo: second ${signal}: exiting now with code ${code}\n`),
  });
  try {
    const { url } = server;
    const token = server.tokenGenerated ? server.token : null;
    if (out.json) out.json({ type: 'demo.serving', url, dashboard: server.dashboardUrl, token, pid: process.pid });
    else {
      out.print('');
      out.print(`${paintHeading('Dashboard:')} ${server.dashboardUrl}`);
      out.print(`  the HTTP API is under ${url}/api; ${token === null ? 'writes need the configured token (SPOOL_TOKEN)' : `writes need: Authorization: Bearer ${token}`}`);
      out.print('  a worker runs here too: jobs you start or move make progress. Ctrl-C stops both.');
    }
    await runWorker(runtime, { signal: stop.signal, pollMs: 100 });
  } finally {
    release();
    await server.close();
  }
}
