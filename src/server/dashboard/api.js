// The dashboard's client of the JSON API: requests send the token this browser keeps (writes need
// it; reads too on a server that asks for it). It is kept in localStorage, so every tab has it.

const TOKEN_KEY = 'spool.token';

/** Take a token handed over in the address's fragment (`/#token=...`), keep it for every tab, drop it from the address bar. */
export function adoptTokenFromLocation() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return;
  localStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(history.state, '', location.pathname + location.search);
}

export function token() {
  return localStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
}

/** An error the API answered with: its code and message. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? 'HTTP_ERROR';
  }
}

async function request(method, path, body) {
  const headers = { accept: 'application/json', ...authorization() };
  if (method !== 'GET') headers['content-type'] = 'application/json';
  const response = await fetch(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const parsed = readJson(await response.text());
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}

function authorization() {
  const t = token();
  return t ? { authorization: `Bearer ${t}` } : {};
}

/** A stream's address, with the token when there is one (an EventSource sends no headers). */
export function streamUrl(path) {
  const t = token();
  return t ? `${path}${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(t)}` : path;
}

/** A body as JSON; null when empty or not JSON (a proxy's error page, say). */
function readJson(text) {
  try {
    return text === '' ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

export const get = (path) => request('GET', path);
export const post = (path, body = {}) => request('POST', path, body);

/** An SVG document as text. */
export async function svg(path) {
  const response = await fetch(path, { headers: authorization() });
  const text = await response.text();
  if (!response.ok) throw new ApiError(response.status, readJson(text));
  return text;
}

export const enc = encodeURIComponent;
