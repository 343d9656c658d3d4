import { fromPromise, type AnyStateMachine } from 'xstate';
import { openStore } from '../../persistence/openStore.ts';
import { createRuntime, isStateMachine, type ActivityArgs, type JobDefinition, type Runtime } from '../internal.ts';
import { scriptedFailureMessage, type PathStep } from './model.ts';
import type { VirtualClock } from './VirtualClock.ts';

/**
 * Drives one job of the REAL runtime through the steps of a path. Shared by the in-process
 * runner and the child-process fixture, so both do exactly the same thing per step.
 */

/**
 * What the stand-in activities do. Read at the start of every attempt, so the driver can change
 * it between steps.
 */
export interface ActivityScript {
  /** Per src: attempts of every invocation that fail with a retryable error before one waits. */
  failAttempts: Record<string, number>;
  /** Per child machine id (`<parent id>.<src>`), per src of its activities: the same for its child jobs. */
  childFailAttempts?: Record<string, Record<string, number>>;
  /** The activity whose next attempt stays in flight (for an `interrupt` step), or null. */
  hang: Hang | null;
  /** Called when the hanging attempt is in flight. */
  onHang: () => void;
}

/** An activity by invoke id, in the job under test (`child` = `''`) or in the child job at `child` (invoke ids joined by `/`). */
export interface Hang {
  child: string;
  actorId: string;
}

/**
 * The definition with every invoked activity replaced by a scripted stand-in: it fails
 * `failAttempts[src]` times with a retryable error, then finishes out of band with `defer()`
 * (its outcome is the path's `done`/`error` step, given with `complete`/`fail`), or, when told
 * to hang, stays in flight until the runtime aborts it. Child machines stay machines (they run
 * as child jobs), with their own activities replaced the same way.
 */
export function scriptedDefinition(input: JobDefinition | AnyStateMachine, jobId: string, script: ActivityScript): JobDefinition {
  const def: JobDefinition = isStateMachine(input) ? { machine: input } : input;
  const id = def.id ?? def.machine.id;
  const machine = scriptedMachine(def.machine, id, true, jobId, script);
  return { ...def, machine, id, version: def.version ?? def.machine.version ?? 1 };
}

function scriptedMachine(machine: AnyStateMachine, machineId: string, root: boolean, jobId: string, script: ActivityScript): AnyStateMachine {
  const actors = (machine.implementations.actors ?? {}) as Record<string, unknown>;
  const replaced: Record<string, unknown> = {};
  for (const [src, logic] of Object.entries(actors)) {
    if (isStateMachine(logic)) {
      replaced[src] = scriptedMachine(logic, `${machineId}.${src}`, false, jobId, script);
      continue;
    }
    replaced[src] = fromPromise(async ({ signal, ...rest }) => {
      const args = rest as unknown as ActivityArgs;
      const failures = root ? script.failAttempts[src] : script.childFailAttempts?.[machineId]?.[src];
      if (args.attempt <= (failures ?? 0)) {
        throw Object.assign(new Error(scriptedFailureMessage(src, args.attempt)), { retryable: true });
      }
      const hang = script.hang;
      if (hang !== null && hang.actorId === actorIdOf(args.idempotencyKey, args.jobId) && hang.child === childPathOf(args.jobId, jobId)) {
        return new Promise<never>((_, reject) => {
          const stop = () => reject(new Error('attempt interrupted'));
          if (signal.aborted) stop();
          else signal.addEventListener('abort', stop, { once: true });
          script.onHang();
        });
      }
      return args.defer(() => undefined);
    });
  }
  return machine.provide({ actors: replaced as never }) as AnyStateMachine;
}

/** Effect ids are `<jobId>~<actorId>~r<revision>`. */
function actorIdOf(effectId: string, jobId: string): string {
  const rest = effectId.startsWith(`${jobId}~`) ? effectId.slice(jobId.length + 1) : effectId;
  return rest.replace(/~r\d+$/, '');
}

/** Child job ids are `<parent job id>~<invoke id>~r<revision>`: the invoke ids from the job under test, joined by `/`. */
export function childPathOf(jobId: string, rootJobId: string): string {
  if (jobId === rootJobId || !jobId.startsWith(`${rootJobId}~`)) return '';
  const ids: string[] = [];
  let current: string[] = [];
  for (const part of jobId.slice(rootJobId.length + 1).split('~')) {
    if (/^r\d+$/.test(part) && current.length > 0) {
      ids.push(current.join('~'));
      current = [];
    } else current.push(part);
  }
  if (current.length > 0) ids.push(current.join('~'));
  return ids.join('/');
}

/** The id of the running child job at `child` (invoke ids from the job under test, joined by `/`), found through the parents' invocations. */
export async function childJobId(runtime: Runtime, rootJobId: string, child: string): Promise<string> {
  let jobId = rootJobId;
  for (const actorId of child.split('/')) {
    const effect = (await runtime.details(jobId)).effects.filter((e) => e.kind === 'child' && e.active && e.actorId === actorId).at(-1);
    if (!effect) throw new Error(`job ${jobId} has no running child job "${actorId}"`);
    jobId = effect.id;
  }
  return jobId;
}

