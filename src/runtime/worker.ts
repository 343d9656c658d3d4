import type { Runtime } from './runtime.ts';

export interface WorkerOptions {
  /** How often to look for work other processes left (events, timers, activities), in ms. Default 250. */
  pollMs?: number;
  /** Stop the loop. */
  signal?: AbortSignal;
  /** Called after each round that did something. */
  onRound?: (round: { processed: number; timersFired: number; activitiesStarted: number }) => void;
}

/**
 * The worker loop: apply pending events, fire due timers, run due activities, then sleep until
 * the next deadline or the poll interval, until `signal` aborts. The runtime's clock decides
 * what is due; the sleep itself is real time (this is the process that waits so tests don't).
 *
 * @example
 * const controller = new AbortController();
 * process.on('SIGTERM', () => controller.abort());
 * await runWorker(runtime, { signal: controller.signal });
 * await runtime.close();
 */
export async function runWorker(runtime: Runtime, options: WorkerOptions = {}): Promise<void> {
  const pollMs = Math.max(10, options.pollMs ?? 250);
  const signal = options.signal;
  while (!signal?.aborted) {
    const processed = await runtime.processPending();
    const { timersFired, activitiesStarted } = await runtime.tick();
    if (processed + timersFired + activitiesStarted > 0) options.onRound?.({ processed, timersFired, activitiesStarted });
    const next = await runtime.nextWakeAt();
    // A round that applied events goes again at once: one round is bounded (limits.ts), so more may wait.
    const wait = processed > 0 ? 0 : next === null ? pollMs : Math.max(0, Math.min(pollMs, next - runtime.clock.now()));
    await sleep(wait, signal);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
