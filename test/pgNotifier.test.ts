/**
 * The Postgres store's NOTIFY after commits (persistence/drivers/pg/changes.ts, `Notifier`): one
 * in flight at a time, work at once, changes alone at most once per CHANGES_GAP_MS. Timers are
 * faked (performance.now included): no server, no wall clock.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHANGES_GAP_MS, Notifier } from '../persistence/drivers/pg/changes.ts';

/** A NOTIFY sender that records each call (`wake` or not) and settles when the test says. */
function sender() {
  const sent: boolean[] = [];
  const pending: (() => void)[] = [];
  const send = (wake: boolean) => {
    sent.push(wake);
    return new Promise<void>((resolve) => pending.push(resolve));
  };
  /** Settle the NOTIFY in flight, and let the notifier go on. */
  const land = async () => {
    pending.shift()?.();
    await vi.advanceTimersByTimeAsync(0);
  };
  return { sent, send, land };
}

describe('Notifier', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] }));
  afterEach(() => vi.useRealTimers());

  it('sends work at once, and the commits that land while one is in flight share the next', async () => {
    const s = sender();
    const n = new Notifier(s.send);
    n.committed(true);
    expect(s.sent).toEqual([true]);
    n.committed(false);
    n.committed(true);
    n.committed(false);
    expect(s.sent).toEqual([true]); // one in flight
    await s.land();
    expect(s.sent).toEqual([true, true]); // the three as one, on the work channel
    await s.land();
    expect(s.sent).toEqual([true, true]);
  });

  it('sends changes alone at most once per gap, however many commits made them', async () => {
    const s = sender();
    const n = new Notifier(s.send);
    n.committed(false);
    expect(s.sent).toEqual([false]); // the first at once
    await s.land();
    for (let i = 0; i < 10; i++) n.committed(false);
    expect(s.sent).toEqual([false]); // inside the gap: waiting
    await vi.advanceTimersByTimeAsync(CHANGES_GAP_MS - 1);
    expect(s.sent).toEqual([false]);
    await vi.advanceTimersByTimeAsync(1);
    expect(s.sent).toEqual([false, false]); // the ten as one, when the gap is over
    await s.land();
    await vi.advanceTimersByTimeAsync(10 * CHANGES_GAP_MS);
    expect(s.sent).toEqual([false, false]); // nothing more committed: nothing more sent
  });

  it('sends work inside the gap at once, with the changes that waited', async () => {
    const s = sender();
    const n = new Notifier(s.send);
    n.committed(false);
    await s.land();
    n.committed(false);
    expect(s.sent).toEqual([false]);
    n.committed(true);
    expect(s.sent).toEqual([false, true]);
    await s.land();
    await vi.advanceTimersByTimeAsync(CHANGES_GAP_MS);
    expect(s.sent).toEqual([false, true]); // the waiting changes went with the work
  });

  it('flush sends the changes waiting for their gap at once, and waits for them', async () => {
    const s = sender();
    const n = new Notifier(s.send);
    n.committed(false);
    await s.land();
    n.committed(false);
    let flushed = false;
    const flushing = n.flush().then(() => (flushed = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(s.sent).toEqual([false, false]); // not after the gap: now
    expect(flushed).toBe(false);
    await s.land();
    await flushing;
    expect(flushed).toBe(true);
  });

  it('drops a NOTIFY that fails and goes on with the next', async () => {
    const sent: boolean[] = [];
    const n = new Notifier(async (wake) => {
      sent.push(wake);
      if (sent.length === 1) throw new Error('connection lost');
    });
    n.committed(true);
    n.committed(true);
    await n.flush();
    expect(sent).toEqual([true, true]);
  });
});
