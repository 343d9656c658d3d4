/** Picking a registered machine version for a command (`spool graph`, `spool export`). */
import type { MachineRegistry, RegisteredMachine } from '../internal.ts';
import { UsageError } from './errors.ts';

/** A registered machine by id, the newest version unless `version` names one; a clear usage error otherwise. */
export function pickMachine(registry: MachineRegistry, machineId: string, version: string | undefined): RegisteredMachine {
  const versions = registry.all().filter((m) => m.id === machineId);
  if (versions.length === 0) throw new UsageError(`No machine "${machineId}" in this --machines module; see \`spool machines\`.`);
  const found = version === undefined ? versions.at(-1) : versions.find((m) => m.version === version);
  if (!found) throw new UsageError(`Machine ${machineId} has no version ${version}; it has ${versions.map((m) => m.version).join(', ')}.`);
  return found;
}
