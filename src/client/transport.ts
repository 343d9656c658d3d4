/**
 * One JSON request to a Spool server, as the client and the remote worker make it: the bearer
 * token, the body as JSON, a refusal thrown as its error class (errors.ts), a server that cannot
 * be reached as a retryable `SPOOL_UNREACHABLE`.
 */
import { errorFromResponse, unreachable } from './errors.ts';

/** Where and how to send requests. */
export interface Transport {
  /** The server's address without a trailing slash. */
  base: string;
  token: string | undefined;
  fetch: (url: string, init: RequestInit) => Promise<Response>;
}

/** The bearer header of a transport's token (none without one). */
export function authHeaders(transport: Transport): Record<string, string> {
  return transport.token !== undefined ? { authorization: `Bearer ${transport.token}` } : {};
}

/** One request; the answer's JSON object, or its refusal thrown. */
export async function request(
  transport: Transport,
  method: 'GET' | 'POST',
  route: string,
  body?: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Record<string, unknown>> {
  const init: RequestInit = { method, headers: { ...authHeaders(transport), ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers } };
  if (body !== undefined) init.body = JSON.stringify(body);
  if (signal !== undefined) init.signal = signal;
  let response: Response;
  let text: string;
  try {
    response = await transport.fetch(transport.base + route, init);
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw unreachable(transport.base, error);
  }
  if (!response.ok) throw errorFromResponse(response.status, text);
  return JSON.parse(text) as Record<string, unknown>;
}
