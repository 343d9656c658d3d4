// Load TypeScript without a build step (tsx), with the hooks a user's machines module needs
// (hooks.mjs). Imported by the `spool` command, and passed as `--import` to the child processes
// of path tests, which load the same machines module.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
register('./hooks.mjs', import.meta.url);
