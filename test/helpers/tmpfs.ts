/** A small real filesystem for storage-fault tests: a tmpfs (mount needs root), and a way to fill it. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { TMP_ROOT } from './resources.ts';

/** A tmpfs of `size` at a fresh directory, unmounted by the caller (mount needs root; undefined when refused). */
export function tmpfs(size: string): string | undefined {
  const dir = join(TMP_ROOT, `tmpfs-${process.pid}-${Math.random().toString(16).slice(2)}`);
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return dir;
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
}

/**
 * A {@link tmpfs} for the tests of one file, mounted as the file is collected (so that
 * `it.skipIf(!disk)` can read it) and unmounted after them. When mount is refused (not root), it
 * prints why the full-disk tests are skipped and returns undefined.
 */
export function tmpfsForFile(size: string): string | undefined {
  const dir = tmpfs(size);
  if (dir === undefined) console.warn(`skipping the full-disk tests: mount -t tmpfs -o size=${size} was refused (it needs root)`);
  else afterAll(() => unmount(dir));
  return dir;
}

/** Unmount a {@link tmpfs} and remove its directory. */
export function unmount(dir: string): void {
  execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
}

/** Fill the filesystem at `dir` until a write fails for space; returns the filler's path. */
export function fill(dir: string): string {
  const filler = join(dir, 'filler');
  const chunk = Buffer.alloc(64 * 1024, 1);
  let written = Buffer.alloc(0);
  for (;;) {
    try {
      written = Buffer.concat([written, chunk]);
      writeFileSync(filler, written);
    } catch {
      return filler;
    }
  }
}
