/**
 * What `spool demo` (and so `npm start`) does after its jobs have run, on a terminal: keep a
 * `spool serve` server up over the same database, print the dashboard's address and the write
 * token, and run the worker loop so jobs started or moved from the dashboard make progress, until
 * Ctrl-C. `--no-serve`, or stdout not a terminal, keeps the old run-and-exit behaviour.
 */
import { runWorker, type Runtime } from '../index.ts';
import { UsageError } from './errors.ts';
import { startServer, type ServeFlags } from './serve.ts';
import { onShutdownSignals } from './signals.ts';
import { paintHeading } from './style.ts';

/** Where the demo's server prints, and whether its port was chosen (else a taken default falls back to a free one). */
export interface DemoServeOutput {
  /** One line for people (no trailing newline). */
  print: (line: string) => void;
  /** `--json`: the ready line as one JSON object instead. */
  json?: (value: Record<string, unknown>) => void;
  stderr: (text: string) => void;
  portGiven: boolean;
}

/** Serve over `runtime` and run its worker loop until SIGINT/SIGTERM; resolves once both have stopped. */
export async function serveDemo(runtime: Runtime, flags: ServeFlags, out: DemoServeOutput): Promise<void> {
  const stop = new AbortController();
  const release = onShutdownSignals({
    first: (signal) => {
      out.stderr(`spool demo: ${signal}: stopping the server and the worker (again to exit at once)\n`);
      stop.abort();
    },
    second: (signal, code) => out.stderr(`spool demo: second ${signal}: exiting now with code ${code}\n`),
  });
  try {
    const announce = (json: Record<string, unknown>) => {
      if (out.json) return out.json({ ...json, type: 'demo.serving', dashboard: `${String(json['url'])}/` });
      out.print('');
      out.print(`${paintHeading('Dashboard:')} ${String(json['url'])}/`);
      out.print(`  the HTTP API is under ${String(json['url'])}/api; ${json['token'] === null ? 'writes need the configured token (SPOOL_TOKEN)' : `writes need: Authorization: Bearer ${String(json['token'])}`}`);
      out.print('  a worker runs here too: jobs you start or move make progress. Ctrl-C stops both.');
    };
    const server = await startServer(runtime, flags, announce).catch((error: unknown) => {
      // The default port taken (another spool serve, say): any free one rather than no dashboard.
      if (error instanceof UsageError && !out.portGiven) return startServer(runtime, { ...flags, port: '0' }, announce);
      throw error;
    });
    try {
      await runWorker(runtime, { signal: stop.signal, pollMs: 100 });
    } finally {
      await server.close();
    }
  } finally {
    release();
  }
}
