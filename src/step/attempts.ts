import { UNCOMPARED_HASH, type ClaimedEffect, type ErrorInfo, type JsonValue, type NewEffect, type NewInboxEvent } from '../ports/store.ts';
import { toJson } from '../base/json.ts';
import { sha256Hex } from '../base/sha256.ts';
import type { RetryPolicy } from '../base/retry.ts';

/**
 * The rules about an activity's attempts, once: how many it gets, when the next one is due, when
 * it is exhausted, and what its machine receives. The runtime (recording an outcome, recovering an
 * interrupted attempt) and the path-test model both call these. Pure.
 */

/** Retry defaults: 3 attempts, 1 s doubling to at most 5 min, ±10 % jitter. */
export const DEFAULT_RETRY = { maxAttempts: 3, initialMs: 1000, factor: 2, maxMs: 300_000, jitter: 0.1 } as const;

/** How many attempts an activity with this policy gets in all (the first included; at least 1). */
export function maxAttemptsOf(policy: RetryPolicy | undefined): number {
  return Math.max(1, policy?.maxAttempts ?? DEFAULT_RETRY.maxAttempts);
}

/**
 * Delay before the attempt after `attempt` (1-based) failed: exponential, capped, with a jitter
 * that is a pure function of (seed, attempt), so a replay computes the same schedule.
 */
export function backoffDelay(policy: RetryPolicy, attempt: number, seed: string): number {
  const initial = policy.backoff?.initialMs ?? DEFAULT_RETRY.initialMs;
  const factor = policy.backoff?.factor ?? DEFAULT_RETRY.factor;
  const max = policy.backoff?.maxMs ?? DEFAULT_RETRY.maxMs;
  const jitter = policy.backoff?.jitter ?? DEFAULT_RETRY.jitter;
  const base = Math.min(max, initial * factor ** Math.max(0, attempt - 1));
  const unit = parseInt(sha256Hex(`${seed}:${attempt}`).slice(0, 8), 16) / 0xffffffff;
  return Math.max(0, Math.round(base + (unit * 2 - 1) * jitter * base));
}

/** What follows a failed attempt: another one at `retryAt`, or the machine gets `error` (its event's payload error). */
export type AfterFailure = { retry: true; retryAt: number } | { retry: false; error: ErrorInfo; eventError: JsonValue };

/**
 * Decide what follows attempt `attempt` of `maxAttempts` failing with `error` (already redacted)
 * at `now`: a retry (not terminal, attempts left, the policy's `retryOn` agrees) after the backoff
 * (or the error's own `retryAfterMs`), else the final error, `SPOOL_RETRIES_EXHAUSTED` unless terminal.
 */
export function afterFailedAttempt(failed: {
  policy: RetryPolicy;
  effectId: string;
  attempt: number;
  maxAttempts: number;
  error: ErrorInfo;
  terminal: boolean;
  retryAfterMs: number | undefined;
  now: number;
}): AfterFailure {
  const { policy, attempt, error, terminal } = failed;
  if (!terminal && attempt < failed.maxAttempts && (policy.retryOn ? policy.retryOn(error) : true)) {
    return { retry: true, retryAt: failed.now + (failed.retryAfterMs ?? backoffDelay(policy, attempt, failed.effectId)) };
  }
  const final: ErrorInfo = terminal ? error : { ...error, code: error.code ?? 'SPOOL_RETRIES_EXHAUSTED' };
  return { retry: false, error: final, eventError: { ...final, attempts: attempt } as JsonValue };
}

/**
 * An attempt whose runner died: the error its machine receives instead of a re-run (an unsafe
 * activity: outcome unknown; no attempts left: exhausted), or undefined when it runs again.
 */
export function interruptedError(effect: { src: string; attempt: number; maxAttempts: number; unsafe: boolean }): ErrorInfo | undefined {
  if (effect.unsafe) {
    return {
      name: 'IndeterminateOutcomeError',
      message: `Attempt ${effect.attempt} of ${effect.src} was interrupted and it is unsafe to repeat; its outcome is unknown. Reconcile with the provider.`,
      code: 'SPOOL_INDETERMINATE',
    };
  }
  if (effect.attempt >= effect.maxAttempts) {
    return { name: 'RetriesExhausted', message: `Attempt ${effect.attempt} of ${effect.maxAttempts} of ${effect.src} was interrupted and no attempts are left.`, code: 'SPOOL_RETRIES_EXHAUSTED' };
  }
  return undefined;
}

/** The event an invocation's outcome is to its machine: `xstate.done.actor.<id>` or `xstate.error.actor.<id>`. */
export function outcomePayload(actorId: string, result: { output: JsonValue } | { error: JsonValue | ErrorInfo }): { type: string; [key: string]: JsonValue } {
  return 'output' in result
    ? { type: `xstate.done.actor.${actorId}`, output: result.output, actorId }
    : { type: `xstate.error.actor.${actorId}`, error: toJson(result.error), actorId };
}

/** The inbox event that carries an invocation's outcome (attempt `attempt`) back to its job. */
export function outcomeEvent(
  effect: { id: string; jobId: string; actorId: string },
  attempt: number,
  result: { output: JsonValue } | { error: JsonValue | ErrorInfo },
  at: number,
): NewInboxEvent {
  const payload = outcomePayload(effect.actorId, result);
  return {
    jobId: effect.jobId,
    eventId: `effect~${effect.id}~a${attempt}`,
    type: payload.type,
    payload,
    payloadHash: UNCOMPARED_HASH,
    at,
    source: 'effect',
    sourceId: effect.id,
    attempt,
  };
}

/**
 * The record of an effect's first attempt, claimed for `runner` until `claimUntil` by the commit
 * that created the effect (`EffectStart`), as the store holds it after that commit (lease `fence`).
 * Every field named (no spread of the new effect, which has others): one shape for every claimed attempt.
 */
export function firstAttemptClaimed(created: NewEffect, runner: string, claimUntil: number, fence: number): ClaimedEffect {
  return {
    id: created.id,
    jobId: created.jobId,
    actorId: created.actorId,
    src: created.src,
    kind: 'activity',
    input: created.input,
    status: 'running',
    active: true,
    attempt: 1,
    maxAttempts: created.maxAttempts,
    unsafe: created.unsafe,
    nextRunAt: null,
    claimedBy: runner,
    claimExpiresAt: claimUntil,
    token: null,
    output: null,
    error: null,
    createdRevision: created.createdRevision,
    createdAt: created.at,
    updatedAt: created.at,
    leaseFence: fence,
  };
}
