/**
 * The store's writes of more than one statement besides a commit (commit.ts), as programs
 * (program.ts): the SQLite and Postgres stores run these same functions, each inside one of their
 * write transactions.
 */
import type { AcceptResult, AssetRecord, ErrorInfo, JsonValue, NewInboxEvent, NoteRecord } from '../../src/ports/store.ts';
import { MAX_RELEASES, RELEASED_ATTEMPT } from '../../src/ports/store.ts';
import { acceptPending, findEvent, insertInbox, pendingParams } from './commit.ts';
import { all, get, run, type Program } from './program.ts';
import { toInboxRecord } from './records.ts';

/** `acceptEvent`: a repeat of a recorded id is refused by its key (event_keys; the inbox's own for the runtime's events). */
export function* acceptEventIn(event: NewInboxEvent): Program<AcceptResult> {
  const info = yield* insertInbox(pendingParams(event));
  const row = (yield* findEvent(event.jobId, event.eventId))!;
  return { event: toInboxRecord(row), duplicate: info.changes === 0 };
}

/** `releaseAttempt`. */
export function* releaseAttemptIn(id: string, attempt: number, runner: string, at: number): Program<boolean> {
  return (yield* run('releaseEffect', { id, attempt, runner, at, limit: MAX_RELEASES, error: JSON.stringify(RELEASED_ATTEMPT) })).changes === 1;
}

/** `expireLeases`: every lease of a dead owner, or every lease expired by a time. */
export function* expireLeasesIn(filter: { owner: string } | { expiredBy: number }): Program<{ jobId: string; owner: string; fence: number }[]> {
  let rows;
  if ('owner' in filter) rows = yield* all('expireOwnerLeases', filter.owner, filter.owner);
  else {
    rows = yield* all('expireLeases', { now: filter.expiredBy });
    for (const r of rows) yield* run('freeLease', r['id'], r['owner'], r['lease_fence']);
  }
  return rows.map((r) => ({ jobId: r['id'] as string, owner: r['owner'] as string, fence: r['lease_fence'] as number }));
}

/** `failEffect`. */
export function* failEffectIn(id: string, attempt: number, error: ErrorInfo, event: NewInboxEvent, at: number): Program<boolean> {
  if ((yield* run('failEffect', { error: JSON.stringify(error), at, id, attempt })).changes !== 1) return false;
  yield* acceptPending(event);
  return true;
}

/** `completeByToken`. */
export function* completeByTokenIn(
  token: string,
  result: { kind: 'succeeded'; output: JsonValue } | { kind: 'failed'; error: ErrorInfo },
  event: NewInboxEvent,
  at: number,
): Program<boolean> {
  const row = yield* get('completeByToken', {
    token,
    at,
    status: result.kind,
    output: result.kind === 'succeeded' ? JSON.stringify(result.output) : null,
    error: result.kind === 'failed' ? JSON.stringify(result.error) : null,
  });
  if (!row) return false;
  yield* acceptPending(event);
  return true;
}

/** `fireTimer`: a due timer into its job's inbox, once. */
export function* fireTimerIn(id: string, event: NewInboxEvent): Program<boolean> {
  if ((yield* run('fireTimer', id)).changes !== 1) return false;
  yield* acceptPending(event);
  return true;
}

/** `requestCancel`: recorded once, its event accepted with it. */
export function* requestCancelIn(jobId: string, reason: string, event: NewInboxEvent, at: number): Program<{ first: boolean }> {
  const first = (yield* run('requestCancel', at, reason, jobId)).changes === 1;
  if (first) yield* acceptPending(event);
  return { first };
}

/** `attachAsset`: once per (job, key); with a lease, only while that runner holds the job with that fence. */
export function* attachAssetIn(a: AssetRecord, lease?: { runner: string; fence: number }): Program<boolean> {
  if (lease && !(yield* get('holdsLease', a.jobId, lease.runner, lease.fence))) return false;
  return (yield* run('attachAsset', a.jobId, a.key, a.type, a.uri, a.size, a.meta === null ? null : JSON.stringify(a.meta), a.effectId, a.attempt, a.createdAt)).changes === 1;
}

/** An operation and its note in one transaction: the note is written only when the operation changed something. */
export function* notedIn(note: NoteRecord, change: Program<{ changes: number }>): Program<boolean> {
  if ((yield* change).changes !== 1) return false;
  yield* run('addNote', note.jobId, note.kind, note.message, note.at);
  return true;
}

/** `activeMachineVersions`: a loose index scan, one probe of jobs_active_versions per pair, then a count bounded by `countUpTo`. */
export function* activeVersionsIn(owner: string | null, countUpTo: number): Program<{ machineId: string; machineVersion: string; jobs: number }[]> {
  const pairs: { machineId: string; machineVersion: string; jobs: number }[] = [];
  for (let row = yield* get('firstActiveVersion', owner ?? ''); row; ) {
    const pair = { owner: owner ?? '', m: row['machine_id'] as string, v: row['machine_version'] as string };
    const counted = yield* get('countActiveVersion', { ...pair, limit: countUpTo });
    pairs.push({ machineId: pair.m, machineVersion: pair.v, jobs: counted!['n'] as number });
    row = (yield* get('nextActiveVersion', pair)) ?? (yield* get('nextActiveMachine', { owner: pair.owner, m: pair.m }));
  }
  return pairs;
}
