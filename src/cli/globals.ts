/**
 * What every `spool` command shares: where it writes, the global options, and how it prints its
 * result (one JSON document with `--json`, text otherwise).
 */
import type { Command } from 'commander';
import { jsonText } from './format.ts';
import { paintHeading } from './style.ts';

/** Where the command writes, and what it resolves relative paths against. Default: the process's. */
export interface CliIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  cwd: string;
  /** The environment `SPOOL_DB` and `SPOOL_MACHINES` are read from. Default: none (in-process callers); the bin passes `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Stdout is a terminal a person watches (`spool demo` then stays up with its dashboard). Default: no. */
  interactive?: boolean;
  /** Colour the human text on each stream (style.ts's `colourWanted`). Default: no colour. */
  colour?: { stdout: boolean; stderr: boolean };
}

/** Global options, shared by every command. */
export interface GlobalOptions {
  /** Default `./spool.db`. */
  db: string;
  /** Default: the project's `machines/index.ts`. */
  machines?: string;
  json?: boolean;
  /** Tenant scope: the runtime sees only this owner's jobs. Default: unscoped. */
  owner?: string;
  /** `--max-backlog`: backpressure on start and send (the runtime's `maxBacklog`). Default 100000. */
  maxBacklog?: string;
  /** `--synchronous`: FULL (default: an acknowledged write survives power loss) or NORMAL (survives a process crash only). */
  synchronous: 'FULL' | 'NORMAL';
}

/** The global options as given (with their defaults) to `command`. */
export function globals(command: Command): GlobalOptions {
  return command.optsWithGlobals<GlobalOptions>();
}

/** Global options to repeat in suggested commands (`--db` and `--machines` when not the defaults). */
export function commandPrefix(g: GlobalOptions): string {
  const parts = ['npx spool'];
  if (g.db !== './spool.db') parts.push(`--db ${shellQuote(g.db)}`);
  if (g.machines !== undefined) parts.push(`--machines ${shellQuote(g.machines)}`);
  if (g.owner !== undefined) parts.push(`--owner ${shellQuote(g.owner)}`);
  return parts.join(' ');
}

function shellQuote(text: string): string {
  return /^[\w./:@-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Print a command's result: `json` with `--json`, else `human()`. */
export function write(io: CliIO, g: GlobalOptions, json: unknown, human: () => string): void {
  io.stdout(g.json ? `${jsonText(json, 2)}\n` : `${human()}\n`);
}

/**
 * A command's `--help` epilogue: its examples, one command a line (each command's help ends with
 * some; test/cli-help.test.ts checks every one has them).
 *
 * @example
 * command.addHelpText('after', examples('spool list', 'spool list --state processing'))
 */
export function examples(...lines: readonly string[]): string {
  return `\n${paintHeading('Examples:')}\n${lines.map((l) => `  ${l}`).join('\n')}`;
}
