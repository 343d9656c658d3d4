/**
 * What the runtime's parts are built with: the store, the clock, the registry, the runner id,
 * the parts they write and tell through, and the state they share with the runtime (leases held,
 * attempts claimed and running, jobs to drain). Each part takes this and what it needs besides.
 */
import type { Clock } from '../ports/clock.ts';
import type { JobRecord, JobStore } from '../ports/store.ts';
import type { MachineRegistry } from './registry.ts';
import type { RuntimeEvents } from './events.ts';
import type { CommitBatcher } from './commits.ts';
import type { JobLocks } from './jobLocks.ts';
import type { BackgroundWork } from './background.ts';
import type { LeaseKeeper } from './leases.ts';
import type { AttemptAbort } from './activities.ts';

/** An attempt running here. */
export interface RunningActivity {
  jobId: string;
  actorId: string;
  attempt: number;
  controller: AttemptAbort;
}

/** The runtime's shared parts and state (see the file's comment). */
export interface RuntimeParts {
  store: JobStore;
  clock: Clock;
  registry: MachineRegistry;
  runnerId: string;
  /** Whether this runtime applies events; whether it runs activities. */
  process: boolean;
  runEffects: boolean;
  events: RuntimeEvents;
  commits: CommitBatcher;
  locks: JobLocks;
  background: BackgroundWork;
  leaseKeeper: LeaseKeeper;
  /** A job read from the record this runtime last committed or read of it (jobView.ts). */
  readKnown: (jobId: string) => Promise<JobRecord | undefined>;
  /** Leases held here (job id -> fence); attempts claimed here (effect id -> job id); attempts running here. */
  leases: Map<string, number>;
  attempting: Map<string, string>;
  running: Map<string, RunningActivity>;
  /** Jobs whose own commit queued events for them: drained after it. */
  pendingDrains: Set<string>;
}
