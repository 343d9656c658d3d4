/**
 * The layers of the tree, checked by test/layers.test.ts (and `npx depcruise src persistence`).
 * Type-only imports count: a cycle through types is still a cycle to a reader.
 *
 *   src/base, src/ports   json, errors, redaction, snapshot parsing, definition types; the store port
 *   src/step              one transition, pure
 *   src/runtime           the engine
 *   src/cli, src/server, src/testing, src/views, src/loader, persistence   on top
 *   src/client            the HTTP client: runs in browsers too, so fetch and streams only
 */
const LOWER = '^src/(base|ports)/';
/** What src/client may import: itself, the error classes, and (as types only) the API's types. */
const CLIENT_MAY_IMPORT = '^src/(client/|base/(errors|httpErrors)\\.ts$|ports/|runtime/(api|machineTypes|intake)\\.ts$)';
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'No module imports itself through others.', from: {}, to: { circular: true } },
    {
      name: 'lower-layer',
      severity: 'error',
      comment: 'base/ and ports/ sit below step/ and runtime/: they import neither, nor anything above.',
      from: { path: LOWER },
      to: { path: '^(src/(step|runtime|cli|server|testing|views|loader)|persistence)/' },
    },
    {
      name: 'step-below-runtime',
      severity: 'error',
      comment: 'step/ is the pure transition: it imports nothing from runtime/ or above.',
      from: { path: '^src/step/' },
      to: { path: '^(src/(runtime|cli|server|testing|views|loader)|persistence)/' },
    },
    {
      name: 'client-no-node',
      severity: 'error',
      comment: 'src/client runs in browsers: no Node built-ins (fetch, streams, AbortController and TextDecoder only).',
      from: { path: '^src/client/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'client-types-only',
      severity: 'error',
      comment:
        'src/client uses the error classes (base/errors.ts, httpErrors.ts) and the types of the API (ports/, runtime/api.ts, machineTypes.ts, intake.ts), nothing else of the engine. ' +
        'swc does not mark type-only imports, so test/layers.test.ts checks that those imports are `import type`.',
      from: { path: '^src/client/' },
      to: { path: '^(src|persistence|machines)/', pathNot: CLIENT_MAY_IMPORT },
    },
  ],
  options: {
    // TypeScript 7 has no JavaScript API: swc parses the sources.
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
  },
};
