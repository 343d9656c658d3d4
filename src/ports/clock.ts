/**
 * The one source of time for the runtime and its stores. Every `now` that reaches SQL
 * is read here and passed in as a parameter; nothing deep inside calls `Date.now()`.
 *
 * @example
 * const clock = systemClock; // real time (the default)
 * const t = clock.now(); // epoch milliseconds
 */
export interface Clock {
  /** Current time in epoch milliseconds. */
  now(): number;
}

/** Real time. The default clock of every runtime and store. */
export const systemClock: Clock = { now: () => Date.now() };
