import { fromPromise, type AnyStateMachine } from 'xstate';
import { SqliteStore } from '../../persistence/sqlite/index.ts';
import { createRuntime, isStateMachine, type ActivityArgs, type JobDefinition, type Runtime } from '../index.ts';
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
  /** Invoke id whose next attempt stays in flight (for an `interrupt` step), or null. */
  hang: string | null;
  /** Called when the hanging attempt is in flight. */
  onHang: () => void;
}

/**
 * The definition with every invoked activity replaced by a scripted stand-in: it fails
 * `failAttempts[src]` times with a retryable error, then finishes out of band with `defer()`
 * (its outcome is the path's `done`/`error` step, given with `complete`/`fail`), or, when told
 * to hang, stays in flight until the runtime aborts it.
 */
export function scriptedDefinition(input: JobDefinition | AnyStateMachine, jobId: string, script: ActivityScript): JobDefinition {
  const def: JobDefinition = isStateMachine(input) ? { machine: input } : input;
  const actors = (def.machine.implementations.actors ?? {}) as Record<string, unknown>;
  const replaced: Record<string, unknown> = {};
  for (const src of Object.keys(actors)) {
    replaced[src] = fromPromise(async ({ signal, ...rest }) => {
      const args = rest as unknown as ActivityArgs;
      if (args.attempt <= (script.failAttempts[src] ?? 0)) {
        throw Object.assign(new Error(scriptedFailureMessage(src, args.attempt)), { retryable: true });
      }
      const actorId = actorIdOf(args.idempotencyKey, jobId);
      if (script.hang !== null && script.hang === actorId) {
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
  const machine = def.machine.provide({ actors: replaced as never }) as AnyStateMachine;
  return { ...def, machine, id: def.id ?? def.machine.id, version: def.version ?? def.machine.version ?? 1 };
}

/** Effect ids are `<jobId>~<actorId>~r<revision>`. */
function actorIdOf(effectId: string, jobId: string): string {
  const rest = effectId.startsWith(`${jobId}~`) ? effectId.slice(jobId.length + 1) : effectId;
  return rest.replace(/~r\d+$/, '');
}

/** A runtime on one SQLite file, reopened as often as the test wants. */
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
  const store = await SqliteStore.open(ctx.file, { synchronous: ctx.synchronous });
  try {
    ctx.runtime = await createRuntime({ store, machines: [ctx.definition], clock: ctx.clock });
  } catch (error) {
    await store.close();
    throw error;
  }
  return ctx.runtime;
}

export async function closeRuntime(ctx: DriverContext): Promise<void> {
  const runtime = ctx.runtime;
  ctx.runtime = null;
  if (runtime) await runtime.close();
}

/** The default `die` of an in-process run: close under the in-flight attempt, reopen. */
export async function restartInProcess(ctx: DriverContext): Promise<void> {
  await closeRuntime(ctx);
  await openRuntime(ctx);
}

function live(ctx: DriverContext): Runtime {
  if (!ctx.runtime) throw new Error('The runtime of this path run is not open.');
  return ctx.runtime;
}

/**
 * Start the job (step 0) or take one step, then wait until the runtime is idle. `hang` names the
 * invoke id whose attempt started in this step must stay in flight: the runtime then dies
 * (`ctx.die`) while it is, as the next step (`interrupt`) expects.
 */
export async function driveStep(ctx: DriverContext, step: PathStep | { via: 'start'; input: unknown }, index: number, hang: string | null): Promise<void> {
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
        const result = await runtime.send(ctx.jobId, step.event, { eventId: `step-${index}` });
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
        const effect = (await runtime.details(ctx.jobId)).effects.find((e) => e.active && e.actorId === step.actorId && e.status === 'waiting');
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
      if (!inflight) throw new Error(`the attempt of "${hang}" that the next step interrupts did not start`);
      await ctx.die(ctx);
    } else {
      await live(ctx).idle();
    }
  } finally {
    ctx.script.hang = null;
    ctx.script.onHang = () => undefined;
  }
}
