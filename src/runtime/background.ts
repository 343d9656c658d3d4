import { toErrorInfo } from '../base/errors.ts';
import { isRetryableFault } from './backoff.ts';
import type { Tell } from './events.ts';

/** Work the runtime started without a caller awaiting it (drains, pumps, heartbeats, attempts): its failures are logged, and `idle`/`close` wait for it. */
export class BackgroundWork {
  readonly #work = new Set<Promise<unknown>>();
  readonly #tell: Tell;

  constructor(tell: Tell) {
    this.#tell = tell;
  }

  /**
   * Keep `work` until it settles; what it throws is logged, never unhandled: a retryable storage
   * fault (a full disk, a server restarting) at warn, since what it left undone is done again (the
   * worker's next round, recovery), anything else at error.
   */
  track(work: Promise<unknown>): void {
    const p = work.catch((error) =>
      isRetryableFault(error)
        ? this.#tell.log('warn', 'background processing met a storage fault; it is tried again later', { error: toErrorInfo(error) })
        : this.#tell.log('error', 'background processing failed', { error: toErrorInfo(error) }),
    );
    this.#work.add(p);
    void p.finally(() => this.#work.delete(p));
  }

  /** How much is in flight. */
  get size(): number {
    return this.#work.size;
  }

  /** The work in flight now, to wait for. */
  pending(): Promise<unknown>[] {
    return [...this.#work];
  }
}
