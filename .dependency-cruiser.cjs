/**
 * The layers of the tree, checked by test/layers.test.ts (and `npx depcruise src persistence`).
 * Type-only imports count: a cycle through types is still a cycle to a reader.
 *
 *   src/base, src/ports   json, errors, redaction, snapshot parsing, definition types; the store port
 *   src/step              one transition, pure
 *   src/runtime           the engine
 *   src/cli, src/server, src/testing, src/views, src/loader, persistence   on top
 */
const LOWER = '^src/(base|ports)/';
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
  ],
  options: {
    // TypeScript 7 has no JavaScript API: swc parses the sources.
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: 'node_modules' },
  },
};
