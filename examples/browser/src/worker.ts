/**
 * The example's Worker: a Spool runtime over SQLite in the browser (sqlite-wasm on the origin's
 * private file system, so jobs outlive a reload), driven by this host: `hostDriven: true` starts no
 * interval, and the Worker calls `tick()` itself when the next timer is due (`nextWakeAt()`).
 * It draws each machine's diagram with the dashboard's modules (views/layout.ts, views/svg.ts)
 * and streams the watched job's marks to the page.
 */
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';
import * as machinesModule from 'spool-example:machines';
import { createRuntime, type Job, type Runtime } from '../../../src/index.ts';
import { collectDefinitions, type RegisteredMachine } from '../../../src/internal.ts';
import { layoutMachine, type DiagramLayout } from '../../../src/views/layout.ts';
import { describeMachine, type MachineView } from '../../../src/views/machineView.ts';
import { markLists, renderSvg, svgMarks } from '../../../src/views/svg.ts';
import { installPool, openSqliteWasmStore } from '../../../persistence/drivers/sqlite-wasm/index.ts';
import type { Call, EventObject, MachineInfo, Message } from './protocol.ts';

/** The database: a file of the SAH-pool VFS named here, in the origin's private file system. */
const POOL = 'spool-example';
const DATABASE = '/spool-example.db';
/** The longest the Worker sleeps between ticks (a timer due later is checked again then). */
const MAX_SLEEP_MS = 30_000;

const post = (message: Message) => self.postMessage(message);
const report = (error: unknown) => console.error('examples/browser worker:', error);

const definitions = collectDefinitions(machinesModule);
const examples = machinesModule as { exampleInputs?: Record<string, unknown>; exampleEvents?: Record<string, EventObject[]> };

let runtime: Runtime;
let watched: string | null = null;
const diagrams = new Map<string, { view: MachineView; layout: Promise<DiagramLayout> }>();

/** A machine version's view and layout, laid out once (a layout depends on nothing else). */
function diagramOf(machine: RegisteredMachine) {
  const key = `${machine.id}@${machine.version}`;
  let entry = diagrams.get(key);
  if (!entry) {
    const view = describeMachine(machine);
    entry = { view, layout: layoutMachine(view) };
    diagrams.set(key, entry);
  }
  return entry;
}

function machineOf(job: Job): RegisteredMachine {
  const machine = runtime.registry.get(job.machineId, job.machineVersion);
  if (!machine) throw new Error(`No machine ${job.machineId}@${job.machineVersion} in this build.`);
  return machine;
}

async function postJobs(): Promise<void> {
  post({ type: 'jobs', jobs: await runtime.list({ limit: 100 }) });
}

async function postWatched(job: Job): Promise<void> {
  const { view } = diagramOf(machineOf(job));
  const marks = svgMarks(view, { job: { value: job.value, history: await runtime.history(job.id) } });
  if (watched === job.id) post({ type: 'job', job, marks: markLists(marks) });
}

async function watch(jobId: string | null): Promise<void> {
  watched = jobId;
  if (jobId === null) return;
  const job = await runtime.get(jobId);
  const svg = renderSvg(await diagramOf(machineOf(job)).layout);
  if (watched !== jobId) return;
  post({ type: 'diagram', jobId, svg });
  await postWatched(job);
}

// Host-driven ticks: one at a time (calls while one waits to start share it), then sleep until
// the next wake-up, or MAX_SLEEP_MS.
let sleeping: ReturnType<typeof setTimeout> | undefined;
let ticking: Promise<void> = Promise.resolve();
let queued = false;

function wake(): void {
  if (queued) return;
  queued = true;
  ticking = ticking.then(async () => {
    queued = false;
    clearTimeout(sleeping);
    await runtime.tick();
    const at = await runtime.nextWakeAt();
    const delay = at === null ? MAX_SLEEP_MS : Math.min(MAX_SLEEP_MS, Math.max(0, at - Date.now()));
    sleeping = setTimeout(wake, delay);
  }).catch((error: unknown) => {
    report(error);
    sleeping = setTimeout(wake, 1000);
  });
}

async function answer(call: Call): Promise<string | null> {
  switch (call.type) {
    case 'start':
      return (await runtime.start(call.machineId, call.input)).id;
    case 'send':
      await runtime.send(call.jobId, call.event);
      return call.jobId;
    case 'watch':
      await watch(call.jobId);
      return call.jobId;
  }
}

self.onmessage = async (message: MessageEvent<Call>) => {
  const call = message.data;
  try {
    await opened;
    post({ type: 'reply', id: call.id, ok: true, jobId: await answer(call) });
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    post({ type: 'reply', id: call.id, ok: false, error: { code: typeof e.code === 'string' ? e.code : 'ERROR', message: String(e.message ?? error) } });
  }
};

/** The pool, waiting out a reload's old Worker (installPool); held past that, by another tab. */
async function openPool(sqlite3: Awaited<ReturnType<typeof sqlite3InitModule>>) {
  try {
    return await installPool(sqlite3, POOL);
  } catch (error) {
    throw new Error(`The database is held by another tab of this page (or OPFS is unavailable): ${(error as Error).message}`);
  }
}

const opened = (async () => {
  const sqlite3 = await sqlite3InitModule();
  const store = await openSqliteWasmStore({ sqlite3, pool: await openPool(sqlite3), path: DATABASE });
  runtime = await createRuntime({ store, machines: definitions, hostDriven: true });
  runtime.subscribe((event) => {
    if (event.type !== 'job.started' && event.type !== 'job.committed') return;
    // A commit may schedule or cancel timers: sleep again to the (new) next wake-up.
    wake();
    postJobs().catch(report);
    if (event.jobId === watched) postWatched(event.job).catch(report);
  });
  wake();
  const machines: MachineInfo[] = runtime.registry.all().map((m) => {
    const types = diagramOf(m).view.events.map((e) => e.type);
    return {
      id: m.id,
      version: m.version,
      description: m.description ?? null,
      events: types,
      exampleInput: examples.exampleInputs?.[m.id] ?? {},
      exampleEvents: examples.exampleEvents?.[m.id] ?? types.map((type) => ({ type })),
    };
  });
  post({ type: 'ready', machines, jobs: await runtime.list({ limit: 100 }) });
})();
opened.catch((error: unknown) => post({ type: 'failed', message: String((error as Error)?.message ?? error) }));
