import type {
  CommitResult,
  CreateJobResult,
  AttemptFinish,
  ClaimedEffect,
  DueClaimed,
  EffectClaim,
  EffectStart,
  FinishStatus,
  JobRecord,
  NewEffect,
  NewInboxEvent,
  NewJob,
  NewTimer,
  TransitionCommit,
  UnresolvedOperation,
} from '../../src/ports/store.ts';
import { CommitOutcomeUnknown, inlineDraft, isExternal, leaseLostError, revisionNamedBy } from '../../src/ports/store.ts';
import { toEffectRecord, toJobRecord, type Row } from './records.ts';
import { CommitJson } from './commitJson.ts';
import { leaseParams, type StatementName } from './statements.ts';
import { Abort, LeaseHeld } from './outcomes.ts';
import { get, getThen, run, write, type Expected, type Program } from './program.ts';

/**
 * The store's writes as programs (program.ts): each yields the statements it runs, so the SQLite
 * store (synchronously, in its transaction) and the Postgres store (awaiting each statement on its
 * transaction's connection) run the same rules. Every function here runs inside the caller's
 * transaction (a savepoint, for one write of a batch).
 */

/** Writes one transition commit (in the caller's savepoint), its JSON texts serialised once (per commit: see CommitJson). */
export function* applyCommit(c: TransitionCommit): Program<CommitResult> {
  const json = new CommitJson();
  json.begin();
  try {
    return yield* writeCommit(c, json);
  } finally {
    json.end();
  }
}

function* writeCommit(c: TransitionCommit, json: CommitJson): Program<CommitResult> {
  // The attempt whose outcome this is, recorded first; its event is accepted below, applied.
  const leaving = c.effects?.deactivate.length === 1 ? { actorId: c.effects.deactivate[0]!, at: c.job.at } : undefined;
  const revision = c.expectedRevision + 1;
  const e = c.event;
  const inline = e?.accept !== undefined && isExternal(e.accept);
  // An activity's outcome applied with its attempt's end (recorded just above, once): its history
  // row is its record, as an inline event's is, and it too goes in only while nothing waits before it
  // (a second record of its id is refused by insertInbox).
  const outcome = !inline && c.finish !== undefined && e?.accept?.source === 'effect' ? e.accept : undefined;
  const namedAt = inline ? revisionNamedBy(e.accept.eventId) : -1;
  const params = {
    id: c.jobId,
    expected: c.expectedRevision,
    status: c.job.status,
    state_value: json.of(c.job.value),
    state_paths: pathsText(c.job.statePaths),
    context: c.job.contextJson ?? json.of(c.job.context),
    snapshot: c.job.snapshot,
    machine_version: c.job.machineVersion,
    at: c.job.at,
    set_progress: c.job.progress === undefined ? 0 : 1,
    // A commit that settles an event is refused (a conflict) while the job is suspended.
    settles: c.event ? 1 : 0,
    progress: c.job.progress ?? null,
    ...leaseParams(c.lease, c.job.at),
    inline_event: inline ? e.accept.eventId : null,
    // An outcome, too, goes in only while no event waits before it (INLINE_OK).
    first_in_line: outcome ? 1 : 0,
    at_named: namedAt === revision ? 1 : 0,
    unread: c.unread ? 1 : 0,
    unread_born: c.unread?.createdAt ?? 0,
  };
  // A job that stays active on its version takes the narrow update (no status index rewritten);
  // one that ends changes its status, so it goes straight to the full one. A migration alone
  // changes the version (its own statement: any other keeps the version's index entries as they
  // are). Each is tried in turn until one changes the row; the first goes with the attempt's end
  // (settleIn), when there is one.
  const updates: StatementName[] =
    c.transition.outcome === 'migrated'
      ? ['migrateJob']
      : c.job.status !== 'active'
        ? ['updateJob']
        : keepsLease(c)
          ? ['updateKeepingLease', 'updateState', 'updateJob']
          : ['updateState', 'updateJob'];
  const finished = c.finish ? yield* settleIn(c.finish, false, leaving, { name: updates[0]!, params, expect: expectation(c, updates[0]!, leaving) }) : undefined;
  if (finished && finished.status !== 'current') throw new Abort({ ok: false, reason: 'outcome-not-current' });
  let updated = finished?.then as Updated | undefined;
  for (const name of updates.slice(finished ? 1 : 0)) updated ??= (yield* get(name, params)) as Updated | undefined;
  if (!updated) return yield* refusal(c, inline, params.now);
  const fence = c.lease ? updated.lease_fence : null;
  // Applied as it is accepted: the history row is the event's record, and its key says so (a
  // repeat of the id is a duplicate). An id that names this revision is keyed by the history's
  // primary key: no key row.
  if (inline && namedAt !== revision && !(yield* recordKey(c.jobId, e.accept.eventId, revision))) throw new Abort({ ok: false, reason: 'duplicate-event' });
  const accepted = inline || outcome ? (e as Parameters<typeof inlineDraft>[1]) : undefined;
  yield* insertTransition(json, c.jobId, revision, accepted ? inlineDraft(c.transition, accepted) : c.transition, c.lease?.runner ?? null, fence, accepted?.accept);
  if (e && !inline && !outcome) yield* settleEventOf(c, json, revision);
  yield* writeConsequences(c, Number(updated.timers_scheduled ?? 1) === 1, finished?.deactivated ? leaving?.actorId : undefined);
  return c.unread ? { ok: true, revision, fence, progress: updated.progress === null ? null : Number(updated.progress) } : { ok: true, revision, fence };
}

