/** Finding a machine (version) of the server's registry by what a request names, or saying which there are. */
import { UnknownMachineError, type RegisteredMachine, type Runtime } from '../internal.ts';

/** The refusal for a machine id this server does not register, naming those it does. */
export function unknownMachine(runtime: Runtime, machineId: string): UnknownMachineError {
  const known = [...new Set(runtime.registry.all().map((m) => m.id))].join(', ');
  return new UnknownMachineError(`No machine "${machineId}" on this server; it has ${known || 'none'}.`, { machineId });
}

/** A machine version by id: `version`, else the newest registered. */
export function pickVersion(runtime: Runtime, machineId: string, version: string | undefined): RegisteredMachine {
  const versions = runtime.registry.all().filter((m) => m.id === machineId);
  if (versions.length === 0) throw unknownMachine(runtime, machineId);
  const found = version === undefined ? versions.at(-1) : versions.find((m) => m.version === version);
  if (!found) throw new UnknownMachineError(`Machine ${machineId} has no version ${version} on this server; it has ${versions.map((m) => m.version).join(', ')}.`, { machineId });
  return found;
}
