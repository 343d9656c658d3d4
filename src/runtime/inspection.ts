/**
 * The Stately inspector: each job shown to an XState inspection observer (the `inspect` of
 * `@statelyai/inspect`'s `createWebSocketInspector(...)` or `createBrowserInspector()`, or any
 * function or observer of XState's `InspectionEvent`s) as an actor: `@xstate.actor` when it is
 * registered, `@xstate.event` for every applied event with its source, `@xstate.snapshot` for every
 * committed snapshot. Fed only after commit: from the runtime's `job.started` / `job.committed`
 * events (the `inspect` runtime option) or from the durable history feed (`spool inspect`).
 *
 * The actors are stand-ins with what the inspector reads (`sessionId`, `id`, `_parent`,
 * `logic.config`, `getSnapshot()`): XState's own inspection events for a live actor have the same
 * shape, so `@statelyai/inspect` converts them as it converts a live machine's.
 *
 * - sessionId: `spool:<job id>`, the same in every process and after every restart.
 * - rootId: the sessionId of the job's topmost parent (a job and its child jobs are one system,
 *   as an XState actor and the actors it invokes are).
 * - An event's source (`sourceRef`), read off the event id the runtime gave it: none for an
 *   outside send or a cancel request (as XState for `actor.send`), the job itself for a timer or a
 *   self-send (as XState for `after` and `raise`), the activity for its outcome (registered as a
 *   child actor of the job, named by its invoke id, when its outcome arrives), the child or parent
 *   job for an event between them.
 */
import type { AnyEventObject, InspectionEvent } from 'xstate';
import type { FeedRecord, JobRecord, JobStore, JsonValue, TransitionRecord } from '../ports/store.ts';
import type { Job, LogEntry, RuntimeEvent } from './api.ts';
import type { InspectionObserver } from './options.ts';
import type { RuntimeEvents } from './events.ts';
import { toErrorInfo } from '../base/errors.ts';
import { redact } from '../base/json.ts';
import type { MachineRegistry } from './registry.ts';

/** The sessionId of a job's actor: stable across processes and restarts. */
export function sessionIdOf(jobId: string): string {
  return `spool:${jobId}`;
}

/** The snapshot an inspector is shown: the parts of a machine snapshot it reads. */
interface InspectedSnapshot {
  status: string;
  value: JsonValue;
  context: JsonValue;
  output?: JsonValue;
  children: Record<string, never>;
}

/** The stand-in actor: what `@statelyai/inspect` reads off an XState actor ref. */
interface InspectedActor {
  id: string;
  sessionId: string;
  _parent: InspectedActor | undefined;
  logic: { config: unknown };
  getSnapshot(): InspectedSnapshot;
  send(): void;
}

/** A job as the inspector needs it. */
export interface InspectedJob {
  jobId: string;
  machineId: string;
  machineVersion: string;
  parentJobId: string | null;
  revision: number;
  status: string;
  value: JsonValue;
  context: JsonValue;
  output?: JsonValue | undefined;
}

/** A commit as the inspector needs it. */
export type InspectedCommit = Pick<TransitionRecord, 'revision' | 'eventId' | 'eventType' | 'payload' | 'from' | 'outcome'>;

/** A job shown: its actor (whose `getSnapshot()` stays the one it was registered with, as the inspector reads it later) and the last revision shown. */
interface Known {
  ref: InspectedActor;
  revision: number;
}

/** What {@link JobInspector} needs: the observer, the machines (for definitions and redaction), a log. */
export interface JobInspectorDeps {
  observer: InspectionObserver;
  registry: MachineRegistry;
  log: (level: LogEntry['level'], msg: string, fields: Record<string, unknown>) => void;
}

/**
 * Turns jobs and their commits into inspection events, in commit order, each commit once (a
 * revision at or below what was already shown is skipped). An observer that throws is logged and
 * the next event is still sent.
 */
export class JobInspector {
  readonly #next: (event: InspectionEvent) => void;
  readonly #deps: JobInspectorDeps;
  /** Active jobs shown so far, by job id (ended ones are forgotten). */
  readonly #known = new Map<string, Known>();
  /** Child jobs shown (by id) whose parent has not yet received their outcome: an effect id that is one is not an activity. */
  readonly #childJobs = new Set<string>();

