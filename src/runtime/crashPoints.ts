/**
 * Named crash points inside the engine. They do nothing unless armed: tests arm one through the
 * `SPOOL_CRASH_AT` environment variable of a child process (`SPOOL_CRASH_AT=after-accept`), and
 * the process then kills itself with SIGKILL the moment it passes that point. This is how crash
 * tests hit an exact race window instead of hoping a random kill lands in it.
 *
 * `SPOOL_CRASH_AT=name:n` crashes at the n-th pass (1-based).
 */
import { nodeProcess } from '../base/node.ts';

export type CrashPointName =
  | 'after-accept' // an event is durably accepted, not yet applied
  | 'before-commit' // a transition is computed, not yet committed
  | 'after-commit' // a transition is committed, its actions not yet carried out
  | 'after-claim' // an activity attempt is claimed, the activity not yet called
  | 'before-outcome' // the activity returned, its outcome not yet recorded
  | 'after-outcome' // the outcome is recorded, not yet applied to the machine
  | 'after-fire'; // a due timer moved into the inbox, not yet applied

const armed = parse(nodeProcess?.env['SPOOL_CRASH_AT']);
let passes = 0;

function parse(spec: string | undefined): { name: string; at: number } | undefined {
  if (!spec) return undefined;
  const [name, n] = spec.split(':');
  return { name: name!, at: n ? Math.max(1, Number(n)) : 1 };
}

/** Pass a named crash point: SIGKILLs this process if a test armed it. */
export function crashPoint(name: CrashPointName): void {
  if (armed === undefined || armed.name !== name) return;
  passes += 1;
  if (passes >= armed.at) nodeProcess!.kill(nodeProcess!.pid, 'SIGKILL');
}
