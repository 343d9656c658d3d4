/** What the runtime tells its observers (`subscribe`) and its structured log. */
import type { Clock } from '../ports/clock.ts';
import type { LogEntry, RuntimeEvent } from './api.ts';
import { toErrorInfo } from '../base/errors.ts';

/** The runtime's listeners and log sink: every part tells them through one of these. */
export class RuntimeEvents {
  /** Who listens now; a part may skip building an event nobody hears. */
  readonly listeners = new Set<(event: RuntimeEvent) => void>();
  readonly #clock: Clock;
  readonly #sink: ((entry: LogEntry) => void) | undefined;

  constructor(clock: Clock, sink: ((entry: LogEntry) => void) | undefined) {
    this.#clock = clock;
    this.#sink = sink;
  }

  /** Listen to runtime events; returns the unsubscribe function. */
  subscribe(listener: (event: RuntimeEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tell every listener; one that throws is logged and the others still hear it. */
  emit(event: RuntimeEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.log('error', 'listener threw', { error: toErrorInfo(error) });
      }
    }
  }

  /** One structured log line, stamped with the clock's time. */
  log(level: LogEntry['level'], msg: string, fields: Record<string, unknown>): void {
    this.#sink?.({ at: this.#clock.now(), level, msg, ...fields });
  }
}

/** The part of {@link RuntimeEvents} the other parts use. */
export type Tell = Pick<RuntimeEvents, 'emit' | 'log'>;
