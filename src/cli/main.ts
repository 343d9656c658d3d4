/**
 * The `spool` command: start jobs, send them events, and look at them, on a SQLite file.
 * A client of the public API only; `bin/spool.js` runs it built (dist/) with plain node, and a
 * TypeScript machines module is loaded through tsx, registered only then (loadMachines.ts).
 *
 * @example
 * spool start job-lifecycle --input '{"name":"resize","items":2}' --id resize-1
 * spool send resize-1 START
 * spool send resize-1 '{"type":"ITEM_FAILED","reason":"timeout"}' --event-id webhook-7
 * spool show resize-1 --json
 */
import { CommanderError } from 'commander';
import { SpoolError } from '../index.ts';
import { DatabaseError, UsageError } from './errors.ts';
import { jsonText, oneLine } from './format.ts';
import type { CliIO } from './globals.ts';
import { buildProgram, wantsPackageVersion } from './program.ts';
import { colourWanted, paintErrorPrefix, useColour } from './style.ts';

export type { CliIO } from './globals.ts';

const processIO: CliIO = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  interactive: process.stdout.isTTY === true,
  colour: { stdout: colourWanted(process.stdout.isTTY, process.env), stderr: colourWanted(process.stderr.isTTY, process.env) },
};

/**
 * Run the command line `args` (without `node` and the script) and resolve with the exit code.
 * Errors are reported on `io.stderr` as one line (or one JSON object with `--json`); nothing throws.
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2));
 */
export async function main(args: readonly string[], io: CliIO = processIO): Promise<number> {
  const wantsJson = args.includes('--json');
  useColour(io.colour?.stdout === true, io.colour?.stderr === true);
  try {
    let code = 0;
    await buildProgram(io, (c) => (code = c), { packageVersion: wantsPackageVersion(args) }).parseAsync([...args], { from: 'user' });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0) return 0;
      if (error.code === 'commander.help') return error.exitCode || 1;
      const message = error.message.replace(/^error: /, '');
      return report(new UsageError(`${message.replace(/\.?$/, '.')} See \`spool --help\`.`), wantsJson, io);
    }
    return report(error, wantsJson, io);
  }
}

/** Print one error line (or one JSON object) on stderr; returns the exit code. */
function report(error: unknown, json: boolean, io: CliIO): number {
  if (error instanceof SpoolError) {
    io.stderr(json ? `${jsonText(error.toJSON())}\n` : `${paintErrorPrefix(`spool: ${error.code}:`)} ${oneLine(error.message)}\n`);
    return 1;
  }
  const e = error instanceof Error ? error : new Error(String(error));
  const rawCode: unknown = (e as Error & { code?: unknown }).code;
  if (typeof rawCode === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(rawCode)) {
    // A damaged file is not a bug to report: say what it is and what to do.
    return report(new DatabaseError(`The database file is damaged (${rawCode}: ${oneLine(e.message)}). Restore it from a backup, or salvage it with \`sqlite3 <file> .recover\`.`, { code: rawCode }), json, io);
  }
  const code = typeof rawCode === 'string' ? rawCode : 'SPOOL_INTERNAL';
  const message = `${oneLine(e.message)} (an unexpected error: please report it; set SPOOL_DEBUG=1 for the stack)`;
  io.stderr(json ? `${JSON.stringify({ code, category: 'internal', message })}\n` : `${paintErrorPrefix(`spool: ${code}:`)} ${message}\n`);
  if (process.env['SPOOL_DEBUG']) io.stderr(`${e.stack ?? ''}\n`);
  return 1;
}
