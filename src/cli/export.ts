/**
 * `spool export <machine> [--version v]`: the machine as source for Stately's editor ("Import from
 * code"), on stdout; the inline functions it had to drop are named on stderr (with `--json`: one
 * JSON document with the source and the list).
 *
 * @example
 * spool export job-lifecycle > job-lifecycle.machine.ts
 */
import { Command } from 'commander';
import type { MachineRegistry } from '../index.ts';
import { exportSource } from '../views/exportSource.ts';
import { jsonText } from './format.ts';
import { pickMachine } from './pickMachine.ts';

/** What `spool export` needs from main.ts. */
export interface ExportCommandHost {
  /** The machines of `--machines`, without opening the database. */
  registry(command: Command): Promise<MachineRegistry>;
  json(command: Command): boolean;
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Register `spool export`. */
export function addExportCommand(program: Command, host: ExportCommandHost): void {
  program
    .command('export')
    .description("a machine as createMachine({...}) source that Stately's editor imports (Import from code); names any inline function it drops")
    .argument('<machine>', 'machine id, see `spool machines`')
    .option('--version <version>', 'which registered version (default: the newest)')
    .addHelpText('after', '\nExamples:\n  spool export job-lifecycle > job-lifecycle.machine.ts\n  spool --json export job-lifecycle --version 1')
    .action(async (machineId: string, options: { version?: string }, command: Command) => {
      const m = pickMachine(await host.registry(command), machineId, options.version);
      const { source, dropped } = exportSource(m.machine, { heading: `${m.id} version ${m.version}, exported by spool export.` });
      if (host.json(command)) {
        host.stdout(`${jsonText({ machine: m.id, version: m.version, source, dropped })}\n`);
        return;
      }
      host.stdout(source);
      if (dropped.length > 0) {
        host.stderr(`spool export: dropped ${dropped.length} inline function${dropped.length > 1 ? 's' : ''} (not importable as source):\n`);
        for (const d of dropped) host.stderr(`  ${d.path} (${d.kind})${d.replacedBy ? ` -> "${d.replacedBy}"` : ''}\n`);
      }
    });
}
