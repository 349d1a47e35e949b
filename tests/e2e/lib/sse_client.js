// One HTTP request over node:http that records what a client sees and when:
// the status and headers, each SSE `data:` event (or the JSON body), and the
// moment the connection closed. For the fault, overload and soak tests, which
// need the timing of an error event and of the close, not just the content.
import http from 'node:http';

/**
 * Sends `body` (an object) to `url` + `path` with POST. Resolves `done` with
 * { status, headers, events: [string], json, closedAt, sentAt, firstDataAt,
 *   aborted, networkError } and never rejects. `firstData` resolves when the
 * first body bytes arrive. `destroy()` closes the connection (a client cancel).
 */
export function sendRequest(url, path, body, { headers = {}, method = 'POST' } = {}) {
  const result = { status: null, headers: null, events: [], json: null, closedAt: null, sentAt: Date.now(),
                   firstDataAt: null, aborted: false, networkError: null, bytes: 0 };
  let request;
  let onFirstData;
  const firstData = new Promise((resolve) => { onFirstData = resolve; });
  const done = new Promise((resolve) => {
    const finish = () => {
      if (result.closedAt === null) result.closedAt = Date.now();
      onFirstData();
      resolve(result);
    };
    request = http.request(`${url}${path}`, { method, headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      result.status = res.statusCode;
      result.headers = res.headers;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (result.firstDataAt === null) {
          result.firstDataAt = Date.now();
          onFirstData();
        }
        result.bytes += chunk.length;
        text += chunk;
        // Complete events only; keep the unfinished tail.
        let cut;
        while ((cut = text.indexOf('\n\n')) >= 0 && String(res.headers['content-type']).startsWith('text/event-stream')) {
          const event = text.slice(0, cut);
          text = text.slice(cut + 2);
          if (event.startsWith('data: ')) result.events.push(event.slice(6));
        }
      });
      res.on('end', () => {
        if (!String(res.headers['content-type']).startsWith('text/event-stream')) {
          try {
            result.json = JSON.parse(text);
          } catch {
            result.json = null;
          }
        }
        finish();
      });
      res.on('error', (e) => { result.networkError = e.message; finish(); });
      res.on('close', finish);
    });
    request.on('error', (e) => { result.networkError = e.message; finish(); });
    request.end(method === 'GET' ? undefined : JSON.stringify(body));
  });
  return {
    done,
    firstData,
    result,
    destroy: () => { result.aborted = true; request.destroy(); },
  };
}

// What a finished request amounts to, from the client's side:
// 'ok' (every choice has a finish_reason; streams end with [DONE]),
// 'rejected' (429 or 503), 'error-event' (a stream ended by an error event),
// 'cancelled' (we closed it), or 'failed' (anything else: a lost request).
export function outcomeOf(r) {
  if (r.aborted) return 'cancelled';
  if (r.status === 429 || r.status === 503) return 'rejected';
  if (r.status !== 200) return 'failed';
  if (r.json) return r.json.choices?.length > 0 && r.json.choices.every((c) => c.finish_reason) ? 'ok' : 'failed';
  const last = r.events.at(-1);
  if (last === '[DONE]') {
    const finished = r.events.filter((e) => e.startsWith('{') && JSON.parse(e).choices?.some((c) => c.finish_reason));
    return finished.length > 0 ? 'ok' : 'failed';
  }
  if (last && last.startsWith('{"error"')) return 'error-event';
  return 'failed';
}
