// The controller's HTTP API as the browser reaches it: the bearer token
// kept for this tab only (sessionStorage), or the session of a sign-in at
// the identity provider (an HttpOnly cookie the page never sees, and the
// CSRF token every request that changes something carries), errors as
// ApiError with the HTTP status, and the event stream read with fetch(),
// because EventSource cannot send an Authorization header.

const TOKEN_KEY = 'skep.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// csrf is the session's CSRF token, from whoami; kept in memory only.
let csrf = '';

export function setSession(session) {
  csrf = session ? session.csrfToken : '';
}

// authHeaders are the credentials of one request: the token, or else
// the session cookie (sent by the browser) and, for a method that may
// change something, the session's CSRF token.
function authHeaders(method) {
  if (token()) return { Authorization: 'Bearer ' + token() };
  if (csrf && method !== 'GET' && method !== 'HEAD') return { 'X-Skep-CSRF': csrf };
  return {};
}

// ApiError is a refused or failed call: status 0 when nothing answered.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// call sends one JSON request and returns the decoded answer.
export async function call(method, path, body) {
  const headers = { Accept: 'application/json', ...authHeaders(method) };
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, 'network', 'the controller did not answer (' + err.message + ')');
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    throw new ApiError(resp.status, (data && data.code) || 'http', (data && data.message) || resp.statusText);
  }
  return data;
}

export const get = (path) => call('GET', path);
export const post = (path, body) => call('POST', path, body === undefined ? {} : body);

export const app = (name, rest = '') => '/api/v1/applications/' + encodeURIComponent(name) + rest;

// FrameParser turns the text of a server-sent event stream into frames
// {id, event, data}. Lines starting with ':' are comments (the server's
// heartbeats); a blank line ends a frame; a frame without data is not
// dispatched, but its id still counts.
export class FrameParser {
  constructor(onFrame, onComment) {
    this.onFrame = onFrame;
    this.onComment = onComment || (() => {});
    this.buf = '';
    this.lastId = '';
    this.reset();
  }

  reset() {
    this.event = '';
    this.data = [];
  }

  push(chunk) {
    this.buf += chunk;
    for (;;) {
      const m = /\r\n|\n|\r/.exec(this.buf);
      // A lone '\r' at the end may be the first half of "\r\n".
      if (!m || (m[0] === '\r' && m.index === this.buf.length - 1)) return;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  line(line) {
    if (line === '') {
      if (this.data.length > 0) {
        this.onFrame({ id: this.lastId, event: this.event || 'message', data: this.data.join('\n') });
      }
      this.reset();
      return;
    }
    if (line.startsWith(':')) {
      this.onComment(line.slice(1).trim());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'id': if (!value.includes('\0')) this.lastId = value; break;
      case 'event': this.event = value; break;
      case 'data': this.data.push(value); break;
      default: break; // retry and unknown fields are ignored
    }
  }
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// EventStream keeps one connection to GET /api/v1/events open and
// reconnects with backoff, sending Last-Event-ID so the server replays
// what was missed. onState gets 'connecting', 'live', 'reconnecting',
// 'unauthorized' or 'stopped'; onEvent gets each frame with its JSON data
// decoded as frame.event.
export class EventStream {
  constructor({ onEvent, onState, staleAfter = 45000 }) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.staleAfter = staleAfter;
    this.lastId = '';
    this.abort = new AbortController();
  }

  start() {
    this.run();
  }

  stop() {
    this.abort.abort();
    this.onState('stopped');
  }

  async run() {
    const signal = this.abort.signal;
    let delay = 1000;
    let first = true;
    while (!signal.aborted) {
      this.onState(first ? 'connecting' : 'reconnecting');
      const attempt = new AbortController();
      const stop = () => attempt.abort();
      signal.addEventListener('abort', stop, { once: true });
      let watchdog = 0;
      const feed = () => {
        clearTimeout(watchdog);
        // No byte, not even a heartbeat, for this long: the connection is dead.
        watchdog = setTimeout(() => attempt.abort(), this.staleAfter);
      };
      try {
        const headers = { Accept: 'text/event-stream', ...authHeaders('GET') };
        if (this.lastId) headers['Last-Event-ID'] = this.lastId;
        const resp = await fetch('/api/v1/events', { headers, signal: attempt.signal, cache: 'no-store', credentials: 'same-origin' });
        if (resp.status === 401) {
          this.onState('unauthorized');
          return;
        }
        if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
        this.onState('live', !first);
        delay = 1000;
        feed();
        const parser = new FrameParser((frame) => {
          if (frame.id) this.lastId = frame.id;
          let event = null;
          try { event = JSON.parse(frame.data); } catch { return; }
          this.onEvent({ ...frame, event });
        });
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          feed();
          parser.push(value);
        }
      } catch {
        // Dropped, refused or timed out: try again below.
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', stop);
      }
      first = false;
      if (signal.aborted) return;
      this.onState('reconnecting');
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 15000);
    }
  }
}
