// Talking to the server that served this page (same origin): the API key, JSON requests and the
// streamed Chat Completions. A 401 calls the registered onUnauthorized (the key dialog).
let key = localStorage.getItem('cadenza.apiKey') || '';
let onUnauthorized = () => {};
export const getKey = () => key;
export function setKey(k) {
  key = k;
  if (k) localStorage.setItem('cadenza.apiKey', k); else localStorage.removeItem('cadenza.apiKey');
}
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function errorOf(res) {
  let msg = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body && body.error) msg = body.error.message || JSON.stringify(body.error);
  } catch { /* not JSON */ }
  if (res.status === 401) onUnauthorized();
  return new ApiError(res.status, msg);
}

export async function getJson(path) {
  const res = await fetch(path, { headers: headers(false) });
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

export async function getText(path) {
  const res = await fetch(path, { headers: headers(false) });
  if (!res.ok) throw await errorOf(res);
  return res.text();
}

// Streams POST /v1/chat/completions (stream: true). onChunk gets each parsed SSE data object.
// Resolves when the stream ends; rejects with ApiError, or an AbortError when `signal` aborts
// (the connection closes, and the server aborts the generation).
export async function streamChat(body, signal, onChunk) {
  const res = await fetch('/v1/chat/completions', {
    method: 'POST', headers: headers(true), body: JSON.stringify(body), signal,
  });
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        const obj = JSON.parse(data);
        if (obj.error) throw new ApiError(500, obj.error.message || JSON.stringify(obj.error));
        onChunk(obj);
      }
    }
  }
}
