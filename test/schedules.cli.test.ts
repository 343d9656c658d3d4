/**
 * `spool schedule add|list|remove`, run in process through `main()` (test/helpers/inProcessCli.ts)
 * on a temp database file: what a user sees (exit code, stdout, stderr), with and without --json.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from './helpers/inProcessCli.ts';
import type { CliRun } from './helpers/spoolCli.ts';
import type { Schedule } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
afterEach(() => res.dispose());

function spool(cwd: string, args: readonly string[]): Promise<CliRun> {
  return runCli(args, cwd);
}

const NIGHTLY = ['schedule', 'add', 'nightly', 'job-lifecycle', '--cron', '0 3 * * *', '--timezone', 'Europe/Paris', '--overlap', 'skip', '--catch-up', 'run-once', '--input', '{"name":"nightly"}'];

describe('spool schedule', () => {
  it('add (created, then unchanged), list, remove; --json gives one document', async () => {
    const cwd = res.tempDir();
    const added = await spool(cwd, [...NIGHTLY, '--json']);
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    const first = JSON.parse(added.stdout) as { status: string; schedule: Schedule };
    expect(first).toMatchObject({
      status: 'created',
      schedule: { id: 'nightly', machineId: 'job-lifecycle', cron: '0 3 * * *', timezone: 'Europe/Paris', overlap: 'skip', catchUp: 'run-once', input: { name: 'nightly' }, revision: 1 },
    });
    expect(new Date(first.schedule.nextDueAt!).getUTCMinutes()).toBe(0);

    const again = await spool(cwd, NIGHTLY);
    expect(again).toMatchObject({ code: 0, stderr: '' });
    expect(again.stdout).toMatch(/status\s+unchanged/);
    expect(again.stdout).toMatch(/when\s+cron 0 3 \* \* \* \(Europe\/Paris\)/);

    const poll = await spool(cwd, ['schedule', 'add', 'poll', 'job-lifecycle', '--every', '15m', '--overlap', 'buffer-one', '--catch-up', 'run-each:3', '--input', '{"name":"poll"}', '--json']);
    expect(JSON.parse(poll.stdout)).toMatchObject({ status: 'created', schedule: { everyMs: 900_000, catchUp: { runEach: 3 }, overlap: 'buffer-one' } });

    const listed = await spool(cwd, ['schedule', 'list', '--json']);
    expect((JSON.parse(listed.stdout) as Schedule[]).map((s) => s.id)).toEqual(['nightly', 'poll']);
    const table = await spool(cwd, ['schedule', 'list']);
    expect(table.stdout).toMatch(/^ID\s+MACHINE\s+WHEN\s+OVERLAP\s+CATCH-UP\s+NEXT/);
    expect(table.stdout).toMatch(/poll\s+job-lifecycle\s+every 15m\s+buffer-one\s+run-each:3/);

    expect(JSON.parse((await spool(cwd, ['schedule', 'remove', 'nightly', '--json'])).stdout)).toEqual({ removed: true, id: 'nightly' });
    const gone = await spool(cwd, ['schedule', 'remove', 'nightly']);
    expect(gone).toMatchObject({ code: 1, stdout: '' });
    expect(gone.stderr).toBe('spool: SPOOL_SCHEDULE_NOT_FOUND: No schedule "nightly". Check the id with `spool schedule list`.\n');
  });

  it('a bad cron expression, an unknown machine, invalid input or a bad policy: one error line, exit 1, nothing stored', async () => {
    const cwd = res.tempDir();
    const cases: [string[], string][] = [
      [['schedule', 'add', 'x', 'job-lifecycle', '--cron', '0 3 * *', '--overlap', 'skip', '--catch-up', 'run-once', '--input', '{"name":"x"}'], 'SPOOL_INVALID_SCHEDULE'],
      [['schedule', 'add', 'x', 'nope', '--every', '1m', '--overlap', 'skip', '--catch-up', 'run-once'], 'SPOOL_UNKNOWN_MACHINE'],
      [['schedule', 'add', 'x', 'job-lifecycle', '--every', '1m', '--overlap', 'skip', '--catch-up', 'run-once', '--input', '{"name":5}'], 'SPOOL_INVALID'],
      [['schedule', 'add', 'x', 'job-lifecycle', '--every', '1m', '--overlap', 'later', '--catch-up', 'run-once'], 'SPOOL_USAGE'],
      [['schedule', 'add', 'x', 'job-lifecycle', '--every', '1m', '--overlap', 'skip', '--catch-up', 'sometimes'], 'SPOOL_USAGE'],
      [['schedule', 'add', 'x', 'job-lifecycle', '--overlap', 'skip', '--catch-up', 'run-once'], 'SPOOL_USAGE'],
    ];
    for (const [args, code] of cases) {
      const run = await spool(cwd, args);
      expect({ code: run.code, stdout: run.stdout }, args.join(' ')).toEqual({ code: 1, stdout: '' });
      expect(run.stderr, args.join(' ')).toMatch(new RegExp(`^spool: ${code}: [^\\n]+\\n$`));
    }
    const json = await spool(cwd, [...cases[0]![0], '--json']);
    expect(JSON.parse(json.stderr)).toMatchObject({ code: 'SPOOL_INVALID_SCHEDULE', category: 'bad-input', field: 'cron' });
    const listed = await spool(cwd, ['schedule', 'list', '--json']);
    expect(JSON.parse(listed.stdout)).toEqual([]);
  });
});
