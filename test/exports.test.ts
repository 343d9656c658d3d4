/**
 * The package's entry points, imported by name as a user's code imports them: a child process
 * under plain node, resolving `spool/...` through package.json `exports` to the built dist/ (the
 * global setup builds it).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('package entry points', () => {
  it('spool, spool/store, spool/sqlite, spool/postgres, spool/sql, spool/sqlite-wasm, spool/memory, spool/testing, spool/machines and spool/client export what the README names', () => {
    const script = `
      const names = {};
      for (const entry of ['spool', 'spool/store', 'spool/sqlite', 'spool/postgres', 'spool/sql', 'spool/sqlite-wasm', 'spool/memory', 'spool/testing', 'spool/machines', 'spool/client']) names[entry] = Object.keys(await import(entry)).sort();
      console.log(JSON.stringify(names));`;
    const env = { ...process.env };
    delete env['NODE_OPTIONS'];
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, env, encoding: 'utf8' });
    const names = JSON.parse(out) as Record<string, string[]>;
    expect(names['spool']).toEqual(expect.arrayContaining(['createRuntime', 'runWorker', 'Runtime', 'SpoolError']));
    // The root is what an app uses; the store port's rules and the engine's internals are not in it.
    expect(names['spool']).toEqual(expect.arrayContaining(['defineJob', 'activity', 'TerminalError', 'ValidationError', 'JobQuarantined', 'JOB_STATUSES']));
    for (const internal of ['MachineRegistry', 'InspectionFeed', 'CommitOutcomeUnknown', 'madeUpEventId', 'redact', 'backoffDelay']) expect(names['spool']).not.toContain(internal);
    expect(names['spool']!.length).toBeLessThan(50);
    expect(names['spool/store']).toEqual(expect.arrayContaining(['CommitOutcomeUnknown', 'DAMAGED_RECORD', 'JOB_STATUSES', 'madeUpEventId', 'MAX_RELEASES', 'systemClock', 'StorageFullError']));
    expect(names['spool/sqlite']).toContain('SqliteStore');
    expect(names['spool/postgres']).toEqual(expect.arrayContaining(['PostgresStore', 'openStore']));
    expect(names['spool/sql']).toEqual(expect.arrayContaining(['SqlStore', 'SQLITE', 'POSTGRES', 'migrationsOf', 'statementsSql', 'runSync', 'runAsync', 'andThen']));
    expect(names['spool/sqlite-wasm']).toEqual(['SqliteWasmError', 'SqliteWasmStore', 'installPool', 'openSqliteWasmStore']);
    expect(names['spool/memory']).toContain('MemoryStore');
    expect(names['spool/testing']).toEqual(expect.arrayContaining(['VirtualClock', 'runPathTests', 'collectPathTests']));
    expect(names['spool/client']).toEqual(expect.arrayContaining(['createClient', 'RemoteError', 'EventStream']));
    expect(names['spool/machines']).toEqual(expect.arrayContaining(['jobLifecycle', 'exportJob', 'approvalFlow', 'retryingJob', 'pathTests']));
  });
});
