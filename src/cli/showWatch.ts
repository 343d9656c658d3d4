/**
 * `spool show <job> --watch`: the job as `spool show` prints it, then one line per commit as any
 * process makes it (read from the durable history feed, as `spool tail` and the event streams
 * read it), until the job reaches a final state (then its end, and exit 0) or Ctrl-C.
 *
 * It appends rather than redraws: the lines stay in the terminal's scrollback and read the same in
 * a pipe or a log file. With `--json`: one JSON object a line, the job's details first, then each
 * history record, then `{"type":"ended","job":...}`.
 */
import type { JobDetails, Runtime } from '../index.ts';
import { redactDetails, redactJob } from '../views/redacted.ts';
import { describeStatus, formatBlock, formatState, jsonText, keyValues } from './format.ts';
import { onShutdownSignals } from './signals.ts';
import { paintHeading } from './style.ts';
import { followFeed, headSeq } from './follow.ts';
import { describeRecord } from './tail.ts';

/** Where the watch writes, and how the first view is rendered. */
export interface WatchOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  json: boolean;
  /** The job as `spool show` prints it. */
  render: (details: JobDetails) => string;
}

/** Print `jobId` and follow its commits until it ends or SIGINT/SIGTERM. */
export async function watchJob(runtime: Runtime, jobId: string, out: WatchOutput): Promise<void> {
  const stop = new AbortController();
  const release = onShutdownSignals({ first: () => stop.abort(), second: () => undefined });
  try {
    // The feed's head before the details: a commit in between is in both, and skipped below by revision.
    const cursor = await headSeq(runtime);
    const details = redactDetails(runtime, await runtime.details(jobId));
    out.stdout(out.json ? `${jsonText({ type: 'details', ...details })}\n` : `${out.render(details)}\n`);
    if (details.job.final) return end(out, details.job);
    if (!out.json) out.stdout(`\n${paintHeading(`watching ${jobId}:`)} each commit as it is made; Ctrl-C to stop\n`);
    let shown = details.job.revision;
    await followFeed(runtime, cursor, { jobId, limit: 500 }, stop.signal, async (records) => {
      const fresh = records.filter((r) => r.revision > shown);
      for (const r of fresh) out.stdout(out.json ? `${jsonText({ type: 'record', ...r })}\n` : `${describeRecord(r)}\n`);
      if (fresh.length === 0) return false;
      shown = fresh.at(-1)!.revision;
      const job = await runtime.get(jobId);
      // Final by a commit this page did not hold yet: the feed brings that record next.
      if (!job.final || job.revision > shown) return false;
      end(out, redactJob(runtime, job));
      return true;
    });
  } finally {
    release();
  }
}

function end(out: WatchOutput, job: JobDetails['job']): void {
  if (out.json) {
    out.stdout(`${jsonText({ type: 'ended', job })}\n`);
    return;
  }
  const pairs: [string, string][] = [
    ['status', describeStatus(job)],
    ['state', formatState(job.value)],
    ['revision', String(job.revision)],
  ];
  if (job.output !== undefined) pairs.push(['output', formatBlock(job.output)]);
  out.stdout(`\n${paintHeading(`${job.id} has ended:`)}\n${keyValues(pairs)}\n`);
}
