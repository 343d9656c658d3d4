/**
 * The Worker's side of the small RPC between a test (or the bench) and a Worker in a page
 * (test/helpers/wasmPage.ts): each message `{ id, cmd, args }` runs `handlers[cmd](args)`, and the
 * Worker answers `{ id, ok, value }` or `{ id, ok: false, error }`, one call at a time.
 */
export type Handlers = Record<string, (args: any) => unknown>;

/** The Worker's global scope, as far as the RPC uses it (the project compiles without the DOM's types). */
const scope = globalThis as unknown as { onmessage: (e: { data: { id: number; cmd: string; args: unknown } }) => void; postMessage(message: unknown): void };

export function serveRpc(handlers: Handlers): void {
  let queue: Promise<unknown> = Promise.resolve();
  scope.onmessage = (e) => {
    const { id, cmd, args } = e.data;
    queue = queue.then(async () => {
      try {
        const handler = handlers[cmd];
        if (!handler) throw new Error(`no such command: ${cmd}`);
        scope.postMessage({ id, ok: true, value: await handler(args) });
      } catch (error) {
        scope.postMessage({ id, ok: false, error: error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error) });
      }
    });
  };
  scope.postMessage({ ready: true });
}