/**
 * What the first statement of a commit that applies an attempt's outcome is expected to answer
 * (program.ts, `Expected`), when that is known in advance: the attempt's invocation is known (so
 * whether this commit's own row write deactivates it), the job's lease is held here at a known
 * fence and not forced, and the update is one that keeps that fence. Then the attempt's end is
 * recorded and the job updated under that fence, with the progress the commit sets or the one the
 * process knew (read only by a commit made from that record, `unread`). `timers_scheduled` (an
 * ending commit's) is expected as 1, "unknown", and not compared: the timers' cancellation is then
 * written, and changes nothing when there were none.
 */
function expectation(c: TransitionCommit, first: StatementName, leaving: { actorId: string } | undefined): Expected | undefined {
  const { finish, lease } = c;
  if (finish?.actorId === undefined || !lease || lease.force || typeof lease.fence !== 'number') return undefined;
  if (first !== 'updateKeepingLease' && first !== 'updateJob') return undefined;
  const updated: Row = { lease_fence: lease.fence };
  if (c.unread) {
    const progress = c.job.progress !== undefined ? c.job.progress : c.unread.progress;
    if (progress === undefined) return undefined;
    updated['progress'] = progress;
  }
  if (first === 'updateJob') updated['timers_scheduled'] = 1;
  return { rows: [{ active: finish.actorId === leaving?.actorId ? 0 : 1 }, updated], unchecked: first === 'updateJob' ? ['timers_scheduled'] : [] };
}

/** What a commit's job update returns. */
type Updated = { lease_fence: number; progress: number | null; timers_scheduled?: number };

/** Why a commit's job update changed no row: the lease another runner holds, a duplicate inline event, or a conflict (always thrown). */
function* refusal(c: TransitionCommit, inline: boolean, now: number): Program<never> {
  const e = c.event;
  const row = (yield* get('revisionOf', { id: c.jobId, now })) as
    | { revision: number; lease_owner: string | null; lease_fence: number; lease_until: number | null; lease_live: number | boolean }
    | undefined;
  // Another live lease refused it (this runner's own, at the fence it holds, did not).
  const mine = c.lease !== undefined && row?.lease_owner === c.lease.runner && (c.lease.fence === undefined || Number(row.lease_fence) === c.lease.fence);
  if (c.lease && !mine && row?.revision === c.expectedRevision && row.lease_owner !== null && row.lease_until !== null && Number(row.lease_live) === 1) {
    throw new Abort({ ok: false, reason: 'leased', owner: row.lease_owner, until: row.lease_until });
  }
  // The revision held, so the inline event's own checks refused it: its id is recorded already
  // (a duplicate), or events wait before it or before an outcome (they come first: a conflict,
  // to apply those; nothing is written).
  if (inline && row?.revision === c.expectedRevision && (yield* findEvent(c.jobId, e!.accept!.eventId))) {
    throw new Abort({ ok: false, reason: 'duplicate-event' });
  }
  throw new Abort({ ok: false, reason: 'conflict', currentRevision: row?.revision ?? null });
}

