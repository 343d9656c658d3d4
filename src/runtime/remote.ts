/**
 * The server side of remote activity workers (`spool worker --server`, docs/remote-workers.md):
 * attempts of due activities claimed for a worker that runs them elsewhere, with the store's
 * claim machinery (`claimDueEffects`: the job's lease and the attempt's claim, fenced), each
 * dispatched with an attempt token that names its claim. The claim's runner is a fresh id per
 * claim request, written by the claim's commit before any work is sent: a token is good while
 * that runner still holds that attempt. Heartbeats extend the claim and the job's lease; an
 * outcome is recorded as a local attempt's is (outcomes.ts), under that lease, then applied.
 * A token that is cut or edited, or whose attempt is no longer current, is refused and changes nothing.
 */
import { base64urlToText, randomBase64url, textToBase64url } from '../base/bytes.ts';
import { AttemptTokenError, StaleAttemptError, ValidationError } from '../base/errors.ts';
import { ForbiddenError } from '../base/httpErrors.ts';
import type { EffectRecord, JsonValue } from '../ports/store.ts';
import type { AssetInput } from './activities.ts';
import { checkPercent } from './intake.ts';
import { decideFinish, type AttemptEnd } from './outcomes.ts';
import type { RuntimeParts } from './parts.ts';
import type { WriteLease } from './reports.ts';

/** One attempt sent to a remote worker. */
export interface RemoteDispatch {
  /** Echo it with every call about this attempt (heartbeat, progress, asset, complete, fail, release). */
  token: string;
  jobId: string;
  machineId: string;
  machineVersion: string;
  /** The activity's name (`src`). */
  activity: string;
  /** The effect id: the idempotency key, stable across attempts. */
  idempotencyKey: string;
  attempt: number;
  maxAttempts: number;
  input: JsonValue;
  /** When the claim expires unless a heartbeat extends it (the server's clock, ms). */
  claimExpiresAt: number;
  /** How long a heartbeat extends the claim by. */
  claimMs: number;
}

/** What a worker asks for: up to `slots` attempts of these activities (null: any). */
export interface RemoteClaim {
  slots: number;
  activities: readonly string[] | null;
}

/** Which activities a token may run (null: any). */
export type ActivityScope = readonly string[] | null;

/** A remote failure as sent: what `classify` reads of a thrown error. */
export interface RemoteFailure {
  name?: string;
  message: string;
  code?: string;
  terminal?: boolean;
  retryAfterMs?: number;
}

/** What a completion or failure did: recorded now, or already (the same token sent again). */
export interface RemoteFinish {
  duplicate: boolean;
  /** `succeeded`, `failed` (to the machine), `retrying` (another attempt at `retryAt`). */
  outcome: 'succeeded' | 'failed' | 'retrying';
  retryAt: number | null;
}

/** The runtime's parts this needs, and its own writes (fenced progress and assets, applying a job's events). */
export interface RemoteDeps extends RuntimeParts {
  progress: (jobId: string, percent: number, lease: WriteLease) => Promise<unknown>;
  attach: (jobId: string, asset: AssetInput, from: { effectId: string; attempt: number }, lease: WriteLease) => Promise<{ attached: boolean }>;
  /** Apply a job's pending events (the outcome's), when this runtime applies events. */
  drain: (jobId: string) => Promise<unknown>;
  assertOpen: () => void;
}

/** The fields of a token: runner, job, effect, attempt, fence. */
interface TokenFields {
  r: string;
  j: string;
  e: string;
  a: number;
  f: number;
}

const TOKEN_PREFIX = 'sat1.';
const DEFAULT_CLAIM_MS = 30_000;

/** Remote attempts of one runtime (see the file's comment). */
export class RemoteAttempts {
  readonly #deps: RemoteDeps;
  #claimMs = DEFAULT_CLAIM_MS;

  constructor(deps: RemoteDeps) {
    this.#deps = deps;
  }

  /** How long a claim lasts without a heartbeat (`spool serve --claim-ms`); at least 1000 ms. */
  get claimMs(): number {
    return this.#claimMs;
  }

  set claimMs(ms: number) {
    if (!Number.isInteger(ms) || ms < 1000 || ms > 3_600_000) throw new ValidationError('The claim of a remote attempt must last from 1000 to 3600000 ms.');
    this.#claimMs = ms;
  }

