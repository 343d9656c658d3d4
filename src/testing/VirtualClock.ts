import type { Clock } from '../ports/clock.ts';

/**
 * A clock that moves only when told to. Give it to the runtime and the stores, move it, then
 * call `runtime.tick()`: due timers fire and due retries start, with no wall-clock sleeping.
 *
 * @example
 * const clock = new VirtualClock(Date.parse('2026-01-01T00:00:00Z'));
 * const runtime = await createRuntime({ store, machines, clock });
 * clock.advance(60_000);
 * await runtime.tick();
 */
export class VirtualClock implements Clock {
  #now: number;
  constructor(start = 1_767_225_600_000) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  /** Move forward by `ms` (never backward). */
  advance(ms: number): number {
    if (!(ms >= 0)) throw new RangeError('A virtual clock only moves forward.');
    this.#now += ms;
    return this.#now;
  }
  /** Move to an absolute time at or after the current one. */
  set(time: number): number {
    if (time < this.#now) throw new RangeError('A virtual clock only moves forward.');
    this.#now = time;
    return this.#now;
  }
}
