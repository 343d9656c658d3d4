/**
 * Redelivery: a poison event (a guard that throws, until the code is fixed) applied again on the
 * job's current state as a new history record, the first outcome kept; refused for an event that
 * did not fail, when the job moved on (unless forced), and for sensitive payloads; idempotent;
 * durable between the call and the commit.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { ChildScript } from './helpers/proc.ts';
import { RedeliveryRefusedError, ValidationError, redeliveryOf } from '../src/internal.ts';
import { Resources } from './helpers/resources.ts';
import { openRuntime } from './helpers/durable.ts';
import { deliveryHooks, till as definition } from './fixtures/deliveryMachines.ts';

const CHILD = fileURLToPath(new URL('./fixtures/redeliverChild.ts', import.meta.url));
const res = new Resources();
const procs: ChildScript[] = [];
/** The "bug": while true, the PAY guard throws. */
const code = deliveryHooks;
afterEach(async () => {
  code.broken = true;
  await Promise.all(procs.splice(0).map((p) => p.kill()));
  await res.dispose();
});

describe('redeliver', () => {
  it('applies a fixed poison event again as a new record, keeping the first outcome, once', async () => {
    const { runtime } = await openRuntime(res, [definition]);
    const job = await runtime.start('till', {}, { jobId: 'till-1' });
    const failed = await runtime.send(job.id, { type: 'PAY', amount: 5 }, { eventId: 'pay-1' });
    expect(failed.status).toBe('failed');
    await expect(runtime.redeliver(job.id, 'pay-1')).resolves.toMatchObject({ status: 'failed', eventId: 'redeliver~pay-1' });
    // The first redelivery failed too (the code is still broken): redelivering it again returns that outcome.
    code.broken = false;
    const again = await runtime.redeliver(job.id, 'pay-1');
    expect(again).toMatchObject({ status: 'failed', duplicate: true });
    // ...and the failed redelivery is itself redelivered by its own id.
    const fixed = await runtime.redeliver(job.id, 'redeliver~pay-1');
    expect(fixed).toMatchObject({ status: 'applied', eventId: 'redeliver~redeliver~pay-1', duplicate: false });
    expect(fixed.job).toMatchObject({ value: 'paid', final: true, context: { paid: 1 } });
    const history = await runtime.history(job.id);
    expect(history.map((h) => [h.eventId, h.outcome])).toEqual([
      [null, 'started'],
      ['pay-1', 'failed'],
      ['redeliver~pay-1', 'failed'],
      ['redeliver~redeliver~pay-1', 'applied'],
    ]);
    expect(redeliveryOf(history[3]!.eventId)).toBe('redeliver~pay-1');
    const events = await runtime.events(job.id);
    expect(events.find((e) => e.eventId === 'pay-1')).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('payment provider client misconfigured') } });
    expect(events.find((e) => e.eventId === 'redeliver~redeliver~pay-1')).toMatchObject({ status: 'applied', sourceId: 'redeliver~pay-1', payload: { type: 'PAY', amount: 5 } });
  });

  it('refuses an event that did not fail, an unknown one, and a job that moved on unless forced', async () => {
    const { runtime } = await openRuntime(res, [definition]);
    const job = await runtime.start('till', {}, { jobId: 'till-2' });
    await runtime.send(job.id, { type: 'BUMP' }, { eventId: 'bump-1' });
    const notFailed = await runtime.redeliver(job.id, 'bump-1').catch((e: unknown) => e);
    expect(notFailed).toBeInstanceOf(RedeliveryRefusedError);
    expect(notFailed).toMatchObject({ code: 'SPOOL_REDELIVERY_REFUSED', details: { reason: 'not-failed', status: 'applied' } });
    await expect(runtime.redeliver(job.id, 'nope')).rejects.toMatchObject({ details: { reason: 'unknown-event' } });
    await expect(runtime.redeliver(job.id, 'bump-1', { forse: true } as never)).rejects.toThrow(ValidationError);

    await runtime.send(job.id, { type: 'PAY', amount: 1 }, { eventId: 'pay-2' });
    await runtime.send(job.id, { type: 'BUMP' }, { eventId: 'bump-2' });
    code.broken = false;
    const before = await runtime.get(job.id);
    const movedOn = await runtime.redeliver(job.id, 'pay-2').catch((e: unknown) => e);
    expect(movedOn).toMatchObject({ details: { reason: 'moved-on', failedAt: 3, revision: 4 } });
    expect((movedOn as Error).message).toContain('--force');
    expect((await runtime.get(job.id)).revision).toBe(before.revision); // nothing changed
    const forced = await runtime.redeliver(job.id, 'pay-2', { force: true });
    expect(forced).toMatchObject({ status: 'applied', job: { value: 'paid', context: { paid: 1, bumps: 2 } } });
    // Idempotent after the job moved on: the first redelivery's outcome, not a refusal.
    await expect(runtime.redeliver(job.id, 'pay-2')).resolves.toMatchObject({ status: 'applied', duplicate: true, revision: forced.revision });
  });

  it('refuses an event whose sensitive fields were not stored', async () => {
    const { runtime } = await openRuntime(res, [definition]);
    const job = await runtime.start('till', {}, { jobId: 'till-3' });
    await runtime.send(job.id, { type: 'SECRET', pin: '1234' }, { eventId: 's-1' });
    code.broken = false;
    await expect(runtime.redeliver(job.id, 's-1')).rejects.toMatchObject({ details: { reason: 'sensitive' } });
  });

  it('refuses a caller event id in the redelivery namespace', async () => {
    const { runtime } = await openRuntime(res, [definition]);
    const job = await runtime.start('till', {}, { jobId: 'till-4' });
    await expect(runtime.send(job.id, { type: 'BUMP' }, { eventId: 'redeliver~x' })).rejects.toThrow(/reserved/);
  });

  it('survives a SIGKILL between the durable accept and the commit', async () => {
    const path = res.dbPath();
    const first = await openRuntime(res, [definition], { path });
    await first.runtime.start('till', {}, { jobId: 'till-6' });
    await first.runtime.send('till-6', { type: 'PAY', amount: 2 }, { eventId: 'pay-6' });
    await first.runtime.close();
    const proc = new ChildScript(CHILD, [path, 'till-6', 'pay-6'], { SPOOL_CRASH_AT: 'after-accept' });
    procs.push(proc);
    await proc.waitFor((l) => l.type === 'ready');
    expect(await proc.exited).toMatchObject({ signal: 'SIGKILL' });
    expect(proc.lines.some((l) => l.type === 'redelivered')).toBe(false);
    code.broken = false;
    const next = await openRuntime(res, [definition], { path });
    expect(await next.runtime.get('till-6')).toMatchObject({ value: 'paid', context: { paid: 1 } });
    expect((await next.runtime.history('till-6')).map((h) => [h.eventId, h.outcome])).toEqual([[null, 'started'], ['pay-6', 'failed'], ['redeliver~pay-6', 'applied']]);
    // Asked again after the restart: the outcome of the redelivery the killed process accepted.
    await expect(next.runtime.redeliver('till-6', 'pay-6')).resolves.toMatchObject({ status: 'applied', duplicate: true });
  });

  it('survives a restart between the call and the commit', async () => {
    const path = res.dbPath();
    const first = await openRuntime(res, [definition], { path });
    await first.runtime.start('till', {}, { jobId: 'till-5' });
    await first.runtime.send('till-5', { type: 'PAY', amount: 2 }, { eventId: 'pay-5' });
    await first.runtime.close();
    code.broken = false;
    // A client-only runtime accepts the redelivery durably and applies nothing.
    const client = await openRuntime(res, [definition], { path, processEvents: false });
    await expect(client.runtime.redeliver('till-5', 'pay-5')).resolves.toMatchObject({ status: 'pending' });
    await client.runtime.close();
    const worker = await openRuntime(res, [definition], { path });
    expect(await worker.runtime.get('till-5')).toMatchObject({ value: 'paid', context: { paid: 1 } });
    expect((await worker.runtime.events('till-5')).find((e) => e.eventId === 'redeliver~pay-5')?.status).toBe('applied');
  });
});
