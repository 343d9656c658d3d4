/**
 * The queue section's remote line (bench/queueSection.ts): the same backlog drained by a remote
 * worker (`runRemoteWorker`, spool/client) through a `spool serve` server on loopback, against
 * the local worker (`runWorker`) on the same store. Both in this process, enqueued first
 * (then-drain), c activities at once: the ratio is the price of the HTTP hop per attempt (a
 * claim, a completion, and the server's drain of the outcome).
 */
import { createRuntime } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { runRemoteWorker } from '../src/client/index.ts';
import { freshBenchDb } from './benchDb.ts';
import { allFinal, metered, producers, type QueueCase, type QueueResult } from './queueRun.ts';

const TOKEN = 'bench-token-0123456789abcdef';

/** Drain `c.backlog` jobs through a remote worker of `c.concurrency` slots (see the file's comment). */
export async function runRemoteQueue(c: QueueCase): Promise<QueueResult> {
  const db = await freshBenchDb(c.store, `queue-remote-${c.shape.name}-${c.synchronous.toLowerCase()}`);
  const id = c.shape.def.machine.id;
  try {
    const enqueuing = await db.openStore(c.synchronous);
    const enqueuer = await createRuntime({ store: enqueuing, machines: [c.shape.def], runEffects: false });
    await producers(c.backlog, (n) => enqueuer.start(id, { n }));
    await enqueuer.close();
    const runtime = await createRuntime({ store: await db.openStore(c.synchronous), machines: [c.shape.def], runEffects: false });
    const server = await createServer({ runtime, port: 0, token: TOKEN });
    try {
      return await metered(db, null, c.backlog, async () => {
        const finals = allFinal(runtime, c.backlog);
        const stop = new AbortController();
        const worker = runRemoteWorker({ url: server.url, token: TOKEN, concurrency: c.concurrency, signal: stop.signal, activities: { work: ({ input }) => (input as { n: number }).n + 1 } });
        await finals.done;
        finals.stop();
        stop.abort();
        await worker;
      });
    } finally {
      await server.close();
      await runtime.close();
    }
  } finally {
    await db.dispose();
  }
}
