#!/usr/bin/env node
// The `spool` command. tsx loads TypeScript (Spool's own and your machine modules) without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
