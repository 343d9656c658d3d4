/**
 * The `inspect` runtime option: a real `@statelyai/inspect` WebSocket inspector, pointed at a
 * local receiver, shows every job as an actor (registration, each event with its source, each
 * committed snapshot), child jobs and activities as its children, and re-announces the active
 * jobs after a restart. An observer that throws is logged and changes nothing.
 */
import { createServer } from 'node:net';
import { createWebSocketInspector } from '@statelyai/inspect';
import { createInspectorServer } from '@statelyai/inspect/server';
import WebSocket from 'ws';
import type { InspectionEvent } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { InspectionFeed, ValidationError, type LogEntry, type Runtime } from '../src/internal.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { Resources } from './helpers/resources.ts';
import { startReceiver, statelyProblems, storyOf } from './helpers/inspectorReceiver.ts';

const label = setup({
  actors: { print: fromPromise(async () => ({ printed: true })) },
}).createMachine({
  id: 'label',
  initial: 'printing',
  states: {
    printing: { invoke: { id: 'print', src: 'print', onDone: 'printed' } },
    printed: { type: 'final' },
  },
});

const ship = setup({
  types: { context: {} as { boxes: number; card: string } },
  actors: { pack: fromPromise(async () => ({ boxes: 2 })), label },
}).createMachine({
  id: 'ship',
  context: { boxes: 0, card: '4111' },
  initial: 'idle',
  states: {
    idle: { on: { GO: 'packing' } },
    packing: { invoke: { id: 'pack', src: 'pack', onDone: 'cooling' } },
    cooling: { after: { 1000: 'labelling' } },
    labelling: { invoke: { id: 'label', src: 'label', onDone: 'shipped' } },
    shipped: { type: 'final' },
  },
});
const shipJob = { machine: ship, version: 1, sensitive: ['card'] };

const res = new Resources();
afterEach(() => res.dispose());