/** The event a commit applies, when it is neither inline nor an outcome: accepted and applied at once, or its queued inbox row settled. */
function* settleEventOf(c: TransitionCommit, json: CommitJson, revision: number): Program<void> {
  const e = c.event!;
  const error = e.error ? JSON.stringify(e.error) : null;
  if (e.accept) {
    // Accept-and-apply only when nothing is queued for the job (events apply in accept order):
    // the INSERT itself checks, and a refusal is read back as a duplicate or that conflict.
    const params = Object.assign(inboxParams(e.accept, json.of(e.payload)), { status: e.status, error, revision, processed_at: c.job.at });
    if (params.source_kind === 'external' && !(yield* recordKey(c.jobId, e.accept.eventId, null))) throw new Abort({ ok: false, reason: 'duplicate-event' });
    if ((yield* run('insertAppliedEvent', params)).changes !== 1) {
      if (yield* get('getEvent', c.jobId, e.accept.eventId)) throw new Abort({ ok: false, reason: 'duplicate-event' });
      throw new Abort({ ok: false, reason: 'conflict', currentRevision: c.expectedRevision });
    }
  } else {
    const info = yield* run('settleEvent', { seq: e.seq, job_id: c.jobId, status: e.status, error, revision, at: c.job.at, payload: json.of(e.payload) });
    if (info.changes !== 1) throw new Abort({ ok: false, reason: 'event-settled' });
  }
}

/**
 * What a committed transition changes beyond the job and its history: effects and timers stopped,
 * delivered and created, child jobs, deliveries, the parent settled. `timersScheduled`: the job had
 * timers still to fire when its row was updated (updateJob says; true when unknown). `left`: the
 * invocation whose effect the outcome's own row write deactivated already (an actor has one live
 * effect at most).
 */
function* writeConsequences(c: TransitionCommit, timersScheduled: boolean, left?: string): Program<void> {
  if (c.stopAll) {
    yield* write('deactivateAll', c.job.at, c.jobId);
    yield* write('cancelAllTimers', c.jobId);
  }
  for (const actorId of c.effects?.deactivate ?? []) if (actorId !== left) yield* write('deactivateEffects', c.job.at, c.jobId, actorId);
  // Deliver the consumed timer before this transition's cancellations: an `after` transition that
  // leaves its state also cancels its own key, which must not turn the delivered timer into a cancelled one.
  if (c.consumedTimer !== undefined) yield* write('deliverTimer', c.consumedTimer);
  if (c.timers?.cancel.length) yield* write('cancelTimers', c.jobId, JSON.stringify(c.timers.cancel));
  if (c.claims?.length && (!c.lease || c.lease.until === null)) throw new Error('A commit claims new effects only under a lease it keeps.');
  yield* writeRequests(c.effects?.create, c.timers?.schedule, [], claimsBy(c.claims, c.lease?.runner, c.job.at));
  // A job that ends cancels its delayed events still to come, as XState does when a machine stops
  // (after delivering the one this commit consumed; a fired one's pending event is rejected later).
  // Done already when the commit stopped everything and scheduled nothing since; nothing to do
  // when the job had no timer to fire and this commit scheduled none.
  const toCancel = Boolean(c.timers?.schedule.length) || (timersScheduled && !c.stopAll);
  if (c.job.status !== 'active' && toCancel) yield* write('cancelScheduledTimers', c.jobId);
  for (const child of c.children ?? []) yield* insertJob(child);
  for (const d of c.deliveries ?? []) yield* acceptPending(d);
  if (c.settleParent && (yield* settleChild(c.settleParent, c.job.at))) yield* acceptPending(c.settleParent.event);
}

/** Whether the commit may keep the job's lease as it is (held here at a known fence, renewed to an expiry it likely has already). */
function keepsLease(c: TransitionCommit): boolean {
  return c.lease !== undefined && c.lease.until !== null && c.lease.fence !== null && c.lease.fence !== undefined && !c.lease.force;
}

/** A child job's end recorded on its parent's invocation (succeeded, or failed with `error`): false when it was no longer waiting. */
function* settleChild(settle: NonNullable<TransitionCommit['settleParent']>, at: number): Program<boolean> {
  const settled = settle.error
    ? yield* run('failChild', JSON.stringify(settle.error), at, settle.effectId)
    : yield* run('settleChild', JSON.stringify(settle.output), at, settle.effectId);
  return settled.changes === 1;
}

