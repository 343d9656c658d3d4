// Load TypeScript without a build step (tsx), with the hooks a user's machines module needs
// (hooks.mjs). Imported by the `spool` command, and passed as `--import` to the child processes
// of path tests, which load the same machines module.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

// Hooks registered last run first: tsx's resolve calls hooks.mjs's, and so keeps the format it
// sets (a `.ts` file imported by the machines module is ESM, not CommonJS; see hooks.mjs).
register('./hooks.mjs', import.meta.url);
registerTsx();