  constructor(deps: JobInspectorDeps) {
    this.#deps = deps;
    const { observer } = deps;
    this.#next = typeof observer === 'function' ? observer : (event) => observer.next?.(event);
  }

  /** Whether the job has been shown, and the revision it was shown at. */
  shown(jobId: string): number | undefined {
    return this.#known.get(jobId)?.revision;
  }

  /**
   * Register a job's actor. `init`: it has just started (an `xstate.init` event and its first
   * snapshot follow, as for a new XState actor); otherwise it is re-announced where it stands.
   */
  register(job: InspectedJob, init: boolean): void {
    if (this.#known.has(job.jobId)) return;
    const parent = job.parentJobId === null ? undefined : this.#known.get(job.parentJobId)?.ref;
    const snapshot = this.#snapshotOf(job);
    const ref = this.#actor(job.jobId, sessionIdOf(job.jobId), parent, this.#definition(job), snapshot);
    this.#known.set(job.jobId, { ref, revision: job.revision });
    if (job.parentJobId !== null) this.#childJobs.add(job.jobId);
    this.#send({ type: '@xstate.actor', actorRef: ref, rootId: rootOf(ref) });
    if (!init) return;
    const event = { type: 'xstate.init' };
    this.#send({ type: '@xstate.event', actorRef: ref, rootId: rootOf(ref), event, sourceRef: parent });
    this.#send({ type: '@xstate.snapshot', actorRef: ref, rootId: rootOf(ref), event, snapshot: snapshot as never });
    this.#forgetIfEnded(job);
  }

  /** Show one commit of a registered job: the event with its source, then the committed snapshot. */
  commit(job: InspectedJob, commit: InspectedCommit): void {
    const known = this.#known.get(job.jobId);
    if (!known || commit.revision <= known.revision) return;
    const event = toEventObject(commit.payload, commit.eventType);
    const rootId = rootOf(known.ref);
    this.#send({ type: '@xstate.event', actorRef: known.ref, rootId, event, sourceRef: this.#sourceOf(known.ref, commit) });
    const snapshot = this.#snapshotOf(job);
    known.revision = commit.revision;
    this.#send({ type: '@xstate.snapshot', actorRef: known.ref, rootId, event, snapshot: snapshot as never });
    this.#forgetIfEnded(job);
  }

  #forgetIfEnded(job: InspectedJob): void {
    if (job.status !== 'active') this.#known.delete(job.jobId);
  }

  /** The actor an event came from (undefined: from outside the system). */
  #sourceOf(job: InspectedActor, commit: InspectedCommit): InspectedActor | undefined {
    const id = commit.eventId ?? '';
    if (id.startsWith('timer~') || id.startsWith('self~')) return job;
    const related = /^(?:parent|child)~(.+)~r\d+~\d+$/.exec(id);
    if (related) return this.#known.get(related[1]!)?.ref ?? this.#actor(related[1]!, sessionIdOf(related[1]!), undefined, undefined, bare('active'));
    const effect = /^effect~(.+)~a\d+$/.exec(id);
    if (!effect) return undefined;
    const effectId = effect[1]!;
    if (this.#childJobs.delete(effectId)) return this.#known.get(effectId)?.ref ?? this.#actor(effectId, sessionIdOf(effectId), job, undefined, bare('done'));
    // An activity: shown as the job's invoked actor, named by its invoke id, when its outcome arrives.
    const name = /^xstate\.(?:done|error)\.actor\.(.+)$/.exec(commit.eventType)?.[1] ?? effectId;
    const status = commit.eventType.startsWith('xstate.error.') ? 'error' : 'done';
    const activity = this.#actor(name, sessionIdOf(effectId), job, { id: name }, bare(status));
    this.#send({ type: '@xstate.actor', actorRef: activity, rootId: rootOf(activity) });
    return activity;
  }

