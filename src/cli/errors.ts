import { readFileSync, statSync } from 'node:fs';
import { SpoolError } from '../index.ts';

/** The command line was not understood (unknown command or option, missing argument). */
export class UsageError extends SpoolError {
  readonly code = 'SPOOL_USAGE';
  readonly category = 'bad-input';
}

/** A JSON argument (`--input`, an event) could not be parsed. */
export class BadJsonArgumentError extends SpoolError {
  readonly code = 'SPOOL_BAD_JSON';
  readonly category = 'bad-input';
}

/** `--machines` names a module that cannot be loaded or exports no machines. */
export class MachinesModuleError extends SpoolError {
  readonly code = 'SPOOL_BAD_MACHINES_MODULE';
  readonly category = 'bad-input';
}

/** The database file could not be opened. */
export class DatabaseError extends SpoolError {
  readonly code = 'SPOOL_DATABASE';
  readonly category = 'internal';
}

/** The first line of an error message, for the one-line error report. */
export function firstLine(text: string): string {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const first = (lines[0] ?? text).trim();
  // A heading ("Transform failed with 1 error:") says nothing without the line it announces.
  return first.endsWith(':') && lines[1] !== undefined ? `${first} ${lines[1].trim()}` : first;
}

/** The most a `-` or `@file` argument may hold: far above any payload limit, far below memory. */
export const MAX_ARGUMENT_FILE_BYTES = 64 * 1024 * 1024;

/**
 * An argument's text: `-` reads standard input and `@path` a file (for payloads too big for the
 * command line, about 128 KB here, or awkward to quote); anything else is the text itself.
 */
export function argumentText(text: string, what: string): string {
  if (text !== '-' && !text.startsWith('@')) return text;
  const source = text === '-' ? 'standard input' : text.slice(1);
  try {
    if (text !== '-' && statSync(source).size > MAX_ARGUMENT_FILE_BYTES) throw new Error(`larger than ${MAX_ARGUMENT_FILE_BYTES} bytes`);
    const read = readFileSync(text === '-' ? 0 : source, 'utf8');
    if (Buffer.byteLength(read) > MAX_ARGUMENT_FILE_BYTES) throw new Error(`larger than ${MAX_ARGUMENT_FILE_BYTES} bytes`);
    return read;
  } catch (error) {
    throw new UsageError(`${what}: cannot read ${source} (${firstLine((error as Error).message)}).`, { argument: what });
  }
}

/**
 * Parse a JSON command-line argument (`-`: standard input, `@path`: a file), or throw
 * {@link BadJsonArgumentError} naming the argument and showing an example of what it expects.
 */
export function parseJsonArgument(raw: string, what: string, example: string): unknown {
  return parseJsonText(argumentText(raw, what), what, example);
}

/** {@link parseJsonArgument} for text already read. */
export function parseJsonText(text: string, what: string, example: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const reason = (error as Error).message;
    throw new BadJsonArgumentError(`${what} is not valid JSON (${firstLine(reason)}); expected e.g. ${example}. Quote it for your shell.`, {
      argument: what,
    });
  }
}
