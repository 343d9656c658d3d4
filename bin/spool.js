#!/usr/bin/env node
// The `spool` command. tsx loads TypeScript (Spool's own and your machine modules) without a build step.
import { register } from 'tsx/esm/api';

// `spool list | head`: the reader went away; stop quietly instead of printing a stack.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