  #definition(job: InspectedJob): unknown {
    const def = this.#deps.registry.get(job.machineId, job.machineVersion) ?? this.#deps.registry.all().find((m) => m.id === job.machineId);
    return def?.machine.config ?? { id: job.machineId };
  }

  #snapshotOf(job: InspectedJob): InspectedSnapshot {
    const def = this.#deps.registry.get(job.machineId, job.machineVersion);
    // Redacted as every client shows it; a machine this process does not know shows no context.
    const hide = (value: JsonValue): JsonValue => (def ? redact(value, def.sensitive) : null);
    return {
      status: job.status,
      value: job.value,
      context: hide(job.context),
      ...(job.output !== undefined ? { output: hide(job.output) } : {}),
      children: {},
    };
  }

  #actor(id: string, sessionId: string, parent: InspectedActor | undefined, config: unknown, snapshot: InspectedSnapshot): InspectedActor {
    return { id, sessionId, _parent: parent, logic: { config }, getSnapshot: () => snapshot, send: () => {} };
  }

  #send(event: InspectionEvent): void {
    try {
      this.#next(event);
    } catch (error) {
      this.#deps.log('error', 'inspection observer threw', { event: event.type, sessionId: event.actorRef.sessionId, error: toErrorInfo(error) });
    }
  }
}

/** The snapshot of an actor known only by its id (an activity, a job seen only as a source). */
function bare(status: string): InspectedSnapshot {
  return { status, value: null, context: null, children: {} };
}

function rootOf(ref: InspectedActor): string {
  let root = ref;
  while (root._parent) root = root._parent;
  return root.sessionId;
}

function toEventObject(payload: JsonValue, type: string): AnyEventObject {
  return payload !== null && typeof payload === 'object' && !Array.isArray(payload) && typeof payload['type'] === 'string' ? (payload as AnyEventObject) : { type };
}

/** A job record or API job as the inspector sees it. */
export function inspectedJob(record: JobRecord): InspectedJob {
  return {
    jobId: record.id,
    machineId: record.machineId,
    machineVersion: record.machineVersion,
    parentJobId: record.parent?.jobId ?? null,
    revision: record.revision,
    status: record.status,
    value: record.value,
    context: record.context,
  };
}

/** The view of a job the runtime's `job.committed` event carries. */
export function inspectedFromApi(job: Job, parentJobId: string | null): InspectedJob {
  return {
    jobId: job.id,
    machineId: job.machineId,
    machineVersion: job.machineVersion,
    parentJobId,
    revision: job.revision,
    status: job.status,
    value: job.value,
    context: job.context,
    output: job.output,
  };
}

/** What {@link InspectionFeed} needs besides the inspector's own needs. */
export interface InspectionFeedDeps extends JobInspectorDeps {
  store: Pick<JobStore, 'getJob' | 'listJobs' | 'listEffects' | 'history'>;
  /** The runtime's tenant scope (`null`: unscoped jobs only; `undefined`: every owner). */
  owner: string | null | undefined;
  /** Keep the feed's work so `idle()`/`close()` wait for it. */
  track?: (work: Promise<unknown>) => void;
}

/**
 * Feeds a {@link JobInspector}, one piece of work at a time in the order given, from the
 * runtime's post-commit events or from the durable history feed; reads the store for what those
 * do not carry (a job's parent, its child jobs, where a job stood when it was first seen).
 */
export class InspectionFeed {
  readonly inspector: JobInspector;
  readonly #deps: InspectionFeedDeps;
  #chain: Promise<void> = Promise.resolve();

  constructor(deps: InspectionFeedDeps) {
    this.#deps = deps;
    this.inspector = new JobInspector(deps);
  }

  /** Resolves once everything queued so far has been shown. */
  flushed(): Promise<void> {
    return this.#chain;
  }

