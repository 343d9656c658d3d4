/**
 * What an attempt's end records, whoever ran it (this runtime's executor, or a remote worker
 * through `spool serve`): the output checked as JSON, a failure classified against the
 * activity's retry policy (another attempt at `retryAt`, or the error to the machine), the
 * outcome event with the effect's idempotency key. One rule for local and remote attempts.
 */
import type { AttemptResult, EffectRecord, ErrorInfo } from '../ports/store.ts';
import type { RegisteredMachine } from '../base/definition.ts';
import { redactText } from '../base/redaction.ts';
import { classify } from '../base/retry.ts';
import { afterFailedAttempt, outcomeEvent } from '../step/attempts.ts';
import { storedJson } from './intake.ts';

/** How an attempt ended: its value, or what it threw. */
export type AttemptEnd = { ok: true; value: unknown } | { ok: false; error: unknown };

/** The finish to record: `retrying` records the failure with no event (another attempt is due at `retryAt`). */
export interface DecidedFinish {
  result: AttemptResult & { kind: 'succeeded' | 'failed' };
  reported: 'succeeded' | 'failed' | 'retrying';
  error: ErrorInfo | undefined;
  retryAt: number;
}

/** The finish of `effect`'s current attempt ending with `end` at `now` (see the file's comment). */
export function decideFinish(effect: EffectRecord, def: RegisteredMachine | undefined, end: AttemptEnd, now: number): DecidedFinish {
  const attempt = effect.attempt;
  let outcome = end;
  let output: ReturnType<typeof storedJson> | undefined;
  if (outcome.ok) {
    try {
      output = storedJson('output', outcome.value === undefined ? null : outcome.value);
    } catch (error) {
      outcome = { ok: false, error: Object.assign(new Error(`activity output is not JSON: ${(error as Error).message}`), { terminal: true }) };
    }
  }
  if (outcome.ok) {
    const event = outcomeEvent(effect, attempt, { output: output ?? null }, now);
    return { result: { kind: 'succeeded', output: output ?? null, event }, reported: 'succeeded', error: undefined, retryAt: 0 };
  }
  const { info, terminal, retryAfterMs } = classify(outcome.error);
  const policy = def?.activities[effect.src] ?? {};
  const error = { ...info, message: redactText(info.message, effect.input, def?.sensitive ?? new Set()) };
  const next = afterFailedAttempt({ policy, effectId: effect.id, attempt, maxAttempts: effect.maxAttempts, error, terminal, retryAfterMs, now });
  if (next.retry) return { result: { kind: 'failed', error, retryAt: next.retryAt, event: null }, reported: 'retrying', error, retryAt: next.retryAt };
  const event = outcomeEvent(effect, attempt, { error: next.eventError }, now);
  return { result: { kind: 'failed', error: next.error, retryAt: null, event }, reported: 'failed', error, retryAt: 0 };
}