describe('the inspect option', () => {
  it('shows each job, its activities and child jobs to a Stately WebSocket inspector, after each commit, with sources', async () => {
    const receiver = await startReceiver();
    res.track({ close: () => receiver.close() });
    const inspector = createWebSocketInspector({ url: receiver.url });
    const clock = new VirtualClock();
    const path = res.dbPath();
    const runtime = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [shipJob], clock, inspect: inspector.inspect });
    await runtime.start('ship', {}, { jobId: 's1' });
    await runtime.send('s1', { type: 'GO' });
    await runtime.waitFor('s1', (j) => j.value === 'cooling');
    clock.advance(1000);
    await runtime.tick();
    await runtime.waitFor('s1', (j) => j.final);
    await runtime.idle();
    const frames = await receiver.until((f) => f.some((x) => x.type === '@xstate.snapshot' && x.sessionId === 'spool:s1' && x.snapshot?.value === 'shipped'));
    inspector.stop();

    expect(statelyProblems(frames)).toEqual([]);
    const story = storyOf(frames, 'spool:s1');
    expect(story).toEqual([
      'actor:s1',
      'event:xstate.init<-outside',
      'snapshot:"idle"',
      'event:GO<-outside',
      'snapshot:"packing"',
      'event:xstate.done.actor.pack<-spool:s1~pack~r2',
      'snapshot:"cooling"',
      expect.stringMatching(/^event:xstate\.after\.1000\.ship\.cooling<-spool:s1$/),
      'snapshot:"labelling"',
      'event:xstate.done.actor.label<-spool:s1~label~r4',
      'snapshot:"shipped"',
    ]);
    const actor = frames.find((f) => f.type === '@xstate.actor' && f.sessionId === 'spool:s1')!;
    expect(actor.rootId).toBe('spool:s1');
    expect(JSON.parse(actor.definition!)).toMatchObject({ id: 'ship', initial: 'idle', states: { cooling: { after: { 1000: 'labelling' } } } });
    // Context is redacted as every client shows it.
    expect(frames.filter((f) => f.sessionId === 'spool:s1' && f.snapshot).every((f) => (f.snapshot!.context as { card: string }).card === '[redacted]')).toBe(true);

    // The activity is the job's invoked actor; the child job an actor of the same system.
    expect(storyOf(frames, 'spool:s1~pack~r2')).toEqual(['actor:pack']);
    expect(frames.find((f) => f.sessionId === 'spool:s1~pack~r2')).toMatchObject({ parentId: 'spool:s1', rootId: 'spool:s1' });
    const child = 'spool:s1~label~r4';
    expect(frames.find((f) => f.type === '@xstate.actor' && f.sessionId === child)).toMatchObject({ parentId: 'spool:s1', rootId: 'spool:s1' });
    expect(storyOf(frames, child)).toEqual([
      'actor:s1~label~r4',
      'event:xstate.init<-spool:s1',
      'snapshot:"printing"',
      'event:xstate.done.actor.print<-spool:s1~label~r4~print~r1',
      'snapshot:"printed"',
    ]);
    // Every snapshot comes after its commit: the snapshots of s1 are the history, in order.
    const history = await runtime.history('s1');
    const snapshots = frames.filter((f) => f.type === '@xstate.snapshot' && f.sessionId === 'spool:s1').map((f) => f.snapshot!.value);
    expect(snapshots).toEqual(history.map((h) => h.to));
  });

  it('tells the same story from the history feed (as spool inspect relays it) as from the live runtime', async () => {
    const live: InspectionEvent[] = [];
    const clock = new VirtualClock();
    const runtime = await res.runtime({ store: await res.sqlite(res.dbPath(), { clock }), machines: [shipJob], clock, inspect: (e) => live.push(e) });
    await runtime.start('ship', {}, { jobId: 's2' });
    await runtime.send('s2', { type: 'GO' });
    await runtime.waitFor('s2', (j) => j.value === 'cooling');
    clock.advance(1000);
    await runtime.tick();
    await runtime.waitFor('s2', (j) => j.final);
    await runtime.idle();

    const relayed: InspectionEvent[] = [];
    const feed = new InspectionFeed({ observer: (e) => relayed.push(e), registry: runtime.registry, store: runtime.store, owner: null, log: () => {} });
    for (const r of await allHistory(runtime)) await feed.onFeedRecord(r);
    const sessions = [...new Set(live.map((e) => e.actorRef.sessionId))].sort();
    expect(sessions).toEqual(['spool:s2', 'spool:s2~label~r4', 'spool:s2~label~r4~print~r1', 'spool:s2~pack~r2']);
    for (const id of sessions) expect(words(relayed, id)).toEqual(words(live, id));
  });

  it("reaches the page of @statelyai/inspect's own bridge server (what embeds Stately's hosted inspector)", async () => {
    const port = await freePort();
    const bridge = createInspectorServer({ port, autoOpen: false });
    res.track({ close: async () => bridge.stop() });
    // The bridge's page (an iframe of stately.ai/inspect) is a WebSocket client of it: be that page.
    const page = new WebSocket(`ws://127.0.0.1:${port}`);
    const received: { type: string; sessionId: string; snapshot?: { value?: unknown } }[] = [];
    let heard: () => void = () => {};
    page.on('message', (data) => {
      received.push(JSON.parse(String(data)) as (typeof received)[number]);
      heard();
    });
    await new Promise((resolve) => page.once('open', resolve));
    res.track({ close: async () => page.terminate() });
    const inspector = createWebSocketInspector({ url: `ws://127.0.0.1:${port}` });
    const runtime = await res.runtime({ store: await res.sqlite(res.dbPath()), machines: [shipJob], inspect: inspector.inspect });
    await runtime.start('ship', {}, { jobId: 'b' });
    await runtime.send('b', { type: 'GO' });
    while (!received.some((f) => f.type === '@xstate.snapshot' && f.snapshot?.value === 'packing')) await new Promise<void>((resolve) => (heard = resolve));
    inspector.stop();
    expect(received.filter((f) => f.sessionId === 'spool:b').map((f) => f.type).slice(0, 5)).toEqual(['@xstate.actor', '@xstate.event', '@xstate.snapshot', '@xstate.event', '@xstate.snapshot']);
  });

  it('re-announces the active jobs on open, and not the ended ones', async () => {
    const clock = new VirtualClock();
    const path = res.dbPath();
    const first = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [shipJob], clock });
    await first.start('ship', {}, { jobId: 'ended' });
    await first.send('ended', { type: 'GO' });
    await first.waitFor('ended', (j) => j.value === 'cooling');
    clock.advance(1000);
    await first.tick();
    await first.waitFor('ended', (j) => j.final);
    await first.start('ship', {}, { jobId: 'waiting' });
    await first.start('ship', {}, { jobId: 'cooled' });
    await first.send('cooled', { type: 'GO' });
    await first.waitFor('cooled', (j) => j.value === 'cooling');
    await first.close();

    const seen: InspectionEvent[] = [];
    const again = await res.runtime({ store: await res.sqlite(path, { clock }), machines: [shipJob], clock, inspect: { next: (e) => seen.push(e) } });
    await again.idle();
    const actors = seen.filter((e) => e.type === '@xstate.actor').map((e) => [e.actorRef.sessionId, e.actorRef.getSnapshot().value]);
    expect(actors).toEqual([
      ['spool:cooled', 'cooling'],
      ['spool:waiting', 'idle'],
    ]);
    // After the announcement, a commit is shown once, with the new snapshot.
    await again.send('waiting', { type: 'GO' });
    await again.idle();
    const after = seen.filter((e) => e.actorRef.sessionId === 'spool:waiting' && e.type !== '@xstate.actor');
    expect(after.map((e) => `${e.type}:${'event' in e ? e.event.type : ''}`)).toEqual(expect.arrayContaining(['@xstate.event:GO', '@xstate.snapshot:GO']));
  });

  it('shows a snapshot only once its commit is on disk', async () => {
    const path = res.dbPath();
    const store = await res.sqlite(path);
    const reader = res.raw(path, { readonly: true });
    const order = ['idle', 'packing', 'cooling'];
    const seen: [shown: number, stored: number][] = [];
    const observer = (e: InspectionEvent) => {
      if (e.type !== '@xstate.snapshot' || e.actorRef.sessionId !== 'spool:d') return;
      // Read from another connection the moment the observer hears of it: that state (or a later one) is committed.
      const row = reader.prepare('SELECT state_value AS v FROM jobs WHERE id = ?').get('d') as { v: string } | undefined;
      seen.push([order.indexOf((e.snapshot as unknown as { value: string }).value), row ? order.indexOf(JSON.parse(row.v) as string) : -1]);
    };
    const runtime = await res.runtime({ store, machines: [shipJob], inspect: observer });
    await runtime.start('ship', {}, { jobId: 'd' });
    await runtime.send('d', { type: 'GO' });
    await runtime.waitFor('d', (j) => j.value === 'cooling');
    await runtime.idle();
    expect(seen.map(([shown]) => shown)).toEqual([0, 1, 2]);
    for (const [shown, stored] of seen) expect(stored).toBeGreaterThanOrEqual(shown);
  });

  it('logs an observer that throws and goes on', async () => {
    const log: LogEntry[] = [];
    const runtime = await res.runtime({
      store: await res.sqlite(res.dbPath()),
      machines: [shipJob],
      log: (e) => log.push(e),
      inspect: () => {
        throw new Error('inspector broke');
      },
    });
    await runtime.start('ship', {}, { jobId: 'x' });
    const r = await runtime.send('x', { type: 'GO' });
    expect(r.status).toBe('applied');
    await runtime.waitFor('x', (j) => j.value === 'cooling');
    await runtime.idle();
    expect(log.some((e) => e.msg === 'inspection observer threw' && e['event'] === '@xstate.snapshot')).toBe(true);
  });

  it('refuses an inspect option that is not an observer', async () => {
    const store = await res.sqlite(res.dbPath());
    await expect(res.runtime({ store, machines: [shipJob], inspect: 42 as never })).rejects.toThrow(ValidationError);
    await expect(res.runtime({ store, machines: [shipJob], inspect: { nxet: () => {} } as never })).rejects.toThrow(/inspect: must be an XState inspection observer/);
  });
});



/** Every history record of the store, in commit order. */
async function allHistory(runtime: Runtime) {
  const page = await runtime.historySince(0, { limit: 1000 });
  return page.records;
}

/** One actor's inspection events as words: kind, event type, source, state. */
function words(events: readonly InspectionEvent[], sessionId: string): string[] {
  return events
    .filter((e) => e.actorRef.sessionId === sessionId)
    .map((e) => {
      if (e.type === '@xstate.actor') return `actor parent=${(e.actorRef as { _parent?: { sessionId: string } })._parent?.sessionId ?? '-'} root=${e.rootId}`;
      if (e.type === '@xstate.event') return `event ${e.event.type} <- ${e.sourceRef?.sessionId ?? 'outside'}`;
      if (e.type === '@xstate.snapshot') return `snapshot ${JSON.stringify((e.snapshot as { value?: unknown }).value)} ${(e.snapshot as { status?: string }).status}`;
      return e.type;
    });
}

/** A TCP port nothing listens on now (the bridge server takes a port number, not 0). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (address !== null && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
