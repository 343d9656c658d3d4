import type { JobStore } from '../../src/ports/store.ts';

/** Everything a store holds, through the store port only (works for every store, and in a browser: no Node import here). */
export async function dumpStore(store: JobStore): Promise<unknown> {
  const jobs = await store.listJobs({});
  const out: Record<string, unknown> = {};
  for (const job of jobs) {
    out[job.id] = { job, history: await store.history(job.id), inbox: await store.listEvents(job.id) };
  }
  return out;
}
