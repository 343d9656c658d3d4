/**
 * `spool serve`: the HTTP API (app.ts) listening on Node, by default on 127.0.0.1, over a
 * runtime the caller opened (the CLI's, or a worker's with `spool worker --serve`).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { ValidationError, type Runtime } from '../index.ts';
import { createApp } from './app.ts';
import { isLoopback, resolveToken, type ListenAddress, type WorkerToken } from './auth.ts';
import { ChangeSignal } from './changes.ts';
import { StreamHub, type StreamOptions, type StreamState } from './sse.ts';

/** Options of {@link createServer}. */
export interface ServerOptions extends Partial<StreamOptions> {
  runtime: Runtime;
  /** Default 127.0.0.1: only this machine can connect. */
  host?: string;
  /** Host names (`name`, or `name:port`) requests may use besides the address listened on (a proxy's, say). */
  allowedHosts?: readonly string[];
  /** Reads of the API need the token too. Default: true beyond loopback, where it cannot be false. */
  readsNeedToken?: boolean;
  /** Default 7420; 0 picks a free port (see `url`). */
  port?: number;
  /** The bearer token writes need. Default: `SPOOL_TOKEN`, else a random one (`tokenGenerated`). */
  token?: string;
  /** Tokens for remote workers (`--worker-token`): each may call the worker routes only, for its activities. */
  workerTokens?: readonly WorkerToken[];
  /** How long a remote worker's claim lasts without a heartbeat, in ms. Default 30000. */
  claimMs?: number;
  /** Largest request body in bytes. Default 1 MiB. */
  bodyLimitBytes?: number;
  /** How often streams look for other processes' commits, in ms. Default 100. */
  pollMs?: number;
  /** Unexpected errors of routes (they reach the client as SPOOL_INTERNAL only). Default: console.error. */
  onInternalError?: (error: unknown) => void;
}

/** A listening server. */
export interface SpoolServer {
  /** `http://host:port` as bound. */
  url: string;
  token: string;
  /**
   * The dashboard's address. With a token made up here it carries it in the fragment
   * (`/#token=...`): the page keeps it in localStorage and drops it from the address bar; a
   * fragment is never sent to a server, so it reaches no log or Referer. Never on a server
   * listening beyond loopback.
   */
  dashboardUrl: string;
  /** True when the token was made up here: print it, nobody else knows it. */
  tokenGenerated: boolean;
  /** True when reads need the token too. */
  readsNeedToken: boolean;
  /** True when it listens beyond loopback (other machines may connect). */
  exposed: boolean;
  /** The event streams open now. */
  streams(): StreamState[];
  /** End the streams and stop listening (once; later calls wait for the first); the runtime stays open (its owner closes it). */
  close(): Promise<void>;
}

/** The defaults of the stream options: a heartbeat every 15 s, a stalled client dropped after 30 s. */
export const STREAM_DEFAULTS: StreamOptions = { heartbeatMs: 15_000, stallMs: 30_000, pageSize: 100, maxStreams: 1_000 };

/**
 * Listen with the HTTP API over `runtime`.
 *
 * @example
 * const server = await createServer({ runtime, port: 0 });
 * console.log(server.url, server.token);
 */
export async function createServer(options: ServerOptions): Promise<SpoolServer> {
  const { token, generated } = resolveToken(options.token);
  const host = options.host ?? '127.0.0.1';
  const exposed = !isLoopback(host);
  if (exposed && options.readsNeedToken === false) throw new ValidationError(`A server on ${host} is reachable from other machines: its reads need the token. Listen on 127.0.0.1 to serve reads without one.`);
  const readsNeedToken = options.readsNeedToken ?? exposed;
  let listening: ListenAddress | undefined;
  if (options.claimMs !== undefined) options.runtime.remote.claimMs = options.claimMs;
  const changes = new ChangeSignal(options.runtime, options.pollMs ?? 100);
  const hub = new StreamHub(options.runtime, changes, {
    heartbeatMs: options.heartbeatMs ?? STREAM_DEFAULTS.heartbeatMs,
    stallMs: options.stallMs ?? STREAM_DEFAULTS.stallMs,
    pageSize: options.pageSize ?? STREAM_DEFAULTS.pageSize,
    maxStreams: options.maxStreams ?? STREAM_DEFAULTS.maxStreams,
  });
  const app = createApp({
    runtime: options.runtime,
    token,
    bodyLimitBytes: options.bodyLimitBytes ?? 1024 * 1024,
    streams: hub,
    changes,
    workerTokens: options.workerTokens ?? [],
    readsNeedToken,
    allowedHosts: options.allowedHosts ?? [],
    address: () => listening,
    onInternalError: options.onInternalError ?? ((error) => console.error('spool serve: unexpected error', error)),
  });
  const server = createAdaptorServer({ fetch: app.fetch }) as Server;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 7420, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    changes.close(); // the port is taken, say: nothing is left listening or subscribed
    throw error;
  }
  let closing: Promise<void> | undefined;
  const stop = async () => {
    hub.closeAll();
    changes.close();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Streams end on their own above; a client that stopped reading is not waited for.
    server.closeAllConnections();
    await closed;
  };
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  listening = { host: shownHost, port: address.port };
  const url = `http://${shownHost}:${address.port}`;
  return {
    url,
    token,
    // Beyond loopback the address may be shared or logged: the token stays out of it.
    dashboardUrl: `${url}/${generated && !exposed ? `#token=${encodeURIComponent(token)}` : ''}`,
    tokenGenerated: generated,
    readsNeedToken,
    exposed,
    streams: () => hub.open(),
    close: () => (closing ??= stop()),
  };
}