/** `createJob` inside a transaction: the existing job with this id or key, or the new one. */
export function* createIn(job: NewJob): Program<CreateJobResult> {
  // The INSERT finds a job with this id or key itself (it writes nothing then): only then is one read.
  const leaseUntil = yield* insertJob(job, true);
  if (leaseUntil === undefined) {
    const existing = (yield* get('getJob', job.id)) ?? (job.idempotencyKey === null ? undefined : yield* get('byKey', job.owner ?? '', job.idempotencyKey));
    if (!existing) throw new Error(`Job ${job.id} was neither inserted nor found by its id or key.`);
    return { job: toJobRecord(existing), created: false };
  }
  for (const child of job.children ?? []) yield* insertJob(child);
  for (const d of job.relatedDeliveries ?? []) yield* acceptPending(d);
  return { job: newJobRecord(job, leaseUntil), created: true };
}

/**
 * The row `insertJob` just wrote, as a record: built from what was written, not read back (a row
 * read and three JSON parses per start); `leaseUntil`, the expiry its claims' lease was written with.
 */
function newJobRecord(job: NewJob, leaseUntil: number | null): JobRecord {
  return {
    id: job.id,
    machineId: job.machineId,
    machineVersion: job.machineVersion,
    revision: 1,
    status: job.status,
    value: job.value,
    context: job.context,
    snapshot: job.snapshot,
    input: job.input,
    inputHash: job.inputHash,
    idempotencyKey: job.idempotencyKey,
    owner: job.owner === '' ? null : job.owner,
    quarantine: null,
    progress: job.progress ?? null,
    parent: job.parent ?? null,
    cancelRequestedAt: null,
    cancelReason: null,
    suspendedAt: null,
    suspendReason: null,
    lease: leaseUntil === null || !job.runner ? null : { owner: job.runner, fence: 1, until: leaseUntil },
    createdAt: job.at,
    updatedAt: job.at,
  };
}

/**
 * A new job at revision 1 with its first history record and what its initial state asked for.
 * Returns the expiry of the lease its claims took (in the store's lease clock), or null; with
 * `ifNew`, undefined (nothing written) when a job has its id or idempotency key already.
 */
export function* insertJob(job: NewJob, ifNew = false): Program<number | null | undefined> {
  const claims = job.claims?.length ? job.claims : undefined;
  if (claims && !job.runner) throw new Error('A new job claims its effects only for the runner that creates it.');
  // Its history row's payload is its input, and its `to` its state value: each written once (see CommitJson).
  const json = new CommitJson();
  json.begin();
  // Claiming its first activities, the job is leased to its runner at fence 1 in its own INSERT.
  const inserted = yield* get(ifNew ? 'insertNewJob' : 'insertJob', {
    id: job.id,
    machine_id: job.machineId,
    machine_version: job.machineVersion,
    status: job.status,
    state_value: json.of(job.value),
    state_paths: pathsText(job.statePaths),
    context: job.contextJson ?? JSON.stringify(job.context),
    snapshot: job.snapshot,
    input: json.of(job.input),
    input_hash: job.inputHash,
    idempotency_key: job.idempotencyKey,
    owner: job.owner ?? '',
    progress: job.progress ?? null,
    parent_job_id: job.parent?.jobId ?? null,
    parent_effect_id: job.parent?.effectId ?? null,
    at: job.at,
    lease_owner: claims ? job.runner : null,
    lease_fence: claims ? 1 : 0,
    until: claims ? Math.max(...claims.map((c) => c.claimUntil)) : null,
    now: job.at,
  });
  if (!inserted && ifNew) return undefined;
  yield* insertTransition(json, job.id, 1, job.transition, job.runner ?? null, 0);
  yield* writeRequests(job.effects, job.timers, job.deliveries, claimsBy(job.claims, job.runner ?? undefined, job.at));
  return claims ? ((inserted?.['lease_until'] as number | null | undefined) ?? null) : null;
}

/** A commit's claims of the effects it writes (EffectStart), by effect id: written running for `runner`. */
interface ClaimsBy {
  runner: string;
  at: number;
  until: Map<string, number>;
}

