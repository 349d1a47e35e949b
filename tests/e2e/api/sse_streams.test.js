// Raw SSE framing and headers as curl sees them, client disconnects, and a
// slow reader next to a fast one, against the real stack.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { streamCompletion } from '../lib/raw_stream.js';
import { sleep, startStack } from '../lib/stack.js';

const run = promisify(execFile);

// curl -sN -D - ...: returns { status, headers (lower-case names), body }.
async function curl(url, { body, headers = {} } = {}) {
  const args = ['-sS', '-N', '-D', '-', '-o', '-', '--max-time', '60'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  if (body !== undefined) args.push('-H', 'Content-Type: application/json', '--data-binary', JSON.stringify(body));
  args.push(url);
  const { stdout } = await run('curl', args, { maxBuffer: 64 << 20 });
  const split = stdout.indexOf('\r\n\r\n');
  const head = stdout.slice(0, split).split('\r\n');
  const status = Number(head[0].split(' ')[1]);
  const parsed = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    parsed[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status, headers: parsed, body: stdout.slice(split + 4) };
}

describe('on the CPU backend', () => {
  let stack;
  before(async () => { stack = await startStack(); });
  after(async () => { await stack?.stop(); });

  test('SSE framing: data lines, blank-line separated JSON chunks, usage, [DONE]; headers', async () => {
    const r = await curl(`${stack.url}/v1/chat/completions`, {
      headers: { 'X-Request-Id': 'e2e-framing-1' },
      body: { model: stack.model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, stream: true,
              stream_options: { include_usage: true } },
    });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/event-stream/);
    assert.equal(r.headers['x-request-id'], 'e2e-framing-1');
    assert.match(r.headers['cache-control'] ?? '', /no-cache/);
    assert.ok(r.body.endsWith('data: [DONE]\n\n'), JSON.stringify(r.body.slice(-40)));
    const events = r.body.split('\n\n').filter(Boolean);
    for (const e of events) assert.match(e, /^data: [^\n]+$/, `one data line per event: ${JSON.stringify(e)}`);
    const payloads = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    assert.equal(payloads[0].object, 'chat.completion.chunk');
    assert.deepEqual(payloads[0].choices[0].delta, { role: 'assistant', content: '' });
    const ids = new Set(payloads.map((p) => p.id));
    assert.equal(ids.size, 1, 'every chunk carries the same id');
    const last = payloads.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 6);
    assert.equal(payloads.filter((p) => p.choices[0]?.finish_reason === 'length').length, 1);
  });

  test('a generated X-Request-Id when the client sends none; errors stay JSON even with stream: true', async () => {
    const ok = await curl(`${stack.url}/health`);
    assert.equal(ok.status, 200);
    assert.match(ok.headers['x-request-id'], /^[0-9a-zA-Z-]{8,}$/);
    const bad = await curl(`${stack.url}/v1/chat/completions`, {
      headers: { 'X-Request-Id': 'e2e-bad-2' },
      body: { model: stack.model, messages: [{ role: 'user', content: 'Hi' }], top_p: 7, stream: true },
    });
    assert.equal(bad.status, 400);
    assert.match(bad.headers['content-type'], /^application\/json/);
    assert.equal(bad.headers['x-request-id'], 'e2e-bad-2');
    const error = JSON.parse(bad.body).error;
    assert.equal(error.param, 'top_p');
    assert.equal(error.type, 'invalid_request_error');
  });

  test('client disconnect mid-stream: the worker runs nothing and holds no blocks afterwards', async () => {
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: stack.model, messages: [{ role: 'user', content: 'Tell a long story.' }], max_tokens: 3000, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) {
        if (++chunks === 5) {
          // Mid-stream the worker holds the sequence and its KV blocks.
          const busy = await stack.workerLoad();
          assert.equal(busy.running, 1);
          assert.ok(busy.kv_blocks_used > 0);
          controller.abort();
        }
      }
    } catch (e) {
      // openai ends the iteration quietly or with an abort error, by version.
      if (e.name !== 'APIUserAbortError' && e.name !== 'AbortError') throw e;
    }
    assert.ok(chunks >= 5 && chunks < 100, `the stream ended soon after the abort: ${chunks} chunks`);
    const start = Date.now();
    const idle = await stack.waitForIdleWorker(5000);
    assert.equal(idle.kv_blocks_used, 0);
    assert.ok(Date.now() - start < 5000);
    assert.equal((await stack.metrics()).ernie_gateway_streams_in_flight, 0);
  });
});

describe('on the instant backend', () => {
  let stack;
  // The instant backend makes tokens for free, so a reader that stops reading
  // fills the gateway's buffers at once: backpressure must keep that to itself.
  before(async () => { stack = await startStack({ args: ['--backend', 'instant', '--max-model-len', '65536'] }); });
  after(async () => { await stack?.stop(); });

  test('a slow reader does not slow another stream; dropping it frees the worker', async (t) => {
    const timed = async () => {
      const t0 = performance.now();
      const { completionTokens } = await streamCompletion(stack, { maxTokens: 4000 }).done;
      return { ms: performance.now() - t0, completionTokens };
    };
    const alone = await timed();
    assert.equal(alone.completionTokens, 4000);

    const slow = streamCompletion(stack, { maxTokens: 60000, pauseAfterFirstChunk: true });
    while (slow.status() === null) await sleep(10);
    await sleep(300);  // let its buffers fill
    const beside = await timed();
    assert.equal(beside.completionTokens, 4000);
    t.diagnostic(`4000-token stream alone ${alone.ms.toFixed(0)} ms, beside a stalled reader ${beside.ms.toFixed(0)} ms`);
    assert.ok(beside.ms < alone.ms * 4 + 500, `alone ${alone.ms.toFixed(0)} ms, beside a stalled reader ${beside.ms.toFixed(0)} ms`);

    // The stalled stream is still open at the worker (held back, not finished) ...
    const load = await stack.workerLoad();
    assert.equal(load.running, 1, JSON.stringify(load));
    // ... until its client goes away.
    slow.destroy();
    await stack.waitForIdleWorker(5000);
    assert.equal((await stack.metrics()).ernie_gateway_streams_in_flight, 0);
  });
});
