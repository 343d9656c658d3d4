#!/usr/bin/env node
// The `spool` command: the built JavaScript (dist/, `npm run build`), run by plain node. A
// TypeScript machines module (`--machines app/machines.ts`) is loaded through tsx, registered
// only then (src/cli/loadMachines.ts); src/loader adds what a module written anywhere needs.
import { existsSync } from 'node:fs';

const MAIN = new URL('../dist/src/cli/main.js', import.meta.url);
if (!existsSync(MAIN)) {
  process.stderr.write('spool: dist/ is missing: run `npm run build` in the Spool checkout first.\n');
  process.exit(1);
}

// `spool list | head`: the reader went away; stop quietly instead of printing a stack.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

const { main } = await import(MAIN.href);
const code = await main(process.argv.slice(2));
// Exit once the command is done and its output is out: an activity a stopped worker abandoned (one
// that ignores its abort signal) must not keep the process alive. A pipe whose reader is slow
// takes 64 KiB and Node queues the rest: exiting before that drains would cut the output.
process.exitCode = code;
await Promise.all([process.stdout, process.stderr].map(flushed));
process.exit(code);

/** Resolves once everything written to `stream` so far has been handed to the system (or it failed). */
function flushed(stream) {
  return new Promise((resolve) => {
    if (stream.writableLength === 0 || stream.destroyed) resolve();
    else stream.write('', () => resolve());
  });
}
