// kill -9 of the worker and of the tokenizer under the real launcher: clients
// in flight get an answer at once (an SSE error event and a closed stream, a
// 503), the launcher restarts the dead server, and the same gateway process
// serves again.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { outcomeOf, sendRequest } from '../lib/sse_client.js';
import { sleep, startStack } from '../lib/stack.js';

// Waits until `binary` is a child of the launcher with a pid other than `old`.
async function restartedPid(stack, binary, old, timeoutMs = 15_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const pid = stack.childPid(binary);
    if (pid !== null && pid !== old) return pid;
    await sleep(50);
  }
  throw new Error(`${binary} was not restarted:\n${stack.log().slice(-3000)}`);
}

async function waitUntilServed(stack, body, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  let last;
  while (Date.now() < until) {
    last = await sendRequest(stack.url, '/v1/completions', body).done;
    if (last.status === 200) return last;
    assert.ok(last.status === 503, `while recovering: ${last.status} ${JSON.stringify(last.json)}`);
    assert.equal(last.headers['retry-after'], '1');
    await sleep(100);
  }
  throw new Error(`not served again after ${timeoutMs} ms: ${JSON.stringify(last)}`);
}

describe('faults under ernie-serve (instant backend)', () => {
  let stack;
  before(async () => {
    stack = await startStack({ args: ['--backend', 'instant', '--max-model-len', '200000',
                                      // slow readers keep streams open: the gateway holds them back
                                      '--max-num-seqs', '8'] });
  });
  after(async () => { await stack?.stop(); });

  const long = (stream) => ({ model: stack.model, prompt: '31415', max_tokens: 120000, ignore_eos: true, stream });

  test('kill -9 of the worker mid-stream: error events and 503 within a second, restart, served again', async () => {
    const streams = [sendRequest(stack.url, '/v1/completions', long(true)),
                     sendRequest(stack.url, '/v1/completions', { ...long(true), prompt: '2718', n: 2 })];
    await Promise.all(streams.map((s) => s.firstData));
    const plain = sendRequest(stack.url, '/v1/completions', long(false));
    // The non-streamed one is running in the worker too.
    const until = Date.now() + 5000;
    while ((await stack.workerLoad()).running < 4 && Date.now() < until) await sleep(20);
    assert.equal((await stack.workerLoad()).running, 4);  // n = 2 runs two sequences
    for (const s of streams) assert.equal(s.result.status, 200);

    const old = stack.childPid('ernie-worker');
    const killedAt = Date.now();
    process.kill(old, 'SIGKILL');
    const results = await Promise.all([...streams.map((s) => s.done), plain.done]);
    for (const r of results) assert.ok(r.closedAt - killedAt < 1000, `closed ${r.closedAt - killedAt} ms after the kill`);
    for (const r of results.slice(0, 2)) {
      assert.equal(outcomeOf(r), 'error-event', JSON.stringify(r.events.slice(-2)));
      const error = JSON.parse(r.events.at(-1)).error;
      assert.match(error.message, /worker is unavailable/);
      assert.ok(!r.events.includes('[DONE]'));
    }
    assert.equal(results[2].status, 503);
    assert.equal(results[2].headers['retry-after'], '1');
    assert.match(results[2].json.error.message, /worker is unavailable/);

    // Until the new worker is up: 503 at once, never a hang.
    const during = await sendRequest(stack.url, '/v1/completions', { model: stack.model, prompt: '1', max_tokens: 2 }).done;
    assert.ok(during.status === 503 || during.status === 200, String(during.status));
    assert.ok(during.closedAt - during.sentAt < 2000);

    await restartedPid(stack, 'ernie-worker', old);
    assert.match(stack.log(), /worker exited with status 137; restarting/);
    const served = await waitUntilServed(stack, { model: stack.model, prompt: '1', max_tokens: 4, ignore_eos: true });
    assert.equal(served.json.usage.completion_tokens, 4);
    assert.equal(outcomeOf(served), 'ok');
  });

  test('kill -9 of the tokenizer: streams already generating finish, new requests get 503, then are served again', async () => {
    const running = sendRequest(stack.url, '/v1/completions', { ...long(true), max_tokens: 3000 });
    await running.firstData;
    const old = stack.childPid('ernie-tokenizer');
    const killedAt = Date.now();
    process.kill(old, 'SIGKILL');
    await sleep(50);
    const during = await sendRequest(stack.url, '/v1/completions', { model: stack.model, prompt: '99', max_tokens: 2 }).done;
    if (during.status !== 200) {  // the restarted tokenizer may be up already
      assert.equal(during.status, 503);
      assert.equal(during.headers['retry-after'], '1');
      assert.match(during.json.error.message, /tokenizer is unavailable/);
      assert.ok(during.closedAt - killedAt < 1500, `answered ${during.closedAt - killedAt} ms after the kill`);
    }
    // The stream was past the tokenizer: it ends normally.
    assert.equal(outcomeOf(await running.done), 'ok');
    await restartedPid(stack, 'ernie-tokenizer', old);
    assert.match(stack.log(), /tokenizer exited with status 137; restarting/);
    const served = await waitUntilServed(stack, { model: stack.model, prompt: '4242', max_tokens: 3, ignore_eos: true });
    assert.equal(served.json.usage.completion_tokens, 3);
  });
});
