/**
 * Jobs and their records as Spool's clients show them (the `spool` command, the HTTP API):
 * sensitive properties redacted, by the machine's definition. One place, so every client
 * redacts alike.
 */
import { redact, type Job, type JobDetails, type Runtime } from '../internal.ts';

/**
 * A deep copy with every property named in `keys` replaced by `[redacted]` (history payloads
 * come redacted already).
 *
 * @example
 * redactKeys({ card: '4111', n: 1 }, new Set(['card'])) // { card: '[redacted]', n: 1 }
 */
export function redactKeys<T>(value: T, keys: ReadonlySet<string>): T {
  return keys.size === 0 || value === undefined ? value : (redact(value, keys) as T);
}

/** Property names any registered version of a machine marks sensitive. */
export function sensitiveKeys(runtime: Runtime, machineId: string): Set<string> {
  return new Set(runtime.registry.all().flatMap((m) => (m.id === machineId ? [...m.sensitive] : [])));
}

/**
 * A job as a client shows it (the CLI, the HTTP API): sensitive properties of its input, context and output redacted.
 * Which properties are sensitive is in the machine's definition: for a job whose machine this
 * process does not have (no `--machines`, or another module), those values are hidden whole.
 */
export function redactJob(runtime: Runtime, job: Job): Job {
  if (!knowsMachine(runtime, job.machineId)) return { ...job, input: hidden(job), context: hidden(job), output: job.output === undefined ? undefined : hidden(job) };
  const keys = sensitiveKeys(runtime, job.machineId);
  if (keys.size === 0) return job;
  return { ...job, input: redactKeys(job.input, keys), context: redactKeys(job.context, keys), output: redactKeys(job.output, keys) };
}

/** Whether this runtime registers any version of the machine (else its sensitive fields are unknown). */
export function knowsMachine(runtime: Runtime, machineId: string): boolean {
  return runtime.registry.all().some((m) => m.id === machineId);
}

/** What a client shows for a value whose sensitive fields it cannot know. */
export function hidden(job: Pick<Job, 'machineId'>): string {
  return `[hidden: machine ${job.machineId} is not in this --machines module, so its sensitive fields are unknown]`;
}

/**
 * Details as a client shows them. History payloads come redacted from the runtime; inbox events
 * keep their payload as sent until applied, and activities carry inputs and outputs: redact those.
 */
export function redactDetails(runtime: Runtime, details: JobDetails): JobDetails {
  if (!knowsMachine(runtime, details.job.machineId)) {
    const h = hidden(details.job);
    return {
      ...details,
      job: redactJob(runtime, details.job),
      events: details.events.map((e) => (e.status === 'pending' ? { ...e, payload: h } : e)),
      effects: details.effects.map((e) => ({ ...e, input: h, output: e.output === null || e.output === undefined ? e.output : h })),
      timers: details.timers.map((t) => ({ ...t, event: h })),
    };
  }
  const keys = sensitiveKeys(runtime, details.job.machineId);
  return {
    ...details,
    job: redactJob(runtime, details.job),
    events: details.events.map((e) => ({ ...e, payload: redactKeys(e.payload, keys) })),
    effects: details.effects.map((e) => ({ ...e, input: redactKeys(e.input, keys), output: redactKeys(e.output, keys) })),
    timers: details.timers.map((t) => ({ ...t, event: redactKeys(t.event, keys) })),
  };
}