function claimsBy(claims: readonly EffectStart[] | undefined, runner: string | undefined, at: number): ClaimsBy | undefined {
  if (!claims?.length || runner === undefined) return undefined;
  return { runner, at, until: new Map(claims.map((c) => [c.effectId, c.claimUntil])) };
}

/**
 * Effects, timers and self-sends a transition asked for: written in the transition's own
 * transaction. A claimed activity (`claims`) is written running, its first attempt started.
 */
function* writeRequests(effects: NewEffect[] = [], timers: NewTimer[] = [], deliveries: NewInboxEvent[] = [], claims?: ClaimsBy): Program<void> {
  let claimed = 0;
  for (const e of effects) {
    const child = e.kind === 'child';
    const until = child ? undefined : claims?.until.get(e.id);
    if (until === undefined) {
      yield* write('insertEffect', e.id, e.jobId, e.actorId, e.src, child ? 'child' : 'activity', e.inputJson ?? JSON.stringify(e.input), child ? 'waiting' : 'pending', child ? 1 : 0, e.maxAttempts, e.unsafe ? 1 : 0, e.createdRevision, e.at, e.at);
      continue;
    }
    yield* write('insertClaimedEffect', {
      id: e.id, job_id: e.jobId, actor: e.actorId, src: e.src, input: e.inputJson ?? JSON.stringify(e.input), max_attempts: e.maxAttempts, unsafe: e.unsafe ? 1 : 0,
      runner: claims!.runner, until, now: claims!.at, revision: e.createdRevision, at: e.at,
    });
    claimed += 1;
  }
  if (claims && claimed !== claims.until.size) throw new Error('A commit claims an effect it does not create as an activity.');
  for (const t of timers) {
    yield* write('insertTimer', t.id, t.jobId, t.key, t.kind, JSON.stringify(t.event), t.dueAt, t.createdRevision, t.createdAt);
  }
  for (const d of deliveries) yield* acceptPending(d);
}

/** Append a history row; `accepted` (an event applied as it is accepted, or an outcome with its attempt's end) makes it the event's record too. */
function* insertTransition(
  json: CommitJson | undefined,
  jobId: string,
  revision: number,
  t: TransitionCommit['transition'],
  runner: string | null,
  fence: number | null,
  accepted?: NewInboxEvent,
): Program<void> {
  const args = [
    jobId,
    revision,
    t.eventId,
    t.eventType,
    textOf(json, t.payload),
    t.from === null ? null : textOf(json, t.from),
    textOf(json, t.to),
    t.outcome,
    t.error ? JSON.stringify(t.error) : null,
    t.at,
    runner,
    fence,
  ] as const;
  if (accepted === undefined) yield* write('insertTransition', ...args);
  else if (isExternal(accepted)) yield* write('insertInlineTransition', ...args, accepted.payloadHash, null, null, null);
  else yield* write('insertInlineTransition', ...args, accepted.payloadHash, accepted.source ?? null, accepted.sourceId ?? null, accepted.attempt ?? null);
}

/** A value's JSON text, made once per commit when the commit's texts are kept (`json`). */
function textOf(json: CommitJson | undefined, value: unknown): string {
  return json ? json.of(value) : JSON.stringify(value);
}

/** An inbox row's columns from the event; `payload` its text when another value is stored (a redacted copy). */
export function inboxParams(e: NewInboxEvent, payload = JSON.stringify(e.payload)) {
  return {
    job_id: e.jobId,
    event_id: e.eventId,
    type: e.type,
    payload,
    payload_hash: e.payloadHash,
    accepted_at: e.at,
    source_kind: e.source ?? 'external',
    source_id: e.sourceId ?? null,
    attempt: e.attempt ?? null,
  };
}

/**
 * `claimEffect` inside a transaction: nothing is written (undefined) while the effect is not
 * claimable or another live runner holds its job.
 */
