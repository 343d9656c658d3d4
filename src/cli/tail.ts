/**
 * `spool tail [--machine M] [--job ID] [--kind K,...] [--from-start]`: follow every job's commits
 * as they are made, by any process, one line each, until SIGINT/SIGTERM. It reads the durable
 * history in commit order (`Runtime.historySince`), as the all-jobs event stream does.
 *
 * @example
 * spool tail --machine job-lifecycle
 * spool tail --job resize-1 --from-start --json
 */
import { Command } from 'commander';
import type { FeedRecord, Runtime, TransitionOutcome } from '../index.ts';
import { OUTCOMES } from '../server/sse.ts';
import { UsageError } from './errors.ts';
import { followHistory, headSeq, type FeedFilter } from './follow.ts';
import { formatState, formatTime, jsonText } from './format.ts';
import { onShutdownSignals } from './signals.ts';
import { paintError, paintOutcome } from './style.ts';

/** What `spool tail` needs from main.ts. */
export interface TailCommandHost {
  /** A read-only runtime on `--db`. */
  withReadRuntime(command: Command, work: (runtime: Runtime) => Promise<void>): Promise<void>;
  json(command: Command): boolean;
  stdout(text: string): void;
  stderr(text: string): void;
}


interface TailOptions {
  machine?: string;
  job?: string;
  kind?: string;
  fromStart?: boolean;
}

/** Register `spool tail`. */
export function addTailCommand(program: Command, host: TailCommandHost): void {
  program
    .command('tail')
    .description("follow every job's commits as any process makes them, one line each (--json: one JSON object each), until Ctrl-C")
    .option('--machine <id>', 'only jobs of this machine')
    .option('--job <id>', 'only this job')
    .option('--kind <outcomes>', `only these outcomes, comma-separated: ${OUTCOMES.join(', ')}`)
    .option('--from-start', 'first every earlier commit (kept since schema 11), then the new ones')
    .addHelpText('after', '\nExamples:\n  spool tail\n  spool tail --job resize-1 --from-start\n  spool tail --machine job-lifecycle --kind failed --json')
    .action(async (options: TailOptions, command: Command) => {
      const outcomes = options.kind?.split(',').map((k) => k.trim());
      for (const k of outcomes ?? []) if (!OUTCOMES.includes(k as TransitionOutcome)) throw new UsageError(`--kind takes ${OUTCOMES.join(', ')}; got "${k}".`);
      const filter = {
        limit: 500,
        ...(options.machine !== undefined ? { machineId: options.machine } : {}),
        ...(options.job !== undefined ? { jobId: options.job } : {}),
        ...(outcomes !== undefined ? { outcomes: outcomes as TransitionOutcome[] } : {}),
      };
      const json = host.json(command);
      await host.withReadRuntime(command, async (runtime) => {
        const stop = new AbortController();
        const release = onShutdownSignals({ first: () => stop.abort(), second: () => undefined });
        try {
          // Not from the start: from the newest commit now (a scan that keeps no row).
          const cursor = options.fromStart ? 0 : await headSeq(runtime);
          host.stderr(`spool tail: following commits after seq ${cursor}; Ctrl-C to stop\n`);
          await followHistory(runtime, cursor, filter, stop.signal, (r) => host.stdout(json ? `${jsonText(r)}\n` : `${describeRecord(r)}\n`));
        } finally {
          release();
        }
      });
    });
}

/** One commit as one line: time, job, revision, event, outcome, the move. */
export function describeRecord(r: FeedRecord): string {
  const move = r.from === null ? formatState(r.to) : `${formatState(r.from)} -> ${formatState(r.to)}`;
  const why = r.error ? paintError(` (${r.error.code ?? r.error.name}: ${r.error.message})`) : '';
  return `${formatTime(r.at)}  ${r.jobId} (${r.machineId}) rev ${r.revision}  ${r.eventType} ${paintOutcome(r.outcome)}${why}: ${move}`;
}
