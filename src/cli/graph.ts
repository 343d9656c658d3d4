/**
 * `spool graph <machine> [--job <id>] --format mermaid|dot|json|svg`: a machine's statechart as text
 * to draw, or drawn (svg: laid out by views/layout.ts, the same drawing the dashboard shows); with
 * `--job`, that job's current states highlighted and the transitions it took marked.
 *
 * @example
 * spool graph job-lifecycle --format mermaid > lifecycle.mmd
 * spool graph job-lifecycle --job resize-1 --format svg > resize-1.svg
 */
import { Command, Option } from 'commander';
import type { JsonValue, MachineRegistry, Runtime, TransitionRecord } from '../internal.ts';
import { GRAPH_FORMATS, highlightFor, renderGraph, type GraphFormat } from '../views/graph.ts';
import { describeMachine, type MachineView } from '../views/machineView.ts';
import { UsageError } from './errors.ts';
import { jsonText } from './format.ts';
import { pickMachine } from './pickMachine.ts';

/** What `spool graph` needs from main.ts. */
export interface GraphCommandHost {
  /** The machines of `--machines`, without opening the database. */
  registry(command: Command): Promise<MachineRegistry>;
  /** A read-only runtime on `--db` (for `--job`). */
  withReadRuntime(command: Command, work: (runtime: Runtime) => Promise<void>): Promise<void>;
  /** The global `--json`: the JSON tree, as `--format json`. */
  json(command: Command): boolean;
  stdout(text: string): void;
}

/** Register `spool graph`. */
export function addGraphCommand(program: Command, host: GraphCommandHost): void {
  program
    .command('graph')
    .description("a machine's statechart as Mermaid, Graphviz dot, JSON (also with --json) or SVG (laid out, as the dashboard draws it); --job highlights that job's state and the transitions it took")
    .argument('<machine>', 'machine id, see `spool machines`')
    .addOption(new Option('--format <format>', 'what to write').choices(GRAPH_FORMATS).default('mermaid'))
    .option('--version <version>', 'which registered version (default: the newest; with --job, the job\'s)')
    .option('--job <id>', "highlight this job's current state and mark the transitions its history took")
    .addHelpText('after', '\nExamples:\n  spool graph job-lifecycle\n  spool graph job-lifecycle --format svg > lifecycle.svg\n  spool graph job-lifecycle --job resize-1 --format dot | dot -Tsvg > resize-1.svg')
    .action(async (machineId: string, options: { format: GraphFormat; version?: string; job?: string }, command: Command) => {
      if (host.json(command)) {
        if (command.getOptionValueSource('format') !== 'default' && options.format !== 'json') throw new UsageError(`--json prints the JSON tree; it cannot be combined with --format ${options.format}. Drop one of them.`);
        options = { ...options, format: 'json' };
      }
      const registry = await host.registry(command);
      const pick = (version: string | undefined) => pickMachine(registry, machineId, version);
      if (options.job === undefined) {
        host.stdout(await draw(describeMachine(pick(options.version)), options.format));
        return;
      }
      const jobId = options.job;
      await host.withReadRuntime(command, async (runtime) => {
        const job = await runtime.get(jobId);
        if (job.machineId !== machineId) throw new UsageError(`Job ${jobId} runs machine ${job.machineId}, not ${machineId}.`);
        const view = describeMachine(pick(options.version ?? job.machineVersion));
        host.stdout(await draw(view, options.format, { value: job.value, history: await runtime.history(jobId) }));
      });
    });
}

/** The text of one format; svg is laid out (async), the others are written from the tree. */
async function draw(view: MachineView, format: GraphFormat, job?: { value: JsonValue; history: TransitionRecord[] }): Promise<string> {
  // Imported here: the layout engine (elkjs) is a large module no other command needs at start.
  if (format === 'svg') return (await import('../views/svg.ts')).machineSvg(view, job ? { job } : {});
  const text = renderGraph(view, format, job ? highlightFor(view, job.value, job.history) : undefined);
  return format === 'json' ? `${jsonText(JSON.parse(text), 2)}\n` : text;
}
