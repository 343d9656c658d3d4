/** What the send path does for speed must not change what is read: the job read by raw row. */
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
afterEach(() => res.dispose());

describe('send path defaults', () => {
  it('reads a job by raw row exactly as a listed (named) row reads', async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    const job = await runtime.start('job-lifecycle', { name: 'rows', items: 3 }, { idempotencyKey: 'k-1' });
    await runtime.send(job.id, { type: 'START' });
    await runtime.send(job.id, { type: 'ITEM_DONE' });
    await runtime.cancel(job.id, 'asked');
    const [listed] = await store.listJobs({ machineId: 'job-lifecycle' });
    expect(await store.getJob(job.id)).toEqual(listed);
  });
});
