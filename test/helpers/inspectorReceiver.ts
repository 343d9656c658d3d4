/**
 * A local stand-in for Stately's inspector: a WebSocket server (ws) that collects the JSON frames
 * `@statelyai/inspect`'s WebSocket inspector (or `spool inspect`) sends, and checks them the way
 * the inspector reads them.
 */
import { WebSocketServer } from 'ws';

/** One frame as `@statelyai/inspect` 0.7.2 sends it (a `StatelyInspectionEvent`). */
export interface Frame {
  type: '@xstate.actor' | '@xstate.event' | '@xstate.snapshot';
  sessionId: string;
  rootId?: string;
  parentId?: string;
  sourceId?: string;
  name?: string;
  definition?: string;
  _version: string;
  createdAt: string;
  event?: { type: string; [k: string]: unknown };
  snapshot?: { status?: string; value?: unknown; context?: unknown };
}

/** The receiver: its URL, the frames so far, a wait on them, and close. */
export interface Receiver {
  url: string;
  frames: Frame[];
  /** Resolves once `predicate(frames)` holds (checked on every frame). */
  until(predicate: (frames: Frame[]) => boolean): Promise<Frame[]>;
  close(): Promise<void>;
}

/** Listen on 127.0.0.1 on a free port. */
export async function startReceiver(): Promise<Receiver> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const frames: Frame[] = [];
  const waiting = new Set<() => void>();
  wss.on('connection', (socket) => {
    socket.on('message', (data) => {
      frames.push(JSON.parse(String(data)) as Frame);
      for (const w of [...waiting]) w();
    });
  });
  const address = wss.address();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return {
    url: `ws://127.0.0.1:${address.port}`,
    frames,
    until: (predicate) =>
      new Promise((resolve) => {
        const check = () => {
          if (!predicate(frames)) return;
          waiting.delete(check);
          resolve(frames);
        };
        waiting.add(check);
        check();
      }),
    close: () =>
      new Promise((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close(() => resolve());
      }),
  };
}

/**
 * What Stately's inspector relies on, checked over a stream of frames: every frame is one of the
 * three kinds with `_version` and `createdAt`; an actor is registered (with a name, a definition
 * it can parse, its root and parent) before any event or snapshot of it; an event's source is a
 * registered actor or none; every event of an actor is followed by its snapshot, before its next
 * event. Returns the problems found (none: an empty list).
 */
export function statelyProblems(frames: readonly Frame[]): string[] {
  const problems: string[] = [];
  const actors = new Map<string, Frame>();
  const awaitingSnapshot = new Map<string, string>();
  frames.forEach((f, i) => {
    const at = `frame ${i} (${f.type} ${f.sessionId})`;
    if (typeof f._version !== 'string' || typeof f.createdAt !== 'string' || typeof f.sessionId !== 'string') problems.push(`${at}: no _version/createdAt/sessionId`);
    if (f.type === '@xstate.actor') {
      if (typeof f.name !== 'string' || typeof f.definition !== 'string') problems.push(`${at}: no name or definition`);
      else if (typeof (JSON.parse(f.definition) as { id?: unknown }).id !== 'string') problems.push(`${at}: definition without an id`);
      if (typeof f.rootId !== 'string') problems.push(`${at}: no rootId`);
      if (f.parentId !== undefined && !actors.has(f.parentId)) problems.push(`${at}: parent ${f.parentId} not registered before`);
      if (f.snapshot === undefined) problems.push(`${at}: no snapshot`);
      actors.set(f.sessionId, f);
      return;
    }
    if (!actors.has(f.sessionId)) problems.push(`${at}: actor not registered before`);
    if (f.event === undefined || typeof f.event.type !== 'string') problems.push(`${at}: no event object`);
    if (f.type === '@xstate.event') {
      if (f.sourceId !== undefined && !actors.has(f.sourceId)) problems.push(`${at}: source ${f.sourceId} not registered`);
      if (awaitingSnapshot.has(f.sessionId)) problems.push(`${at}: previous event ${awaitingSnapshot.get(f.sessionId)} had no snapshot`);
      awaitingSnapshot.set(f.sessionId, f.event?.type ?? '?');
    } else {
      if (awaitingSnapshot.get(f.sessionId) !== f.event?.type) problems.push(`${at}: snapshot for ${f.event?.type} follows no such event`);
      awaitingSnapshot.delete(f.sessionId);
      if (f.snapshot === undefined || !('value' in f.snapshot)) problems.push(`${at}: snapshot without a value`);
    }
  });
  return problems;
}

/** The frames of one actor, as `kind:event type:state` words (actor: `actor:<name>`), for comparing a story. */
export function storyOf(frames: readonly Frame[], sessionId: string): string[] {
  return frames
    .filter((f) => f.sessionId === sessionId)
    .map((f) => {
      if (f.type === '@xstate.actor') return `actor:${f.name ?? ''}`;
      if (f.type === '@xstate.event') return `event:${f.event?.type ?? ''}<-${f.sourceId ?? 'outside'}`;
      return `snapshot:${JSON.stringify(f.snapshot?.value)}`;
    });
}
