/**
 * What the page and its Worker say to each other (postMessage, structured clone). The Worker owns
 * the runtime and its store; the page asks it to start jobs and send events, and draws what it
 * streams back: the jobs, and the watched job with its diagram and marks.
 */
import type { Job } from '../../../src/index.ts';

/** An event as `send` takes it. */
export type EventObject = { type: string; [field: string]: unknown };

/** A machine the Worker runs, as the start form shows it. */
export interface MachineInfo {
  id: string;
  version: string;
  description: string | null;
  /** Its external event types. */
  events: string[];
  /** What the start form is filled with: the machines module's `exampleInputs[id]`, else `{}`. */
  exampleInput: unknown;
  /** Events the send form offers filled in: the module's `exampleEvents[id]`, else `{ type }` of each event type. */
  exampleEvents: EventObject[];
}

/** The page's requests; each carries an `id` its reply repeats. */
export type Request =
  | { type: 'start'; machineId: string; input: unknown }
  | { type: 'send'; jobId: string; event: EventObject }
  /** Stream this job (null: none): its diagram once, then each change of it. */
  | { type: 'watch'; jobId: string | null };

export type Call = Request & { id: number };

/** A job's marks on its diagram, as views/svg.ts's `markLists` gives them. */
export interface Marks {
  active: string[];
  taken: [string, string, string][];
}

export type Message =
  /** The store is open and the runtime running (recovered jobs included). */
  | { type: 'ready'; machines: MachineInfo[]; jobs: Job[] }
  /** The Worker could not open the store or the runtime; nothing else will come. */
  | { type: 'failed'; message: string }
  | { type: 'reply'; id: number; ok: true; jobId: string | null }
  | { type: 'reply'; id: number; ok: false; error: { code: string; message: string } }
  /** Every job, newest first, after each change. */
  | { type: 'jobs'; jobs: Job[] }
  /** The watched job: its drawing (views/svg.ts, no marks) when the watch starts, then the job and its marks on each commit. */
  | { type: 'diagram'; jobId: string; svg: string }
  | { type: 'job'; job: Job; marks: Marks };
