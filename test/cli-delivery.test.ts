/**
 * `spool redeliver` and `spool start-or-send`, in process through `main()`, and what `show` and
 * `list --stuck` say about a poison event: an activity's outcome whose onDone action throws
 * leaves the job stuck until the fix, then `redeliver` moves it on. Records are prepared
 * through the API on the same SQLite file.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { runCli } from './helpers/inProcessCli.ts';
import type { CliRun } from './helpers/spoolCli.ts';
import { createRuntime, type SendResult } from '../src/index.ts';
import { deliveryHooks, parcel, tally, till } from './fixtures/deliveryMachines.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TMP = join(ROOT, '.vitest-tmp', `cli-delivery-${randomBytes(4).toString('hex')}`);
const MACHINES = fileURLToPath(new URL('./fixtures/deliveryMachines.ts', import.meta.url));

function spool(args: readonly string[]): Promise<CliRun> {
  return runCli(['--machines', MACHINES, ...args], TMP);
}

let dbCount = 0;
const newDb = () => join(TMP, `delivery-${(dbCount += 1)}.db`);

beforeAll(() => mkdirSync(TMP, { recursive: true }));
afterAll(() => rmSync(TMP, { recursive: true, force: true }));
afterEach(() => {
  deliveryHooks.broken = true;
});

describe('spool redeliver', () => {
  it('a stuck job after a poison outcome: show and list --stuck name the way out; redeliver moves it on', async () => {
    const db = newDb();
    const store = await SqliteStore.open(db);
    const runtime = await createRuntime({ store, machines: [parcel, till, tally] });
    await runtime.start('parcel', {}, { jobId: 'p1' });
    await runtime.idle();
    const failed = (await runtime.events('p1')).find((e) => e.status === 'failed');
    expect(failed).toMatchObject({ type: 'xstate.done.actor.ship', source: 'effect' });
    await runtime.close();

    const stuck = await spool(['--db', db, 'list', '--stuck']);
    expect(stuck.stdout).toContain('p1');
    expect(stuck.stdout).toContain('`spool redeliver <job> <event id>`');
    const show = await spool(['--db', db, 'show', 'p1']);
    expect(show.stdout).toContain('failed events (not redelivered; each left the job where it was):');
    expect(show.stdout).toContain(failed!.eventId);
    expect(show.stdout).toContain(`\`spool redeliver p1 ${failed!.eventId}\``);

    deliveryHooks.broken = false; // the fix
    const redelivered = await spool(['--db', db, 'redeliver', 'p1', failed!.eventId, '--json']);
    expect(redelivered.stderr).toBe('');
    const result = JSON.parse(redelivered.stdout) as SendResult;
    expect(result).toMatchObject({ status: 'applied', eventId: `redeliver~${failed!.eventId}`, job: { value: 'shipped', context: { tracking: 'T-1' } } });
    const text = await spool(['--db', db, 'redeliver', 'p1', failed!.eventId]);
    expect(text.stdout).toMatch(/^duplicate +yes/m);
    expect(text.stdout).toMatch(new RegExp(`^redelivery of +${failed!.eventId}`, 'm'));
    const history = JSON.parse((await spool(['--db', db, 'show', 'p1', '--json'])).stdout) as { history: { eventType: string; outcome: string }[] };
    expect(history.history.filter((h) => h.eventType === 'xstate.done.actor.ship').map((h) => h.outcome)).toEqual(['failed', 'applied']);
  });

  it('refuses a job that moved on unless --force, with a typed error', async () => {
    const db = newDb();
    const store = await SqliteStore.open(db);
    const runtime = await createRuntime({ store, machines: [parcel, till, tally] });
    await runtime.start('till', {}, { jobId: 't1' });
    await runtime.send('t1', { type: 'PAY', amount: 3 }, { eventId: 'pay' });
    await runtime.send('t1', { type: 'BUMP' });
    await runtime.close();
    deliveryHooks.broken = false;
    const refused = await spool(['--db', db, 'redeliver', 't1', 'pay']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^spool: SPOOL_REDELIVERY_REFUSED: Job t1 has moved on since event "pay" failed at revision 2/);
    const forced = await spool(['--db', db, 'redeliver', 't1', 'pay', '--force']);
    expect(forced.stdout).toMatch(/^outcome +applied/m);
  });

  it('a failed event that carried a sensitive field: send and show give `spool send` as the way out, not redeliver', async () => {
    const db = newDb();
    const store = await SqliteStore.open(db);
    const runtime = await createRuntime({ store, machines: [parcel, till, tally] });
    await runtime.start('till', {}, { jobId: 's1' });
    await runtime.close();
    const sent = await spool(['--db', db, 'send', 's1', '{"type":"SECRET","pin":"1234"}', '--event-id', 'sec']);
    expect(sent.stdout).toMatch(/^outcome +failed/m);
    const hint = `\`spool send s1 '{"type":"SECRET",…}'\``;
    expect(sent.stdout).toContain(hint);
    expect(sent.stdout).not.toContain('spool redeliver');
    const show = await spool(['--db', db, 'show', 's1']);
    expect(show.stdout).toContain(hint);
    expect(show.stdout).not.toContain('`spool redeliver s1');
  });
});

describe('a failed outcome exits 1', () => {
  it('send, start-or-send and redeliver print the outcome, then SPOOL_EVENT_FAILED on stderr, exit 1', async () => {
    const db = newDb();
    expect((await spool(['--db', db, 'start', 'till', '--id', 't1'])).code).toBe(0);
    const sent = await spool(['--db', db, 'send', 't1', '{"type":"PAY","amount":1}', '--event-id', 'pay']);
    expect(sent.code).toBe(1);
    expect(sent.stdout).toMatch(/^outcome +failed$/m);
    expect(sent.stderr).toMatch(/^spool: SPOOL_EVENT_FAILED: Event pay failed on job t1 \(Error: .*payment provider client misconfigured\); the job did not move\./);
    // As a script reads it: the outcome on stdout, the error on stderr, both JSON.
    const json = await spool(['--db', db, 'send', 't1', '{"type":"PAY","amount":1}', '--event-id', 'pay', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'failed', duplicate: true });
    expect(JSON.parse(json.stderr)).toMatchObject({ code: 'SPOOL_EVENT_FAILED', outcome: { status: 'failed', eventId: 'pay' } });
    const redelivered = await spool(['--db', db, 'redeliver', 't1', 'pay']);
    expect(redelivered.code).toBe(1);
    expect(redelivered.stderr).toMatch(/^spool: SPOOL_EVENT_FAILED: Event redeliver~pay failed/);
    const created = await spool(['--db', db, 'start-or-send', 'till', 't2', '{"type":"PAY","amount":1}']);
    expect(created.code).toBe(1);
    expect(created.stdout).toMatch(/^created: yes$/m);
    expect(created.stderr).toMatch(/^spool: SPOOL_EVENT_FAILED: /);
    // Another outcome still exits 0.
    const bumped = await spool(['--db', db, 'send', 't1', 'BUMP']);
    expect(bumped, bumped.stderr).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('spool start-or-send', () => {
  it('creates the job and delivers the event, then sends to the job it finds', async () => {
    const db = newDb();
    const first = await spool(['--db', db, 'start-or-send', 'tally', 'cart', '{"type":"ADD","n":4}', '--input', '{"label":"x"}', '--event-id', 'e1']);
    expect(first.stderr).toBe('');
    expect(first.stdout).toMatch(/^created: yes/);
    expect(first.stdout).toMatch(/^outcome +applied/m);
    const second = JSON.parse((await spool(['--db', db, 'start-or-send', 'tally', 'cart', '{"type":"ADD","n":1}', '--input', '{"label":"x"}', '--json'])).stdout) as { created: boolean; job: { context: unknown } };
    expect(second).toMatchObject({ created: false, job: { context: { total: 5 } } });
  });
});
