// A streamed /v1/completions request over node:http, for tests that need
// control of the socket: a reader that stops reading, or one that goes away.
import http from 'node:http';

/**
 * Starts the request. `pauseAfterFirstChunk` stops reading after the first
 * body bytes (never resumed). Returns { done (resolves with the body byte
 * count, or rejects), status() (null until the head arrived), destroy() }.
 */
export function streamCompletion(stack, { prompt = '31415926535', maxTokens, pauseAfterFirstChunk = false }) {
  const body = JSON.stringify({ model: stack.model, prompt, max_tokens: maxTokens, ignore_eos: true, stream: true,
                               stream_options: { include_usage: true } });
  let response;
  let request;
  const done = new Promise((resolve, reject) => {
    request = http.request(`${stack.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => {
      response = res;
      let bytes = 0;
      let tail = '';  // the last few KiB: where the usage chunk is
      res.on('data', (d) => {
        bytes += d.length;
        tail = (tail + d.toString()).slice(-8192);
        if (pauseAfterFirstChunk) res.pause();
      });
      res.on('end', () => {
        const usage = tail.split('\n\n').filter((e) => e.startsWith('data: {') && e.includes('"usage":{')).at(-1);
        resolve({ bytes, completionTokens: usage ? JSON.parse(usage.slice(6)).usage.completion_tokens : null });
      });
      res.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
  done.catch(() => {});  // a destroyed request rejects; callers that care await `done`
  return {
    done,
    status: () => (response ? response.statusCode : null),
    headers: () => response?.headers,
    destroy: () => request.destroy(),
  };
}