/** A runtime on one store (`file`: a SQLite file, or anything `openStore` opens), reopened as often as the test wants. */
export interface DriverContext {
  file: string;
  clock: VirtualClock;
  /** Clock time at which the job was started. */
  t0: number;
  jobId: string;
  machineId: string;
  definition: JobDefinition;
  script: ActivityScript;
  synchronous: 'FULL' | 'NORMAL';
  runtime: Runtime | null;
  /**
   * What to do when the attempt that must hang is in flight. In-process: close this runtime
   * (it aborts the attempt, which stays `running` under a runner that is gone) and open a new one.
   * In a child process: report, and wait for the parent's SIGKILL.
   */
  die: (ctx: DriverContext) => Promise<void>;
}

export async function openRuntime(ctx: DriverContext): Promise<Runtime> {
  // One simulated host on a virtual clock: leases expire as that clock moves (on Postgres, not by the server's).
  const store = await openStore(ctx.file, { synchronous: ctx.synchronous, leaseClock: 'caller' });
  try {
    ctx.runtime = await createRuntime({ store, machines: [ctx.definition], clock: ctx.clock });
  } catch (error) {
    await store.close();
    throw error;
  }
  return ctx.runtime;
}

export async function closeRuntime(ctx: DriverContext, options: { releaseAttempts?: boolean } = {}): Promise<void> {
  const runtime = ctx.runtime;
  ctx.runtime = null;
  if (runtime) await runtime.close(options);
}

/**
 * The default `die` of an in-process run: close under the in-flight attempt as a crash would
 * (the attempt is not given back: the next runtime takes it over and counts it), reopen.
 */
export async function restartInProcess(ctx: DriverContext): Promise<void> {
  await closeRuntime(ctx, { releaseAttempts: false });
  await openRuntime(ctx);
}

function live(ctx: DriverContext): Runtime {
  if (!ctx.runtime) throw new Error('The runtime of this path run is not open.');
  return ctx.runtime;
}

/**
 * Start the job (step 0) or take one step, then wait until the runtime is idle. `hang` names the
 * activity whose attempt started in this step must stay in flight: the runtime then dies
 * (`ctx.die`) while it is, as the next step (`interrupt`) expects.
 */
export async function driveStep(ctx: DriverContext, step: PathStep | { via: 'start'; input: unknown }, index: number, hang: Hang | null): Promise<void> {
  let inflight = false;
  let signal: () => void = () => undefined;
  const hung = new Promise<void>((resolve) => (signal = resolve));
  ctx.script.hang = hang;
  ctx.script.onHang = () => {
    inflight = true;
    signal();
  };
  try {
    const runtime = live(ctx);
    switch (step.via) {
      case 'start':
        await runtime.start(ctx.machineId, step.input, { jobId: ctx.jobId });
        break;
      case 'send': {
        const target = step.child ? await childJobId(runtime, ctx.jobId, step.child) : ctx.jobId;
        const result = await runtime.send(target, step.event, { eventId: `step-${index}` });
        if (result.status === 'pending' || result.status === 'rejected') {
          throw new Error(`send ${step.type} came back ${result.status}${result.error ? `: ${result.error.message}` : ''}`);
        }
        break;
      }
      case 'time': {
        const wake = await runtime.nextWakeAt();
        if (wake === null) throw new Error('the runtime has no timer or retry scheduled, but the path expects one');
        ctx.clock.set(Math.max(wake, ctx.clock.now()));
        await runtime.tick();
        break;
      }
      case 'done':
      case 'error': {
        const target = step.child ? await childJobId(runtime, ctx.jobId, step.child) : ctx.jobId;
        const effect = (await runtime.details(target)).effects.find((e) => e.active && e.kind !== 'child' && e.actorId === step.actorId && e.status === 'waiting');
        if (!effect || effect.token === null) throw new Error(`no activity "${step.actorId}" is waiting for its outcome`);
        if (step.via === 'done') await runtime.complete(effect.token, step.output);
        else await runtime.fail(effect.token, step.error);
        break;
      }
      case 'interrupt':
        // The runtime that ran the attempt died after the previous step; this one takes it over.
        await runtime.tick();
        break;
    }
    if (hang !== null) {
      const idle = live(ctx).idle().then(() => 'idle' as const);
      await Promise.race([hung, idle]);
      if (!inflight) throw new Error(`the attempt of "${hang.actorId}"${hang.child ? ` in child job ${hang.child}` : ''} that the next step interrupts did not start`);
      await ctx.die(ctx);
    } else {
      await live(ctx).idle();
    }
  } finally {
    ctx.script.hang = null;
    ctx.script.onHang = () => undefined;
  }
}
