/**
 * The JobStore contract for `pendingBacklog()` (what `maxBacklog` limits): every event accepted
 * and not yet settled, across all jobs, held ones (suspended) included; duplicates count once;
 * a settled event no longer counts. Run against every store, on records built by hand.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { JobStore, NewInboxEvent, NewJob } from '../src/ports/store.ts';
import { Resources } from './helpers/resources.ts';
import { sqliteWasmContractStore } from './helpers/stores.ts';

const T0 = 1_700_000_000_000;
const res = new Resources();
afterEach(() => res.dispose());

function newJob(id: string): NewJob {
  return {
    id,
    machineId: 'm',
    machineVersion: '1',
    status: 'active',
    value: 'idle',
    statePaths: ['idle'],
    context: {},
    snapshot: JSON.stringify({ status: 'active', value: 'idle', context: {} }),
    input: {},
    inputHash: `hash:${id}`,
    idempotencyKey: null,
    owner: null,
    at: T0,
    transition: { eventId: null, eventType: 'xstate.init', payload: {}, from: null, to: 'idle', outcome: 'started', error: null, at: T0 },
  };
}

const event = (jobId: string, eventId: string): NewInboxEvent => ({ jobId, eventId, type: 'GO', payload: { type: 'GO' }, payloadHash: 'h', at: T0 });

const stores: [string, () => Promise<JobStore>][] = [
  ['sqlite', () => res.sqlite(res.dbPath())],
  ['sqlite-wasm', async () => res.track((await sqliteWasmContractStore()).store)],
];

describe.each(stores)('pendingBacklog (%s)', (_name, open) => {
  it('counts accepted, unsettled events of every job, held ones included, each once', async () => {
    const store = await open();
    expect(await store.pendingBacklog()).toBe(0);
    await store.createJob(newJob('a'));
    await store.createJob(newJob('b'));
    await store.acceptEvent(event('a', 'e1'));
    await store.acceptEvent(event('a', 'e2'));
    const { event: b1 } = await store.acceptEvent(event('b', 'e1'));
    expect(await store.pendingBacklog()).toBe(3);

    expect((await store.acceptEvent(event('a', 'e1'))).duplicate).toBe(true);
    expect(await store.pendingBacklog()).toBe(3);

    expect(await store.suspendJob('b', 'hold', T0, { jobId: 'b', kind: 'suspended', message: 'hold', at: T0 })).toBe(true);
    expect(await store.pendingBacklog()).toBe(3); // held events still take room

    expect(await store.rejectEvent(b1.seq!, { name: 'Error', message: 'settled' }, T0)).toBe(true);
    expect(await store.pendingBacklog()).toBe(2);
  });
});
