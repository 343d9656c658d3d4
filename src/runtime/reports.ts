/**
 * What a job's work reports besides its transitions: progress (0-100) and assets (outputs linked
 * to the job). From an activity, each write is fenced by its runner's lease: ignored once
 * another runner holds the job.
 */
import type { Clock } from '../ports/clock.ts';
import type { JobStore, JsonValue } from '../ports/store.ts';
import type { AssetInput } from './activities.ts';
import { TERMINAL } from './jobView.ts';

/** The runner and fence an activity's write is made under. */
export type WriteLease = { runner: string; fence: number };

/** Set progress; with `lease`, only while that runner holds the job. An ignored update leaves a note saying why. */
export async function recordProgress(store: JobStore, clock: Clock, jobId: string, percent: number, lease?: WriteLease): Promise<void> {
  const now = clock.now();
  if (await store.setProgress(jobId, percent, now, lease)) return;
  const job = await store.getJob(jobId);
  const why = job && !TERMINAL.has(job.status) ? "the reporting attempt's runner no longer holds the job (its lease was taken)" : 'the job is final';
  await store.addNote({ jobId, kind: 'progress-ignored', message: `progress update to ${percent} ignored: ${why}`, at: now });
}

/** Attach a checked asset (its `meta` already JSON); the same key (default: the uri) is attached once. */
export function recordAsset(
  store: JobStore,
  clock: Clock,
  jobId: string,
  asset: AssetInput,
  meta: JsonValue,
  from?: { effectId: string; attempt: number },
  lease?: WriteLease,
): Promise<boolean> {
  return store.attachAsset(
    {
      jobId,
      key: asset.key ?? asset.uri,
      type: asset.type,
      uri: asset.uri,
      size: asset.size ?? null,
      meta,
      effectId: from?.effectId ?? null,
      attempt: from?.attempt ?? null,
      createdAt: clock.now(),
    },
    lease,
  );
}
