/**
 * `spool graph <machine> [--job <id>] --format mermaid|dot|json`: a machine's statechart as text
 * to draw; with `--job`, that job's current states highlighted and the transitions it took marked.
 *
 * @example
 * spool graph job-lifecycle --format mermaid > lifecycle.mmd
 * spool graph job-lifecycle --job resize-1 --format dot | dot -Tsvg > resize-1.svg
 */
import { Command, Option } from 'commander';
import type { MachineRegistry, Runtime } from '../index.ts';
import { GRAPH_FORMATS, highlightFor, renderGraph, type GraphFormat } from '../views/graph.ts';
import { describeMachine } from '../views/machineView.ts';
import { UsageError } from './errors.ts';
import { pickMachine } from './pickMachine.ts';

/** What `spool graph` needs from main.ts. */
export interface GraphCommandHost {
  /** The machines of `--machines`, without opening the database. */
  registry(command: Command): Promise<MachineRegistry>;
  /** A read-only runtime on `--db` (for `--job`). */
  withReadRuntime(command: Command, work: (runtime: Runtime) => Promise<void>): Promise<void>;
  stdout(text: string): void;
}

/** Register `spool graph`. */
export function addGraphCommand(program: Command, host: GraphCommandHost): void {
  program
    .command('graph')
    .description("a machine's statechart as Mermaid, Graphviz dot or JSON; --job highlights that job's state and the transitions it took")
    .argument('<machine>', 'machine id, see `spool machines`')
    .addOption(new Option('--format <format>', 'what to write').choices(GRAPH_FORMATS).default('mermaid'))
    .option('--version <version>', 'which registered version (default: the newest; with --job, the job\'s)')
    .option('--job <id>', "highlight this job's current state and mark the transitions its history took")
    .addHelpText('after', '\nExamples:\n  spool graph job-lifecycle\n  spool graph job-lifecycle --job resize-1 --format dot | dot -Tsvg > resize-1.svg')
    .action(async (machineId: string, options: { format: GraphFormat; version?: string; job?: string }, command: Command) => {
      const registry = await host.registry(command);
      const pick = (version: string | undefined) => pickMachine(registry, machineId, version);
      if (options.job === undefined) {
        host.stdout(renderGraph(describeMachine(pick(options.version)), options.format));
        return;
      }
      const jobId = options.job;
      await host.withReadRuntime(command, async (runtime) => {
        const job = await runtime.get(jobId);
        if (job.machineId !== machineId) throw new UsageError(`Job ${jobId} runs machine ${job.machineId}, not ${machineId}.`);
        const view = describeMachine(pick(options.version ?? job.machineVersion));
        host.stdout(renderGraph(view, options.format, highlightFor(view, job.value, await runtime.history(jobId))));
      });
    });
}