  /** Announce every active job where it stands now (on open, after a restart, when a relay starts). */
  announceActive(): Promise<void> {
    return this.#queue(async () => {
      let afterId: string | undefined;
      for (;;) {
        const page = await this.#deps.store.listJobs({ status: 'active', limit: 500, ...(this.#deps.owner !== undefined ? { owner: this.#deps.owner } : {}), ...(afterId !== undefined ? { afterId } : {}) });
        for (const record of page) await this.#ensure(record.id, record);
        if (page.length < 500) return;
        afterId = page.at(-1)!.id;
      }
    });
  }

  /** The runtime's post-commit events: a started job, a committed transition. */
  onRuntimeEvent(event: RuntimeEvent): void {
    if (event.type === 'job.started') {
      const { job } = event;
      void this.#queue(async () => {
        this.inspector.register(inspectedFromApi(job, null), true);
        await this.#childrenOf(job.id, job.machineId, job.machineVersion, job.revision);
      });
    } else if (event.type === 'job.committed') {
      const { job, transition } = event;
      void this.#queue(async () => {
        const parent = await this.#firstSight(job.id, transition);
        if (parent === undefined) return;
        this.inspector.commit(inspectedFromApi(job, parent), transition);
        await this.#childrenOf(job.id, job.machineId, job.machineVersion, transition.revision);
      });
    }
  }

  /** One record of the history feed (a relay of another process's commits). */
  onFeedRecord(r: FeedRecord): Promise<void> {
    return this.#queue(async () => {
      const record = await this.#deps.store.getJob(r.jobId);
      if (!record) return; // purged since
      // The job's row is as of now: its context and status belong to the record's revision only when it is the latest.
      const view = { ...inspectedJob(record), value: r.to, revision: r.revision, status: record.revision === r.revision ? record.status : 'active' };
      if (r.outcome === 'started') {
        if (this.inspector.shown(r.jobId) !== undefined) return;
        if (view.parentJobId !== null) await this.#ensure(view.parentJobId);
        this.inspector.register(view, true);
        return;
      }
      if ((await this.#firstSight(r.jobId, r, record)) === undefined) return;
      this.inspector.commit(view, r);
    });
  }

  #queue(work: () => Promise<void>): Promise<void> {
    const next = this.#chain.then(work).catch((error: unknown) => this.#deps.log('error', 'inspection failed', { error: toErrorInfo(error) }));
    this.#chain = next;
    this.#deps.track?.(next);
    return next;
  }

  /**
   * Before a commit of a job not shown yet: register it as it stood just before (the commit's
   * `from`). Resolves with its parent job id (null: none), or undefined when the job is gone.
   */
  async #firstSight(jobId: string, commit: InspectedCommit, known?: JobRecord): Promise<string | null | undefined> {
    const record = known ?? (await this.#deps.store.getJob(jobId));
    if (!record) return undefined;
    if (this.inspector.shown(jobId) === undefined) {
      if (record.parent) await this.#ensure(record.parent.jobId);
      this.inspector.register({ ...inspectedJob(record), status: 'active', value: commit.from ?? record.value, revision: commit.revision - 1 }, false);
    }
    return record.parent?.jobId ?? null;
  }

  /** Register a job (its parents first) where it stands, unless it has been shown. */
  async #ensure(jobId: string, known?: JobRecord): Promise<void> {
    if (this.inspector.shown(jobId) !== undefined) return;
    const record = known ?? (await this.#deps.store.getJob(jobId));
    if (!record || record.status !== 'active') return;
    if (record.parent) await this.#ensure(record.parent.jobId);
    this.inspector.register(inspectedJob(record), false);
  }

  /** The child jobs a commit of a job created (a machine that invokes child machines): registered as new actors of its system. */
  async #childrenOf(jobId: string, machineId: string, version: string, revision: number): Promise<void> {
    if (!this.#deps.registry.get(machineId, version)?.hasChildMachines) return;
    const created = (await this.#deps.store.listEffects(jobId)).filter((e) => e.kind === 'child' && e.createdRevision === revision);
    for (const effect of created) {
      if (this.inspector.shown(effect.id) !== undefined) continue;
      const child = await this.#deps.store.getJob(effect.id);
      if (!child) continue;
      // Shown as it started (its later commits follow as their own events); the context is the newest.
      const first = child.revision === 1 ? undefined : (await this.#deps.store.history(child.id))[0];
      this.inspector.register({ ...inspectedJob(child), ...(first ? { revision: first.revision, value: first.to, status: 'active' } : {}) }, true);
      await this.#childrenOf(child.id, child.machineId, child.machineVersion, 1);
    }
  }
}

/** The `inspect` option: announce the active jobs, then show every commit the runtime tells of. */
export function inspectRuntime(deps: InspectionFeedDeps, events: Pick<RuntimeEvents, 'subscribe'>): InspectionFeed {
  const feed = new InspectionFeed(deps);
  void feed.announceActive();
  events.subscribe((event) => feed.onRuntimeEvent(event));
  return feed;
}
