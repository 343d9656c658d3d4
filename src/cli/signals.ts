/**
 * Shutdown signals for long-running commands (`spool worker`). The first SIGINT or SIGTERM asks
 * for a graceful stop; a second one exits at once with the shell's code for that signal (128 + its
 * number: 130 for SIGINT, 143 for SIGTERM). Nothing accepted is lost either way: every
 * acknowledgement follows its commit, and a running activity's claim names this process, so the
 * next worker takes it over (at once on this host, where the dead pid is seen; elsewhere when the
 * claim expires).
 *
 * @example
 * const release = onShutdownSignals({ first: () => controller.abort(), second: (s, code) => log(s, code) });
 * try { await work(controller.signal) } finally { release() }
 */
import { constants } from 'node:os';

export interface ShutdownSignalHandlers {
  /** The first signal: stop taking work and close gracefully. */
  first: (signal: NodeJS.Signals) => void;
  /** The second signal, just before the process exits with `code` (say so, in one line). */
  second: (signal: NodeJS.Signals, code: number) => void;
  /** How to leave. Default `process.exit`. */
  exit?: (code: number) => void;
}

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/** The exit code a shell reports for a process ended by `signal`: 128 + its number. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 15);
}

/** Install the handlers on SIGINT and SIGTERM; returns the function that removes them. */
export function onShutdownSignals(handlers: ShutdownSignalHandlers): () => void {
  let received = 0;
  const exit = handlers.exit ?? ((code: number) => process.exit(code));
  const listener = (signal: NodeJS.Signals) => {
    received += 1;
    if (received === 1) {
      handlers.first(signal);
      return;
    }
    const code = signalExitCode(signal);
    handlers.second(signal, code);
    exit(code);
  };
  for (const signal of SIGNALS) process.on(signal, listener);
  return () => {
    for (const signal of SIGNALS) process.off(signal, listener);
  };
}
