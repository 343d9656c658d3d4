/**
 * The layers of the tree, checked by test/layers.test.ts (and `npx depcruise src persistence`).
 * Type-only imports count: a cycle through types is still a cycle to a reader.
 *
 *   src/base, src/ports   json, errors, redaction, snapshot parsing, definition types; the store port
 *   src/step              one transition, pure
 *   src/runtime           the engine
 *   src/cli, src/server, src/testing, src/views, src/loader, persistence   on top
 *   src/client            the HTTP client: runs in browsers too, so fetch and streams only
 *
 * The engine (src/base, src/ports, src/step, src/runtime), the SQL core (persistence/sql) and the
 * client import no Node built-in and no Node database library: they run in a browser Worker on
 * web-standard APIs (test/webStandard.test.ts bundles them for the browser). Node is for the
 * drivers (persistence/drivers), the CLI, the server's listener, the loader and the scripts.
 *
 * In persistence/: the SQL core (persistence/sql) names no driver; each driver
 * (persistence/drivers/<name>) imports the core and its own client library, never another driver's.
 * The `spool/postgres` entry's static graph never reaching better-sqlite3 is checked by test/layers.test.ts.
 */
const LOWER = '^src/(base|ports)/';
/** What runs on web-standard APIs alone. */
const WEB_STANDARD = '^(src/(base|ports|step|runtime|client)|persistence/sql)/';
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
      name: 'sql-core-names-no-driver',
      severity: 'error',
      comment: 'persistence/sql is the store written once: it imports no driver, nor a driver library.',
      from: { path: '^persistence/sql/' },
      to: { path: ['^persistence/(drivers|memory)/', '^persistence/(openStore|migrateStore)\\.ts$', 'node_modules/(better-sqlite3|pg|pg-[a-z-]+)/'] },
    },
    {
      name: 'driver-imports-no-other-driver',
      severity: 'error',
      comment: 'A driver imports the SQL core and its own library; adding one touches its folder and one line of persistence/openStore.ts.',
      from: { path: '^persistence/drivers/([^/]+)/' },
      to: { path: '^persistence/drivers/', pathNot: '^persistence/drivers/$1/' },
    },
    {
      name: 'pg-driver-not-sqlite',
      severity: 'error',
      comment: 'The Postgres driver never loads the SQLite addon.',
      from: { path: '^persistence/drivers/pg/' },
      to: { path: 'node_modules/better-sqlite3/' },
    },
    {
      name: 'sqlite-driver-not-pg',
      severity: 'error',
      comment: 'The SQLite driver never loads node-postgres.',
      from: { path: '^persistence/drivers/better-sqlite3/' },
      to: { path: 'node_modules/pg/' },
    },
    {
      name: 'engine-no-node',
      severity: 'error',
      comment:
        'The engine, the SQL core and the client run in browsers and Workers: no Node built-in (web-standard APIs; Node\'s own, where faster, ' +
        'through src/base/node.ts at run time) and no Node database library.',
      from: { path: WEB_STANDARD },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'engine-no-node-library',
      severity: 'error',
      comment: 'The engine, the SQL core and the client load no Node database library: the drivers do.',
      from: { path: WEB_STANDARD },
      to: { path: 'node_modules/(better-sqlite3|bindings|pg|pg-[a-z-]+)/' },
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
  },
};