  /** The activity names (srcs) of the registered machines. */
  activities(): string[] {
    return [...this.#deps.registry.srcs()];
  }

  /** Claim up to `slots` due attempts of `activities` (within `scope`) for a new runner id; each comes with its token. */
  async claim(request: RemoteClaim, scope: ActivityScope): Promise<RemoteDispatch[]> {
    this.#deps.assertOpen();
    const known = this.#deps.registry.srcs();
    const srcs = [...new Set((request.activities ?? known).filter((a) => scope === null || scope.includes(a)))];
    if (srcs.length === 0 || request.slots < 1) return [];
    const runner = `remote~${randomBase64url(12)}`;
    const now = this.#deps.clock.now();
    const claimUntil = now + this.#claimMs;
    const due = await this.#deps.store.claimDueEffects({ runner, now, claimUntil, limit: request.slots, machines: this.#deps.registry.keys(), srcs });
    return due.claimed.map((effect) => {
      this.#deps.events.emit({ type: 'activity.started', jobId: effect.jobId, effectId: effect.id, src: effect.src, attempt: effect.attempt });
      this.#deps.events.log('info', 'activity started remotely', { jobId: effect.jobId, effectId: effect.id, src: effect.src, attempt: effect.attempt, runner });
      return {
        token: encodeToken({ r: runner, j: effect.jobId, e: effect.id, a: effect.attempt, f: effect.leaseFence }),
        jobId: effect.jobId,
        machineId: effect.job.machineId,
        machineVersion: effect.job.machineVersion,
        activity: effect.src,
        idempotencyKey: effect.id,
        attempt: effect.attempt,
        maxAttempts: effect.maxAttempts,
        input: effect.input,
        claimExpiresAt: claimUntil,
        claimMs: this.#claimMs,
      };
    });
  }

  /**
   * Extend the attempt's claim and its job's lease by `claimMs`; refused once the attempt is not
   * current. `cancelRequested`: the job's cancel waits for this attempt to end (the worker aborts it).
   */
  async heartbeat(token: string, scope: ActivityScope): Promise<{ claimExpiresAt: number; cancelRequested: boolean }> {
    const { fields } = await this.#current(token, scope);
    const now = this.#deps.clock.now();
    const until = now + this.#claimMs;
    const store = this.#deps.store;
    const held = await store.renewLeases(fields.r, [fields.j], until, now);
    if (held.get(fields.j) !== fields.f || !(await store.renewClaim(fields.e, fields.a, fields.r, until, now))) throw stale(fields, 'its claim was taken over');
    const job = await store.getJob(fields.j);
    return { claimExpiresAt: until, cancelRequested: (job?.cancelRequestedAt ?? null) !== null };
  }

  /** Record how the attempt ended, as a local attempt's end is, then apply it; the same token again is answered as before. */
  async finish(token: string, end: { ok: true; output: unknown } | { ok: false; error: RemoteFailure }, scope: ActivityScope): Promise<RemoteFinish> {
    const { fields, effect, current } = await this.#read(token, scope);
    if (!current) {
      const before = await this.#endedBefore(fields, effect);
      if (before) return before;
      await this.#current(token, scope); // refused, saying why
    }
    const d = this.#deps;
    const job = await d.readKnown(fields.j);
    const def = job ? d.registry.get(job.machineId, job.machineVersion) : undefined;
    const now = d.clock.now();
    const attemptEnd: AttemptEnd = end.ok ? { ok: true, value: end.output } : { ok: false, error: end.error };
    const decided = decideFinish(effect, def, attemptEnd, now);
    const status = await d.commits.submitFinish({ id: effect.id, attempt: fields.a, result: decided.result, at: now, lease: { runner: fields.r, fence: fields.f } });
    if (status !== 'current') throw stale(fields, 'its claim was taken over while it ran');
    await d.store.releaseLeases(fields.r, [fields.j]);
    const error = decided.error;
    d.events.emit({ type: 'activity.finished', jobId: fields.j, effectId: fields.e, attempt: fields.a, outcome: decided.reported, ...(error ? { error } : {}) });
    d.events.log(decided.reported === 'succeeded' ? 'info' : 'warn', `activity ${decided.reported} remotely`, { jobId: fields.j, effectId: fields.e, attempt: fields.a, ...(error ? { error } : {}) });
    if (decided.reported === 'retrying') d.events.emit({ type: 'timers.scheduled', jobId: fields.j, dueAt: [decided.retryAt] });
    // The outcome's event, and any sent meanwhile (held back while this attempt's runner held the job).
    if (d.process) await d.drain(fields.j);
    return { duplicate: false, outcome: decided.reported, retryAt: decided.reported === 'retrying' ? decided.retryAt : null };
  }

  /** Give the attempt back (a worker stopping): run again at once, not counted against its attempts; false when it may not be (see `releaseAttempt`). */
  async release(token: string, scope: ActivityScope): Promise<{ released: boolean }> {
    const { fields } = await this.#current(token, scope);
    const store = this.#deps.store;
    const released = (await store.releaseAttempt?.(fields.e, fields.a, fields.r, this.#deps.clock.now())) ?? false;
    if (released) {
      await store.releaseLeases(fields.r, [fields.j]);
      if (this.#deps.process) await this.#deps.drain(fields.j); // events sent meanwhile
    }
    return { released };
  }

  /** Report progress under the attempt's lease. */
  async progress(token: string, percent: unknown, scope: ActivityScope): Promise<void> {
    checkPercent(percent);
    const { fields } = await this.#current(token, scope);
    await this.#deps.progress(fields.j, percent as number, { runner: fields.r, fence: fields.f });
  }

  /** Attach an asset under the attempt's lease. */
  async attachAsset(token: string, asset: AssetInput, scope: ActivityScope): Promise<{ attached: boolean }> {
    const { fields } = await this.#current(token, scope);
    return this.#deps.attach(fields.j, asset, { effectId: fields.e, attempt: fields.a }, { runner: fields.r, fence: fields.f });
  }

  /** The attempt a token names if it is current: its effect at that attempt, running under that runner's claim, active. Else refused, reading only. */
  async #current(token: string, scope: ActivityScope): Promise<{ fields: TokenFields; effect: EffectRecord }> {
    const { fields, effect, current } = await this.#read(token, scope);
    if (!current) throw stale(fields, effect.active ? 'its claim expired and the activity was taken over, or it ended' : 'the state that invoked it was left, or the job ended');
    return { fields, effect };
  }

  /** The attempt a token names and whether it is current; the token malformed, an unknown attempt or one outside `scope` refused. */
  async #read(token: string, scope: ActivityScope): Promise<{ fields: TokenFields; effect: EffectRecord; current: boolean }> {
    this.#deps.assertOpen();
    const fields = decodeToken(token);
    const effect = await this.#deps.store.getEffect(fields.e);
    if (!effect || effect.jobId !== fields.j) throw stale(fields, 'no such attempt');
    if (scope !== null && !scope.includes(effect.src)) throw new ForbiddenError(`This worker token may not run the activity "${effect.src}" (it runs ${scope.join(', ') || 'none'}). Nothing was changed.`, { activity: effect.src });
    return { fields, effect, current: effect.attempt === fields.a && effect.claimedBy === fields.r && effect.status === 'running' && effect.active };
  }

  /** A completion or failure sent again: how this runner's attempt ended, if it did (recorded by the first). */
  async #endedBefore(fields: TokenFields, effect: EffectRecord): Promise<RemoteFinish | undefined> {
    const ended = (await this.#deps.store.listAttempts(fields.j)).find((a) => a.effectId === fields.e && a.attempt === fields.a && a.runner === fields.r);
    if (!ended || (ended.outcome !== 'succeeded' && ended.outcome !== 'failed')) return undefined;
    // A failure went to the machine when the effect failed at this attempt; else another attempt followed.
    const gaveUp = effect.status === 'failed' && effect.attempt === fields.a;
    const outcome = ended.outcome === 'succeeded' ? 'succeeded' : gaveUp ? 'failed' : 'retrying';
    return { duplicate: true, outcome, retryAt: outcome === 'retrying' ? effect.nextRunAt : null };
  }
}

function stale(fields: TokenFields, why: string): StaleAttemptError {
  return new StaleAttemptError(`Attempt ${fields.a} of activity ${fields.e} (job ${fields.j}) is no longer this worker's: ${why}. Nothing was changed; drop its result.`, { jobId: fields.j, effectId: fields.e, attempt: fields.a });
}

function encodeToken(fields: TokenFields): string {
  return TOKEN_PREFIX + textToBase64url(JSON.stringify(fields));
}

/** The fields of a token this server made, or AttemptTokenError (400) for anything else. */
export function decodeToken(token: unknown): TokenFields {
  const bad = () => new AttemptTokenError('The attempt token is malformed: send back the token of the dispatch unchanged. Nothing was changed.');
  if (typeof token !== 'string' || !token.startsWith(TOKEN_PREFIX) || token.length > 2048) throw bad();
  let fields: unknown;
  try {
    fields = JSON.parse(base64urlToText(token.slice(TOKEN_PREFIX.length)));
  } catch {
    throw bad();
  }
  const f = fields as Partial<TokenFields> | null;
  const text = (v: unknown) => typeof v === 'string' && v.length > 0;
  if (f === null || typeof f !== 'object' || !text(f.r) || !text(f.j) || !text(f.e) || !Number.isSafeInteger(f.a) || !Number.isSafeInteger(f.f)) throw bad();
  if (!f.r!.startsWith('remote~')) throw bad();
  return f as TokenFields;
}
