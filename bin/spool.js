#!/usr/bin/env node
// The `spool` command. tsx loads TypeScript (Spool's own and your machine modules) without a build
// step; src/loader adds what a machines module written anywhere needs (ESM, xstate and zod).
import '../src/loader/register.mjs';

// `spool list | head`: the reader went away; stop quietly instead of printing a stack.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

const { main } = await import('../src/cli/main.ts');
// Exit once the command is done: output is written synchronously to files, pipes and terminals
// on Linux, and an activity a stopped worker abandoned (one that ignores its abort signal) must
// not keep the process alive.
process.exit(await main(process.argv.slice(2)));
