import type { EffectRecord, JsonValue } from '../ports/store.ts';
import { nodeBuiltin, nodeProcess } from '../base/node.ts';
import { toJson } from '../base/json.ts';
import { tokenFor } from './tokens.ts';

/**
 * What a `fromPromise` activity receives when Spool runs it (XState's own `{ input, signal }`
 * plus Spool's fields; XState's `self` and `system` are not given). Write the activity with
 * {@link activity} (spool's `activity`, in place of `fromPromise`) to have these typed, or read
 * them from the argument of a plain `fromPromise`.
 *
 * @example
 * actors: {
 *   charge: activity<Receipt, Order>(async ({ input, signal, idempotencyKey, attempt }) =>
 *     provider.charge(input, { idempotencyKey, signal })),
 * }
 */
export interface ActivityArgs<TInput = unknown, TOutput = unknown> {
  input: TInput;
  /** Stable across retries and restarts of the same invocation: pass it to the provider. */
  idempotencyKey: string;
  /** 1 for the first attempt. */
  attempt: number;
  /** Aborts when the invoking state is left, the job is cancelled, or the runtime shuts down. */
  signal: AbortSignal;
  jobId: string;
  /**
   * Finish later, out of band: returns a value to `return` from the activity. Once the waiting
   * state is durable the token is handed to `onToken` (store it with the webhook, show it to the
   * human); it is also in `details(jobId).effects[].token` and `spool show`. `complete(token,
   * output)` or `fail(token, error)` settles the activity once.
   *
   * @example
   * approve: activity<{ approved: boolean }>(async ({ defer }) => defer((token) => mailer.send(`/approve?token=${token}`)))
   */
  defer: (onToken?: (token: string) => void | Promise<void>) => DeferredCompletion<TOutput>;
  /**
   * Report progress 0-100 on the job (ignored, with a note, once the job is final). It never lowers
   * the job's progress (an attempt run again reports from its start); the machine sets it lower
   * through `context.progress`.
   */
  progress: (percent: number) => Promise<void>;
  /** Link an output to the job; the same key from a retried attempt is attached once. */
  attachAsset: (asset: AssetInput) => Promise<void>;
  /** XState's `emit`: Spool ignores emitted events of activities. */
  emit: (emitted: { type: string }) => void;
}

/** A token an attempt asked for with `defer`, and what to hand it to once the waiting state is durable. */
export interface PendingToken {
  token: string;
  onToken: ((token: string) => void | Promise<void>) | undefined;
}

/**
 * What an attempt's activity is given: {@link ActivityArgs} (its writes through `writes`, which
 * fence them), with XState's `self`, `system` and `emit` left empty; and the token it asked for
 * with `defer`, if it did (`pending()`).
 */
export function attemptArgs(
  effect: Pick<EffectRecord, 'id' | 'jobId' | 'input' | 'attempt'>,
  controller: AttemptAbort,
  writes: Pick<ActivityArgs, 'progress' | 'attachAsset'>,
): { args: ActivityArgs & { self: undefined; system: undefined }; pending: () => PendingToken | undefined } {
  let pending: PendingToken | undefined;
  const args: ActivityArgs & { self: undefined; system: undefined } = {
    // The input is JSON (stored as text): a JSON round trip copies it in half structuredClone's time.
    input: toJson(effect.input),
    idempotencyKey: effect.id,
    attempt: effect.attempt,
    // Made when the activity reads it (AttemptAbort): most attempts never do.
    get signal() {
      return controller.signal;
    },
    jobId: effect.jobId,
    defer: (onToken) => {
      const token = tokenFor();
      pending = { token, onToken };
      return deferred(token);
    },
    progress: writes.progress,
    attachAsset: writes.attachAsset,
    self: undefined,
    system: undefined,
    emit: () => undefined,
  };
  return { args, pending: () => pending };
}

/** An output to link to a job. `key` defaults to `uri`. */
export interface AssetInput {
  type: string;
  uri: string;
  size?: number;
  key?: string;
  meta?: JsonValue;
}

const DEFERRED = Symbol.for('spool.deferred');
declare const OUTPUT: unique symbol;

/**
 * The marker an activity returns to finish out of band; `TOutput` is the output `complete`
 * will settle it with (a compile-time mark only).
 */
export interface DeferredCompletion<TOutput = unknown> {
  readonly [DEFERRED]: true;
  readonly token: string;
  readonly [OUTPUT]?: TOutput;
}

export function deferred(token: string): DeferredCompletion {
  return { [DEFERRED]: true, token };
}

export function isDeferred(value: unknown): value is DeferredCompletion {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[DEFERRED] === true;
}

/** Runtimes of this process that are alive, by runner id. */
const liveRunners = new Set<string>();

/**
 * This process as runner ids name it. On Node: its host name and pid, which other processes on the
 * host can probe. Elsewhere (a browser Worker, a Durable Object): `web` and a random id of this
 * instance, which no one probes (a runner there that is gone is left to claim expiry).
 */
const local: { host: string; instance: string; probe: boolean } = (() => {
  const host = nodeBuiltin('node:os')?.hostname();
  return nodeProcess && host !== undefined
    ? { host, instance: String(nodeProcess.pid), probe: true }
    : { host: 'web', instance: crypto.randomUUID().slice(0, 8), probe: false };
})();

/** The host names this process's runtimes gave their runner ids (the `runnerHost` option, or {@link local}'s). */
const localHosts = new Set<string>([local.host]);

/** A new runner id for one runtime: host (`runnerHost`, else this process's), pid (or instance id), and a random part. */
export function newRunnerId(host = local.host): string {
  localHosts.add(host);
  const id = `${host}/${local.instance}/${crypto.randomUUID().slice(0, 8)}`;
  liveRunners.add(id);
  return id;
}

export function retireRunner(id: string): void {
  liveRunners.delete(id);
}

/**
 * True when the runner that claimed an effect is known to be gone: a closed runtime of this
 * process, or a process on this host that no longer exists. Unknown hosts are left to claim expiry.
 */
export function runnerIsGone(id: string): boolean {
  if (liveRunners.has(id)) return false;
  const [host, instance] = id.split('/');
  if (!localHosts.has(host!)) return false;
  if (instance === local.instance) return true;
  const pid = Number(instance);
  if (!local.probe || host !== local.host || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    nodeProcess!.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as { code?: unknown }).code === 'ESRCH';
  }
}

/**
 * The abort of one running attempt. Its `AbortSignal` is made only when the activity reads
 * `signal` (an AbortController and its EventTarget cost more than a short attempt's own work);
 * an abort before that is kept, and the signal is made aborted with its reason. `onAbort`: one
 * listener of the runtime's own (the executor's, to stop waiting on shutdown), told after the signal.
 */
export class AttemptAbort {
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown = undefined;
  #listener: ((reason: unknown) => void) | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  onAbort(listener: (reason: unknown) => void): void {
    this.#listener = listener;
  }

  /** Abort once: later calls change nothing (as AbortController's). */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
    this.#listener?.(reason);
  }
}