export function* claimIn(c: EffectClaim): Program<ClaimedEffect | undefined> {
  const { id, runner, now, claimUntil } = c;
  const takeOver = c.takeOver ?? null;
  const before = yield* get('effectClaimState', id);
  if (!before) return undefined;
  const lease = leaseParams({ runner, fence: c.fence, now, until: claimUntil, takeOver }, now);
  const claim = { id, takeOver, ...lease };
  // The effect row holds its latest attempt: before the claim rewrites it for the next one, that
  // attempt gets its effect_attempts row (a running one taken over: interrupted). Both check the
  // job's lease (CLAIM_WHERE), so a lease held elsewhere writes nothing.
  if (Number(before['attempt']) > 0) yield* write('archiveClaimed', claim);
  const row = yield* get('claimEffect', claim);
  if (!row) return undefined;
  const leased = (yield* get('claimJobLease', { id: before['job_id'], ...lease })) as { lease_fence: number } | undefined;
  if (!leased) throw new LeaseHeld(); // not reached (checked above in the same transaction): rolls the claim back
  const claimed = toEffectRecord(row) as ClaimedEffect; // this call's own record: completed, not copied
  claimed.leaseFence = leased.lease_fence;
  return claimed;
}

/**
 * A batch claim's claim of a row its pick read in this transaction (`picked`: its job and attempt;
 * SQLite, one writer): `claimPicked` writes it without CLAIM_WHERE's checks, which the pick made,
 * then the job's lease is taken (`claimJobLeaseRecord`, still under LEASE_OK), with the job's
 * record as the claim leaves it.
 */
export function* claimDueRowIn(c: EffectClaim, picked: Row): Program<DueClaimed | undefined> {
  const { id, runner, now, claimUntil } = c;
  const attempt = picked['attempt'];
  if (Number(attempt) > 0) yield* write('archivePicked', { id, attempt, now });
  const row = yield* get('claimPicked', { id, attempt, runner, now, until: claimUntil });
  if (!row) return undefined;
  const leased = yield* get('claimJobLeaseRecord', { id: picked['job_id'], ...leaseParams({ runner, fence: null, now, until: claimUntil }, now) });
  if (!leased) throw new LeaseHeld(); // not reached (the pick read the lease free or expired in this transaction): rolls the claim back
  const claimed = toEffectRecord(row) as DueClaimed; // this call's own record: completed, not copied
  claimed.leaseFence = leased['lease_fence'] as number;
  claimed.job = toJobRecord(leased);
  return claimed;
}

/** `finishAttempt` inside a transaction. */
export function* finishIn(f: AttemptFinish): Program<FinishStatus> {
  return (yield* settleIn(f, true)).status;
}

/**
 * An attempt's end: the outcome on its effect row and the attempt's row written (once), and,
 * `acceptEvent`, its event accepted. `acceptEvent` false: the caller accepts the outcome event
 * itself (a commit's `finish`), and `leaving` names the invocation that commit leaves (its effect
 * is deactivated in the same row write when it is this one: `deactivated`). `then`: the caller's
 * next statement (its job update), run only when the outcome is recorded (getThen: one round trip
 * on Postgres); its row is `then` of the result.
 */
function* settleIn(
  f: AttemptFinish,
  acceptEvent: boolean,
  leaving?: { actorId: string; at: number },
  then?: { name: StatementName; params: object; expect?: Expected | undefined },
): Program<{ status: FinishStatus; deactivated: boolean; then?: Row | undefined }> {
  const { id, attempt, result, at, lease } = f;
  const params =
    result.kind === 'succeeded'
      ? { status: 'succeeded', output: JSON.stringify(result.output), error: null, next: null, token: null }
      : result.kind === 'waiting'
        ? { status: 'waiting', output: null, error: null, next: null, token: result.token }
        : {
            status: result.retryAt === null ? 'failed' : 'backoff',
            output: null,
            error: JSON.stringify(result.error),
            next: result.retryAt,
            token: null,
          };
  // The update checks the lease itself; only a refusal reads why (the lease gone, or the attempt no longer current).
  const settle = {
    status: params.status,
    output: params.output,
    error: params.error,
    next: params.next,
    token: params.token,
    runner: lease?.runner ?? null,
    fence: lease?.fence ?? null,
    deactivate_actor: leaving?.actorId ?? null,
    deactivated_at: leaving?.at ?? null,
    id,
    attempt,
    at,
    outcome: result.kind,
  };
  const [settled, next] = then ? yield* getThen('settleEffect', [settle], then.name, [then.params], then.expect) : [yield* get('settleEffect', settle), undefined];
  if (!settled && lease) {
    const effect = (yield* get('effectLeaseState', { id, runner: lease.runner, fence: lease.fence })) as { held: number } | undefined;
    if (effect && effect.held === 0) {
      // Another runner took the job: this outcome is not recorded, and the attempt's claim ends
      // now so the lease holder takes the attempt over at once.
      yield* staleEnd(id, attempt, at, JSON.stringify(leaseLostError(lease.fence)));
      yield* run('dropClaim', { now: at, id, attempt });
      return { status: 'lease-lost', deactivated: false };
    }
  }
  // Recorded: the outcome, and the attempt's end with it, on the effect row (settleEffect).
  if (!settled) yield* staleEnd(id, attempt, at, result.kind === 'failed' ? JSON.stringify(result.error) : null);
  const event = result.kind === 'waiting' ? null : result.event;
  if (event && acceptEvent) yield* acceptPending(event);
  return { status: settled ? 'current' : 'stale', deactivated: Number(settled?.['active'] ?? 1) === 0, then: next };
}

