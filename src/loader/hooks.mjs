// Module hooks for a user's machines module (`--machines FILE`), loaded without a build step by
// tsx. Two things a module written anywhere needs, that Node and tsx alone do not give it:
//
// 1. A `.ts` file outside any package with "type": "module" (a file in /tmp, or in a CommonJS
//    project) is ESM in practice (machines are written with `import`), but tsx would load it as
//    CommonJS, and Node 20 then fails with "Cannot require() ES Module ... in a cycle". It is
//    loaded as ESM, and so is a `.js` file there that is written as one (import or export
//    statements, and no require or module.exports).
// 2. Its `xstate`, `zod` and `spool` imports (`spool` for `defineJob` and `activity`) resolve to
//    the module's own install when it has one, and otherwise to Spool's, so a machine file needs
//    no `npm install` of its own (and shares Spool's XState instance).
//
// Both hold for every file the module imports, not only for the entry: a helper it imports
// (`./helper`, `./helper.ts`, `./helper.js`) is ESM too, and its zod import resolves the same way.
// For that tsx's resolve must run first and call this one (register.mjs registers these hooks
// before tsx): tsx then sees the `module` format set here. Run the other way round, tsx had
// already turned a `.ts` helper outside a type:module package into a CommonJS URL (with a
// `tsx-commonjs-export-preparse` query) that the extension test in `resolve` missed, and the
// helper's require('zod') failed: in Node 20, require() does not go through these hooks.
//
// Files under node_modules and `.cts` files are left as they are.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SPOOL_PACKAGE = new URL('../../package.json', import.meta.url).href;
const SPOOL_ROOT = new URL('../../', import.meta.url).href;
const SHARED = /^(xstate|zod|spool)(\/|$)/;

export async function resolve(specifier, context, nextResolve) {
  let resolved;
  try {
    resolved = await nextResolve(specifier, context);
  } catch (error) {
    const parent = context.parentURL ?? '';
    if (SHARED.test(specifier) && !parent.startsWith(SPOOL_ROOT)) return nextResolve(specifier, { ...context, parentURL: SPOOL_PACKAGE });
    throw error;
  }
  const { url } = resolved;
  if (!url.startsWith('file:') || url.includes('/node_modules/') || resolved.format === 'module') return resolved;
  if (/\.(m?ts|tsx)$/.test(url) || (url.endsWith('.js') && writtenAsEsm(url))) return { ...resolved, format: 'module' };
  return resolved;
}

const ESM_STATEMENT = /^\s*(import|export)[\s{*]/m;
const CJS_MARK = /\brequire\s*\(|\bmodule\.exports\b|^\s*exports\./m;

function writtenAsEsm(url) {
  try {
    const source = readFileSync(fileURLToPath(url), 'utf8');
    return ESM_STATEMENT.test(source) && !CJS_MARK.test(source);
  } catch {
    return false;
  }
}
