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
// Exit once the command is done: output is written synchronously to files, pipes and terminals
// on Linux, and an activity a stopped worker abandoned (one that ignores its abort signal) must
// not keep the process alive.
process.exit(await main(process.argv.slice(2)));
