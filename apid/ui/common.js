// What the console's pages share: the admin token, calls to meta-core's
// own API, Server-Sent Events read over fetch (so that the token can be
// sent as a header and never in a URL), and DOM helpers that only ever set
// text, never HTML. Nothing is fetched from anywhere but this meta-core.
'use strict';

const TOKEN_KEY = 'meta-core-admin-token';

/** The admin token this tab was given, or ''. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** `el('td', {class: 'x'}, 'text', child)`: an element; strings become text. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export const $ = (sel) => document.querySelector(sel);

/** Asks for the admin token (a dialog of the page); '' when cancelled. */
export function askToken(why) {
  const dialog = $('#token-dialog');
  const input = dialog.querySelector('input');
  dialog.querySelector('.why').textContent = why || 'This needs the admin token.';
  input.value = '';
  dialog.returnValue = '';
  dialog.querySelector('button[value=cancel]').onclick = () => dialog.close('cancel');
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      const given = dialog.returnValue === 'ok' ? input.value.trim() : '';
      if (given) sessionStorage.setItem(TOKEN_KEY, given);
      resolve(given);
    }, { once: true });
    dialog.showModal();
  });
}

/** An error meta-core answered: its status, slug and message. */
export class ApiError extends Error {
  constructor(status, slug, message) {
    super(message || `${status} ${slug}`);
    this.status = status;
    this.slug = slug;
  }
}

/**
 * Calls `method path` on meta-core; the JSON answer (or text, for
 * `{text: true}`). `admin`: send the token, and ask for it once on a 401.
 */
export async function api(method, path, { body, admin = false, text = false, raw } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    if (admin && token()) headers.Authorization = `Bearer ${token()}`;
    let payload;
    if (raw !== undefined) {
      headers['Content-Type'] = 'text/plain';
      payload = raw;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const res = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
    if (res.status === 401 && admin && attempt === 0) {
      forgetToken();
      if (await askToken('meta-core refused the admin token, or none was given.')) continue;
    }
    if (!res.ok) {
      let slug = '', message = '';
      try {
        const e = await res.json();
        slug = e.error || '';
        message = e.message || '';
      } catch { /* not an envelope */ }
      throw new ApiError(res.status, slug, message || `${method} ${path}: ${res.status}`);
    }
    if (text) return res.text();
    return res.status === 204 ? null : res.json();
  }
}

/**
 * Follows an SSE stream of meta-core: `onEvent({id, event, data})` per
 * event, `onState('live' | 'retrying' | 'stopped', detail)`. Reconnects
 * with `Last-Event-ID` (so nothing is lost or repeated) until `signal`
 * aborts it. `admin`: send the token.
 */
/** Every open stream, ended when the page goes: a browser holds six
 * connections to one origin, and a stream left open by a page in its
 * back-forward cache would keep one of them. */
const open = new Set();
window.addEventListener('pagehide', () => { for (const c of open) c.abort(); });

export async function follow(path, { onEvent, onState = () => {}, admin = false, signal: given }) {
  const mine = new AbortController();
  given?.addEventListener('abort', () => mine.abort(), { once: true });
  const signal = mine.signal;
  open.add(mine);
  try {
    await stream(path, { onEvent, onState, admin, signal });
  } finally {
    open.delete(mine);
  }
}

async function stream(path, { onEvent, onState, admin, signal }) {
  let lastId = null;
  let pause = 500;
  const state = (s, why) => { if (!signal?.aborted) onState(s, why); };
  const sleep = (ms) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
  while (!signal?.aborted) {
    try {
      const headers = { Accept: 'text/event-stream' };
      if (admin && token()) headers.Authorization = `Bearer ${token()}`;
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch(path, { headers, signal, cache: 'no-store' });
      if (!res.ok) {
        let message = `${res.status}`;
        try { message = (await res.json()).message || message; } catch { /* text */ }
        if (res.status === 401 || res.status === 404) {
          state('stopped', message);
          return;
        }
        throw new Error(message);
      }
      state('live');
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = (buffer + value).replace(/\r\n/g, '\n');
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const ev = { id: null, event: 'message', data: '' };
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let val = colon < 0 ? '' : line.slice(colon + 1);
            if (val.startsWith(' ')) val = val.slice(1);
            if (field === 'id') ev.id = val;
            else if (field === 'event') ev.event = val;
            else if (field === 'data') data.push(val);
          }
          if (data.length === 0 && ev.id === null) continue;
          ev.data = data.join('\n');
          if (ev.id) lastId = ev.id;
          // A stream that delivers is healthy: the next failure retries soon.
          pause = 500;
          onEvent(ev);
        }
      }
      throw new Error('the stream ended');
    } catch (e) {
      if (signal?.aborted) break;
      state('retrying', e.message);
      await sleep(pause);
      pause = Math.min(pause * 2, 10000);
    }
  }
}

/** A list that keeps its last `max` rows: new rows on top. */
export function boundedList(container, max) {
  return (row) => {
    container.prepend(row);
    while (container.childElementCount > max) container.lastElementChild.remove();
  };
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function clock(ms) {
  const n = Number(ms);
  return Number.isFinite(n) && n > 0 ? new Date(n).toLocaleTimeString() : '';
}

/** Shows `message` in the page's status line (an error when `bad`). */
export function say(message, bad = false) {
  const line = $('#say');
  line.textContent = message;
  line.className = bad ? 'bad' : '';
}

/** The token button of the header: shows whether one is held. */
export function tokenButton() {
  const button = $('#token');
  const paint = () => { button.textContent = token() ? 'Forget admin token' : 'Admin token…'; };
  button.addEventListener('click', async () => {
    if (token()) forgetToken();
    else await askToken('Mutating actions and the admin views need the admin token. It stays in this tab only.');
    paint();
    window.dispatchEvent(new Event('token-changed'));
  });
  paint();
}
