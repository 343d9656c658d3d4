/**
 * `spool inspect --url ws://…`: relay a database's commits, made by any process, to a WebSocket
 * inspector (`@statelyai/inspect`'s `createInspectorServer`, Stately's inspector behind it, or any
 * receiver of its frames), until SIGINT/SIGTERM. It announces the active jobs first, then follows
 * the durable history feed (as `spool tail` does) and shows each commit as the `inspect` runtime
 * option does (src/runtime/inspection.ts).
 *
 * @example
 * spool inspect --url ws://localhost:8080
 */
import { createWebSocketInspector } from '@statelyai/inspect';
import { Command } from 'commander';
import { InspectionFeed, type Runtime } from '../internal.ts';
import { UsageError } from './errors.ts';
import { followHistory, headSeq } from './follow.ts';
import { onShutdownSignals } from './signals.ts';

/** What `spool inspect` needs from main.ts. */
export interface InspectCommandHost {
  /** A read-only runtime on `--db` (with `--machines`, for the definitions the inspector draws). */
  withReadRuntime(command: Command, work: (runtime: Runtime) => Promise<void>): Promise<void>;
  /** `--owner`, or null (unscoped jobs). */
  owner(command: Command): string | null;
  stderr(text: string): void;
}

/** Frames held while the inspector is not connected (the library's default is 200: an announcement of many jobs would lose its start). */
const MAX_DEFERRED = 100_000;

/** Register `spool inspect`. */
export function addInspectCommand(program: Command, host: InspectCommandHost): void {
  program
    .command('inspect')
    .description("relay every job's commits (by any process) to a Stately WebSocket inspector, active jobs first, until Ctrl-C")
    .requiredOption('--url <ws-url>', 'the inspector to send to, e.g. ws://localhost:8080 (createInspectorServer from @statelyai/inspect/server)')
    .addHelpText('after', '\nExamples:\n  spool inspect --url ws://localhost:8080\n  spool --machines ./my-machines.ts inspect --url ws://127.0.0.1:8080')
    .action(async (options: { url: string }, command: Command) => {
      if (!/^wss?:\/\/[^\s]+$/.test(options.url)) throw new UsageError(`--url takes a WebSocket URL (ws://host:port); got "${options.url}".`);
      await host.withReadRuntime(command, async (runtime) => {
        const stop = new AbortController();
        const release = onShutdownSignals({ first: () => stop.abort(), second: () => undefined });
        const inspector = createWebSocketInspector({ url: options.url, maxDeferredEvents: MAX_DEFERRED });
        const feed = new InspectionFeed({
          observer: inspector.inspect,
          registry: runtime.registry,
          store: runtime.store,
          owner: host.owner(command),
          log: (level, msg, fields) => host.stderr(`spool inspect: ${level}: ${msg} ${JSON.stringify(fields)}\n`),
        });
        try {
          // The cursor first: a commit made while the active jobs are announced is shown after them (once).
          const cursor = await headSeq(runtime);
          await feed.announceActive();
          host.stderr(`spool inspect: relaying commits after seq ${cursor} to ${options.url}; Ctrl-C to stop\n`);
          await followHistory(runtime, cursor, { limit: 500 }, stop.signal, (r) => feed.onFeedRecord(r));
          await feed.flushed();
          // The inspector converts each event on a later turn of the event loop: let the last ones go out.
          await new Promise((resolve) => setTimeout(resolve, 0));
        } finally {
          inspector.stop();
          release();
        }
      });
    });
}
