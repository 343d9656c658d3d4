/**
 * Colour for the `spool` command's human output: state names, statuses, outcomes, errors and
 * headings. Whether to colour is one pure decision, {@link colourWanted}, of the stream being a
 * terminal and the environment; `main()` makes it once per run for stdout and for stderr and sets it
 * here with {@link useColour}. `--json` output never goes through these functions.
 *
 * The escapes come from node's own `util.styleText` (Node 20.12+), so the command needs no colour
 * library: chalk and picocolors are only in node_modules as other packages' dependencies. On a Node
 * without `styleText` the output is plain.
 *
 * @example
 * colourWanted(true, {}) // true
 * colourWanted(true, { NO_COLOR: '1' }) // false
 * colourWanted(false, { FORCE_COLOR: '1' }) // true
 */
import * as util from 'node:util';
import type { JobStatus, TransitionOutcome } from '../index.ts';

type Format = Parameters<typeof util.styleText>[0];

/**
 * Colour or not, as is customary: `FORCE_COLOR` decides when set (`0` or `false`: no, anything else:
 * yes); else `NO_COLOR` (non-empty) or `NODE_DISABLE_COLORS` turns it off; else colour when the
 * stream is a terminal, unless `TERM=dumb`.
 */
export function colourWanted(isTTY: boolean | undefined, env: Readonly<Record<string, string | undefined>>): boolean {
  const force = env['FORCE_COLOR'];
  if (force !== undefined) return !['0', 'false'].includes(force.trim().toLowerCase());
  if ((env['NO_COLOR'] ?? '') !== '' || env['NODE_DISABLE_COLORS'] !== undefined) return false;
  return isTTY === true && env['TERM'] !== 'dumb';
}

const enabled = { stdout: false, stderr: false };

/** Set whether stdout's and stderr's human text is coloured (main() does, from {@link colourWanted}). */
export function useColour(stdout: boolean, stderr = stdout): void {
  enabled.stdout = stdout;
  enabled.stderr = stderr;
}

function paint(format: Format, text: string, stream: 'stdout' | 'stderr' = 'stdout'): string {
  if (!enabled[stream] || text === '' || typeof util.styleText !== 'function') return text;
  // validateStream false: the decision above is the one that counts (and styleText would check stdout for stderr's text).
  return util.styleText(format, text, { validateStream: false });
}

/** A state name or value (`processing`, `checkout.paying`). */
export function paintState(text: string): string {
  return paint('cyan', text);
}

const STATUS_FORMATS: Record<JobStatus, Format> = { active: 'yellow', done: 'green', error: 'red', stopped: 'gray' };

/** A job status (`active`, `done`, ...), coloured by what it means; a described status by its first word. */
export function paintStatus(text: string): string {
  const word = /^\w+/.exec(text)?.[0] as JobStatus | undefined;
  const format = word !== undefined ? STATUS_FORMATS[word] : undefined;
  return format === undefined ? text : paint(format, text);
}

const OUTCOME_FORMATS: Partial<Record<TransitionOutcome, Format>> = { failed: 'red', ignored: 'gray' };

/** A transition's outcome: failed in red, ignored dimmed, the rest as they are. */
export function paintOutcome(outcome: string): string {
  const format = OUTCOME_FORMATS[outcome as TransitionOutcome];
  return format === undefined ? outcome : paint(format, outcome);
}

/** A heading: a table's header row, a section's title. */
export function paintHeading(text: string): string {
  return paint('bold', text);
}

/** Something gone wrong in a human line on stdout (a warning, an error cell). */
export function paintError(text: string): string {
  return paint('red', text);
}

/** The `spool: CODE:` prefix of an error line on stderr. */
export function paintErrorPrefix(text: string): string {
  return paint(['bold', 'red'], text, 'stderr');
}

/** Text as the terminal shows it: without colour escapes (for widths and tests). */
export function plain(text: string): string {
  return util.stripVTControlCharacters(text);
}
