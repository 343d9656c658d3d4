/**
 * Completion tokens: an activity that finished out of band (`defer`) is completed or failed by
 * its single-use token, as long as the invocation it belongs to is still current.
 */
import type { Clock } from '../ports/clock.ts';
import type { EffectRecord, ErrorInfo, JobStore, JsonValue, NewInboxEvent } from '../ports/store.ts';
import { TokenError } from '../base/errors.ts';
import type { Tell } from './events.ts';

/** A new completion token: 48 random hex characters. */
export function tokenFor(): string {
  return crypto.randomUUID().replace(/-/g, '') + crypto.randomUUID().replace(/-/g, '').slice(0, 16);
}

/** What a caller passes to `fail` (any JSON), as the error the machine receives. */
export function failureInfo(payload: JsonValue): ErrorInfo {
  return payload !== null && typeof payload === 'object' && !Array.isArray(payload)
    ? {
        name: typeof payload['name'] === 'string' ? payload['name'] : 'Error',
        message: typeof payload['message'] === 'string' ? payload['message'] : JSON.stringify(payload),
        ...(typeof payload['code'] === 'string' ? { code: payload['code'] } : {}),
      }
    : { name: 'Error', message: String(payload) };
}

/** A token's outcome: the activity's output, or its error. */
export type TokenResult = { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo };

/** What settling a token needs of the runtime. */
export interface TokenHost {
  store: JobStore;
  clock: Clock;
  owner: string | null;
  tell: Tell;
  /** The inbox event that carries an activity's outcome back to its machine. */
  outcomeEvent: (effect: EffectRecord, attempt: number, result: { output: JsonValue } | { error: ErrorInfo }, at: number) => NewInboxEvent;
}

/** Record a token's outcome and its event in the job's inbox; returns the job's id (its event is the caller's to apply). */
export async function settleToken(host: TokenHost, token: string, result: TokenResult): Promise<string> {
  if (typeof token !== 'string' || !/^[A-Za-z0-9_-]{16,128}$/.test(token)) throw new TokenError('This is not a completion token.');
  const effect = await host.store.effectByToken(token);
  const record = effect ? await host.store.getJob(effect.jobId) : undefined;
  if (!effect || !record || record.owner !== host.owner) throw new TokenError('Unknown completion token, or it was already used.');
  if (!effect.active || effect.status !== 'waiting') {
    throw new TokenError(`The invocation behind this token is no longer current (${effect.status}); its outcome would be stale.`);
  }
  const now = host.clock.now();
  const event = host.outcomeEvent(effect, effect.attempt, result.kind === 'succeeded' ? { output: result.output } : { error: result.error }, now);
  const ok = await host.store.completeByToken(token, result, event, now);
  if (!ok) throw new TokenError('Unknown completion token, or it was already used.');
  host.tell.emit({ type: 'activity.finished', jobId: effect.jobId, effectId: effect.id, attempt: effect.attempt, outcome: result.kind });
  return effect.jobId;
}
