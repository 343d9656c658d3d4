/** Work on one job serialised inside this process (other processes are fenced by revision and lease). */
export class JobLocks {
  /** By job: the tail of its queue of work. */
  readonly #tails = new Map<string, Promise<void>>();

  /** Run `work` once the job's earlier work has settled. */
  run<T>(jobId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(jobId) ?? Promise.resolve();
    const run = previous.then(work);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(jobId, tail);
    void tail.then(() => {
      if (this.#tails.get(jobId) === tail) this.#tails.delete(jobId);
    });
    return run;
  }

  /** Whether any job has work queued or running. */
  get busy(): boolean {
    return this.#tails.size > 0;
  }

  /** The work queued now, to wait for. */
  pending(): Promise<void>[] {
    return [...this.#tails.values()];
  }
}
