/**
 * JSON text of the values one commit writes, each made once. A commit writes some values in two
 * places: the event's payload in its inbox row and in its history row, the new state value in the
 * job row and as the history's `to`, the accepted event and its (unredacted) inbox payload. The
 * step hands the same object to both, so text made for it once is reused by identity.
 *
 * Text is kept only between `begin()` and `end()` (one synchronous commit, so nothing can change
 * an object in between); outside, `of` is `JSON.stringify`.
 */
export class CommitJson {
  #on = false;
  readonly #values: unknown[] = [];
  readonly #texts: string[] = [];

  /** Start keeping text (a commit begins). */
  begin(): void {
    this.#on = true;
  }

  /** Forget every text kept (a commit ended, written or refused). */
  end(): void {
    this.#on = false;
    this.#values.length = 0;
    this.#texts.length = 0;
  }

  /** `JSON.stringify(value)`, made once per value per commit. */
  of(value: unknown): string {
    if (!this.#on) return JSON.stringify(value);
    const i = this.#values.indexOf(value);
    if (i >= 0) return this.#texts[i]!;
    const text = JSON.stringify(value);
    this.#values.push(value);
    this.#texts.push(text);
    return text;
  }
}
