/** The last millisecond an id was made in, and its ids' first 15 characters (many ids share one). */
let last = { now: Number.NaN, prefix: '' };

/**
 * A UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then random bits. Ids made close in
 * time sort close together, so a new job's or event's index entry lands at the right edge of its
 * B-tree instead of on a random page: each commit dirties (and syncs) fewer pages.
 *
 * Built from `crypto.randomUUID()` (web-standard; Node pools its entropy): its first 48 bits are replaced by
 * the time and its version nibble becomes 7; the variant bits stay. About 0.3 µs, where a v7
 * generator that asks the OS for 16 random bytes per id takes several microseconds.
 */
export function uuidv7(now: number = Date.now()): string {
  if (now !== last.now) {
    const time = now.toString(16).padStart(12, '0').slice(-12);
    last = { now, prefix: `${time.slice(0, 8)}-${time.slice(8)}-7` };
  }
  return last.prefix + crypto.randomUUID().slice(15);
}
