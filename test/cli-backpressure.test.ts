/**
 * `spool --max-backlog N start|send`: past the limit the command prints one line
 * (`spool: SPOOL_BACKPRESSURE: ...`, or one JSON object with --json carrying backlog, limit and
 * retryAfterMs), exits non-zero and writes nothing. The refusals run the real bin as a child
 * process; the setup runs in process through `main()`. The backlog is made of events sent to a
 * suspended job: they wait in the inbox, and a CLI command's recovery cannot apply them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { runCli } from './helpers/inProcessCli.ts';
import type { SendResult } from '../src/index.ts';
import { dumpDatabase, PROJECT_ROOT, TMP_ROOT } from './helpers/resources.ts';
import { runSpool, type CliRun } from './helpers/spoolCli.ts';
import { randomBytes } from 'node:crypto';

const TMP = join(TMP_ROOT, `cli-backpressure-${randomBytes(4).toString('hex')}`);
const DB = join(TMP, 'bp.db');
const MACHINES = join(PROJECT_ROOT, 'machines', 'index.ts');

function inProcess(args: readonly string[]): Promise<CliRun> {
  return runCli(['--db', DB, '--machines', MACHINES, ...args], TMP);
}

function dump(): Record<string, string[]> {
  const db = new Database(DB, { readonly: true });
  try {
    return dumpDatabase(db);
  } finally {
    db.close();
  }
}

beforeAll(() => mkdirSync(TMP, { recursive: true }));
afterAll(() => rmSync(TMP, { recursive: true, force: true }));

describe('spool --max-backlog', () => {
  it('refuses start and send past the limit with one line and a non-zero exit, writing nothing', async () => {
    expect((await inProcess(['start', 'job-lifecycle', '--id', 'j1', '--input', '{"name":"resize","items":5}'])).code).toBe(0);
    expect((await inProcess(['send', 'j1', 'START'])).code).toBe(0);
    expect((await inProcess(['suspend', 'j1'])).code).toBe(0);
    for (const eventId of ['a', 'b']) {
      const sent = await inProcess(['send', 'j1', 'ITEM_DONE', '--event-id', eventId, '--json']);
      expect(sent.code, sent.stderr).toBe(0);
      expect((JSON.parse(sent.stdout) as SendResult).status).toBe('pending');
    }
    const before = dump();

    const send = await runSpool(['--db', DB, '--machines', MACHINES, '--max-backlog', '2', 'send', 'j1', 'ITEM_DONE', '--event-id', 'c'], TMP);
    expect(send.code).toBe(1);
    expect(send.stdout).toBe('');
    expect(send.stderr.trimEnd().split('\n'), send.stderr).toHaveLength(1);
    expect(send.stderr).toMatch(/^spool: SPOOL_BACKPRESSURE: Too much work waiting: 2 events accepted but not yet applied \(maxBacklog 2\)\. Nothing was recorded; retry after \d+ ms/);

    const start = await runSpool(['--db', DB, '--machines', MACHINES, '--max-backlog', '2', '--json', 'start', 'job-lifecycle', '--id', 'j2', '--input', '{"name":"x"}'], TMP);
    expect(start.code).toBe(1);
    expect(start.stdout).toBe('');
    expect(start.stderr.trimEnd().split('\n')).toHaveLength(1);
    const error = JSON.parse(start.stderr) as Record<string, unknown>;
    expect(error).toMatchObject({ code: 'SPOOL_BACKPRESSURE', category: 'retryable', backlog: 2, limit: 2 });
    expect(error['retryAfterMs']).toBeGreaterThan(0);
    expect(dump()).toEqual(before);

    // A repeat of an accepted event id is answered with its first outcome, never refused.
    const again = await inProcess(['--max-backlog', '2', 'send', 'j1', 'ITEM_DONE', '--event-id', 'a', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout) as SendResult).toMatchObject({ status: 'pending', duplicate: true });

    const bad = await inProcess(['--max-backlog', 'lots', 'send', 'j1', 'ITEM_DONE']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^spool: SPOOL_USAGE: --max-backlog must be a positive integer/);
    expect(dump()).toEqual(before);

    // Resumed, the job applies what waited; the backlog is empty and the same command passes.
    expect((await inProcess(['resume', 'j1'])).code).toBe(0);
    const passes = await inProcess(['--max-backlog', '2', 'send', 'j1', 'ITEM_DONE', '--event-id', 'c', '--json']);
    expect(passes.code, passes.stderr).toBe(0);
    expect(JSON.parse(passes.stdout) as SendResult).toMatchObject({ status: 'applied', duplicate: false });
  });
});
