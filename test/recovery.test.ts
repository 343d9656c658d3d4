/**
 * Recovery cost: with `verifySnapshots: false`, opening a runtime checks machine versions by SQL
 * aggregate and does not read healthy waiting jobs; jobs that cannot run are still quarantined.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { assign, createMachine, fromPromise, setup } from 'xstate';
import { VirtualClock } from '../src/testing/index.ts';
import { rawAt, rawGet, rawRun } from './helpers/rawSql.ts';
import { Resources } from './helpers/resources.ts';

const v1 = setup({ types: { context: {} as { n: number } } }).createMachine({
  id: 'waiter',
  context: { n: 0 },
  initial: 'waiting',
  states: { waiting: { on: { GO: { target: 'done', actions: assign({ n: 1 }) } }, after: { 60_000: 'done' } }, done: { type: 'final' } },
});
const other = createMachine({ id: 'other', initial: 'idle', states: { idle: { on: { GO: 'done' } }, done: { type: 'final' } } });

const resources = new Resources();
afterEach(() => resources.dispose());

describe('recovery with verifySnapshots: false', () => {
  it('reads no healthy job at open, still quarantines an unregistered version, and releases it when registered again', async () => {
    const path = resources.dbPath();
    const clock = new VirtualClock();
    const first = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [v1, other], clock });
    for (let i = 0; i < 50; i += 1) await first.start('waiter', {}, { jobId: `w${i}` });
    await first.start('other', {}, { jobId: 'o1' });
    await first.close();

    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [v1], clock, recover: false, verifySnapshots: false });
    const outcome = await second.recover();
    expect(outcome.checked).toBe(1); // only the job whose machine is not registered
    expect(outcome.quarantined).toBe(1);
    expect((await second.list({ quarantined: true })).map((j) => j.id)).toEqual(['o1']);
    expect((await second.send('w7', { type: 'GO' })).status).toBe('applied');
    await second.close();

    const third = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [v1, other], clock, recover: false, verifySnapshots: false });
    const again = await third.recover();
    expect(again).toMatchObject({ checked: 1, quarantined: 0 });
    expect((await third.get('o1')).quarantine).toBeNull();
  });

  it('quarantines a snapshot that no longer fits when its job is next touched', async () => {
    const path = resources.dbPath();
    const clock = new VirtualClock();
    const first = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [v1], clock });
    await first.start('waiter', {}, { jobId: 'bad' });
    await first.start('waiter', {}, { jobId: 'good' });
    await first.close();
    const raw = await rawAt(resources, path);
    const snapshot = JSON.parse((await rawGet<{ snapshot: string }>(raw, "SELECT snapshot FROM jobs WHERE id = 'bad'"))!.snapshot) as Record<string, unknown>;
    expect(await rawRun(raw, "UPDATE jobs SET snapshot = ? WHERE id = 'bad'", JSON.stringify({ ...snapshot, value: 'vanished' }))).toBe(1);

    const second = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [v1], clock, verifySnapshots: false });
    expect((await second.get('bad')).quarantine).toBeNull(); // not read at open
    // The first send finds it unfit: it is quarantined and the caller hears so at once, the event unwritten.
    await expect(second.send('bad', { type: 'GO' }, { eventId: 'go-1' })).rejects.toMatchObject({ code: 'SPOOL_QUARANTINED', message: expect.stringMatching(/does not fit the registered machine/) });
    expect((await second.get('bad')).quarantine).toMatch(/does not exist|does not fit/);
    expect((await second.events('bad')).map((e) => e.eventId)).not.toContain('go-1');
    expect((await second.send('good', { type: 'GO' })).status).toBe('applied');
  });
});

describe('activities of a job whose machine a runtime does not have', () => {
  let calls = 0;
  const napper = setup({
    actors: {
      nap: fromPromise(async () => {
        calls += 1;
        return 'rested';
      }),
    },
  }).createMachine({
    id: 'napper',
    initial: 'napping',
    states: { napping: { invoke: { id: 'nap', src: 'nap', onDone: 'done' } }, done: { type: 'final' } },
  });

  it('are left unclaimed, the job quarantined, whether the job was there at open or started later; a runtime with the machine runs them', async () => {
    const path = resources.dbPath();
    const clock = new VirtualClock();
    const starter = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [napper], clock, runEffects: false });
    await starter.start('napper', {}, { jobId: 'before' });

    // A worker without the machine: at open it quarantines `before`; `after` is started while it runs.
    const wrong = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [other], clock, hostDriven: true });
    await starter.start('napper', {}, { jobId: 'after' });
    expect(await wrong.tick()).toMatchObject({ activitiesStarted: 0 });
    await wrong.idle();
    expect(await wrong.nextWakeAt()).toBeNull(); // nothing it cannot run wakes it
    for (const id of ['before', 'after']) {
      const details = await starter.details(id);
      expect(details.job.quarantine).toBe('machine napper is not registered');
      expect(details.effects.map((e) => [e.status, e.attempt])).toEqual([['pending', 0]]);
      expect(details.attempts).toEqual([]);
    }
    await wrong.close();
    await starter.close();
    expect(calls).toBe(0);

    const right = await resources.runtime({ store: await resources.sqlite(path, { clock }), machines: [napper], clock, hostDriven: true });
    await right.tick();
    for (const id of ['before', 'after']) expect(await right.waitFor(id, (j) => j.final)).toMatchObject({ value: 'done', quarantine: null });
    expect(calls).toBe(2);
  });
});