/** An outcome not recorded (stale): the end of its attempt, whether still the effect's latest one (on its row) or archived since. */
function* staleEnd(id: string, attempt: number, at: number, error: string | null): Program<void> {
  const end = { outcome: 'stale', at, error, id, attempt };
  if ((yield* run('endAttempt', end)).changes === 0) yield* run('endOldAttempt', end);
}

/** Accepts an event as pending; false when the job already has it (same event id). */
export function* acceptPending(e: NewInboxEvent): Program<boolean> {
  return (yield* insertInbox(pendingParams(e))).changes === 1;
}

/** A pending inbox row's columns (`Object.assign`, not a spread: docs/performance.md, "Object spread on Node 20"). */
export function pendingParams(e: NewInboxEvent) {
  return Object.assign(inboxParams(e), { status: 'pending', error: null, revision: null, processed_at: null });
}

/**
 * Record that (job, event id) is taken, once: false when it already is. A key row (event_keys'
 * primary key refuses a second); for an id that names a revision (`r<revision>.<uuid>`), also the
 * history row there, which holds such an id applied at that revision without a key row.
 */
function* recordKey(jobId: string, eventId: string, revision: number | null): Program<boolean> {
  const named = revisionNamedBy(eventId);
  if (named > 0 && (yield* get('locatedEvent', jobId, named, eventId))) return false;
  return (yield* run('insertKey', jobId, eventId, revision)).changes === 1;
}

/**
 * Insert an inbox row. An event a caller could name (source `external`) takes its key first, so
 * that one id is never both queued and in history; the runtime's own events (reserved ids) are
 * kept unique by the inbox's UNIQUE (job_id, event_id), and an outcome by its history row too when
 * the commit that ended its attempt applied it. `changes` 0: the id was recorded already.
 */
export function* insertInbox(params: ReturnType<typeof inboxParams> & Record<string, unknown>): Program<{ changes: number }> {
  if (params.source_kind === 'external' && !(yield* recordKey(params.job_id, params.event_id, null))) return { changes: 0 };
  // An outcome its attempt's commit applied is recorded by its history row alone (schema 13).
  if (params.source_kind === 'effect' && (yield* get('outcomeInHistory', params.job_id, params.event_id))) return { changes: 0 };
  return yield* run('insertEvent', params);
}

function pathsText(paths: string[]): string {
  return `|${paths.join('|')}|`;
}

/** A COMMIT that failed with an I/O error: the batch's operations, unresolved. */
export function commitOutcomeUnknown(where: string, error: unknown, ops: UnresolvedOperation[]): CommitOutcomeUnknown {
  return new CommitOutcomeUnknown(
    `The commit to ${where} failed at COMMIT (${(error as Error).message}), so whether it landed is unknown: read back each operation before writing it again.`,
    ops,
    { driverCode: (error as { code?: unknown }).code ?? null },
  );
}

/** The history row recording an event applied as it was accepted, by the event's id. */
function* inlineEvent(jobId: string, eventId: string): Program<Row | undefined> {
  const keyed = yield* get('keyedEvent', { job: jobId, event: eventId });
  if (keyed) return keyed;
  const at = revisionNamedBy(eventId);
  return at > 0 ? yield* get('locatedEvent', jobId, at, eventId) : undefined;
}

/** An accepted event by id, wherever it is recorded: its inbox row, or its history row. */
export function* findEvent(jobId: string, eventId: string): Program<Row | undefined> {
  return (yield* get('getEvent', jobId, eventId)) ?? (yield* inlineEvent(jobId, eventId)) ?? (yield* get('outcomeInHistory', jobId, eventId));
}
