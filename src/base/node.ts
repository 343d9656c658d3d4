/**
 * The engine's one way to a Node built-in: `process.getBuiltinModule` (Node 20.16+), asked at run
 * time, never a static import, so the engine bundles for a browser or a Worker with no polyfill.
 * Elsewhere (a browser, a Worker, a Durable Object, an older Node) it gives `undefined` and the
 * caller uses the web-standard way.
 */

/** What the engine uses of `node:crypto` (the one-shot hash, Node 20.12+). */
export interface NodeCrypto {
  hash?: (algorithm: string, data: string, encoding: 'hex') => string;
}

/** What the engine uses of `node:os`. */
export interface NodeOs {
  hostname(): string;
}

/** What the engine uses of Node's `process`. */
export interface NodeProcess {
  pid: number;
  env: Record<string, string | undefined>;
  kill(pid: number, signal?: string | number): boolean;
  getBuiltinModule?: (id: string) => unknown;
}

/** Node's `process`, or `undefined` off Node. */
export const nodeProcess: NodeProcess | undefined = (globalThis as { process?: NodeProcess }).process;

/** What the engine uses of `node:buffer`. */
export interface NodeBuffer {
  Buffer: { byteLength(text: string): number };
}

interface Builtins {
  'node:buffer': NodeBuffer;
  'node:crypto': NodeCrypto;
  'node:os': NodeOs;
}

/** A Node built-in when on Node (20.16+), else `undefined`. */
export function nodeBuiltin<K extends keyof Builtins>(id: K): Builtins[K] | undefined {
  return nodeProcess?.getBuiltinModule?.(id) as Builtins[K] | undefined;
}

/** Let a timer not hold Node's process open (`unref`); nothing where a timer is a number (a browser). */
export function unref(timer: unknown): void {
  (timer as { unref?: () => void }).unref?.();
}

/** Call `fn` once this turn's I/O has run (`setImmediate`), or after a zero timeout where there is none. Returns its cancel. */
export function afterIo(fn: () => void): () => void {
  // Read off globalThis: the name exists only in Node's types (examples/browser checks without them).
  const host = globalThis as { setImmediate?: (fn: () => void) => unknown; clearImmediate?: (immediate: unknown) => void };
  if (typeof host.setImmediate === 'function') {
    const immediate = host.setImmediate(fn);
    return () => host.clearImmediate?.(immediate);
  }
  const timeout = setTimeout(fn, 0);
  return () => clearTimeout(timeout);
}
