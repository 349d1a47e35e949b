// 429 when the worker's queues are full, and 503 while the gateway is not
// ready, on real processes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import OpenAI from 'openai';
import { streamCompletion } from '../lib/raw_stream.js';
import { binDir, demoModel, freePort, sleep, startStack } from '../lib/stack.js';

describe('429 with full queues (instant backend, --max-num-seqs 1 --max-waiting-requests 1)', () => {
  let stack;
  before(async () => {
    stack = await startStack({ args: ['--backend', 'instant', '--max-num-seqs', '1', '--max-waiting-requests', '1',
                                      '--max-model-len', '65536'] });
  });
  after(async () => { await stack?.stop(); });

  test('one runs, one waits, the rest get 429 with Retry-After; the SDK raises RateLimitError', async () => {
    // Two long streams whose readers stop reading keep the one running slot
    // and the one waiting slot busy (the gateway holds them back, not the worker's queue).
    const running = streamCompletion(stack, { maxTokens: 60000, pauseAfterFirstChunk: true });
    while (running.status() === null) await sleep(10);
    assert.equal(running.status(), 200);
    const waiting = streamCompletion(stack, { maxTokens: 60000, pauseAfterFirstChunk: true });
    const until = Date.now() + 5000;
    let load;
    do {
      load = await stack.workerLoad();
    } while (load.running + load.waiting < 2 && Date.now() < until);
    assert.deepEqual([load.running, load.waiting], [1, 1], JSON.stringify(load));
    const post = () => fetch(`${stack.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: stack.model, prompt: '2718281828', max_tokens: 8, stream: true }),
    });
    const others = await Promise.all(Array.from({ length: 3 }, post));
    assert.deepEqual(others.map((r) => r.status), [429, 429, 429]);
    for (const r of others) {
      assert.equal(r.headers.get('retry-after'), '1');
      assert.match(r.headers.get('content-type'), /^application\/json/);
      const error = (await r.json()).error;
      assert.ok(error.message.length > 0);
    }
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await assert.rejects(client.completions.create({ model: stack.model, prompt: '1', max_tokens: 2 }),
      (e) => e instanceof OpenAI.RateLimitError && e.status === 429);
    running.destroy();
    waiting.destroy();
    await stack.waitForIdleWorker(10_000);
    // With the queue empty again the same request succeeds.
    const ok = await client.completions.create({ model: stack.model, prompt: '1', max_tokens: 2 });
    assert.equal(ok.usage.completion_tokens, 2);
  });
});

describe('503 before the gateway is ready', () => {
  let gateway;
  let url;
  before(async () => {
    // A gateway whose tokenizer and worker do not exist: alive, never ready.
    const [port, nobody1, nobody2] = await Promise.all([freePort(), freePort(), freePort()]);
    const demoDir = path.join(path.dirname(binDir), 'e2e', demoModel);
    gateway = spawn(path.join(binDir, 'ernie-gateway'),
      ['--model', demoDir, '--tokenizer', `127.0.0.1:${nobody1}`, '--worker', `127.0.0.1:${nobody2}`, '--port', String(port)],
      { stdio: 'ignore' });
    url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 200; i++) {
      try {
        if ((await fetch(`${url}/health`)).status === 200) return;
      } catch {
        // not listening yet
      }
      await sleep(25);
    }
    throw new Error('ernie-gateway did not start');
  });
  after(async () => {
    if (gateway && gateway.exitCode === null) {
      const exited = new Promise((r) => gateway.on('exit', r));
      gateway.kill('SIGTERM');
      await exited;
    }
  });

  test('/health is 200, /ready and the API are 503 with an OpenAI error', async () => {
    const ready = await fetch(`${url}/ready`);
    assert.equal(ready.status, 503);
    const state = await ready.json();
    assert.equal(state.ready, false);
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await assert.rejects(client.chat.completions.create({ model: demoModel, messages: [{ role: 'user', content: 'x' }] }),
      (e) => e.status === 503 && typeof e.message === 'string' && e.message.length > 0);
  });
});
