// A worker that hangs (SIGSTOP: alive, connected, silent). The gateway's
// --first-token-timeout-s / --stall-timeout-s end its requests with a
// deadline error instead of leaving clients stuck; once the worker runs
// again the same stack serves.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { outcomeOf, sendRequest } from '../lib/sse_client.js';
import { sleep, startStack } from '../lib/stack.js';

const timeoutS = 2;

describe('a hung worker (instant backend, --first-token-timeout-s 2 --stall-timeout-s 2)', () => {
  let stack;
  let worker;
  before(async () => {
    stack = await startStack({ args: ['--backend', 'instant', '--max-model-len', '200000', '--max-num-seqs', '4',
                                      '--first-token-timeout-s', String(timeoutS), '--stall-timeout-s', String(timeoutS)] });
    worker = stack.childPid('ernie-worker');
  });
  after(async () => {
    if (worker) {
      try {
        process.kill(worker, 'SIGCONT');
      } catch {
        // gone already
      }
    }
    await stack?.stop();
  });

  test('streams in flight end with a deadline error event, new requests get 503 or 504, within the deadline', async () => {
    const body = { model: stack.model, prompt: '27182', max_tokens: 120000, ignore_eos: true, stream: true };
    const streams = [sendRequest(stack.url, '/v1/completions', body),
                     sendRequest(stack.url, '/v1/completions', { ...body, stream: false })];
    await streams[0].firstData;
    const until = Date.now() + 5000;
    while ((await stack.workerLoad()).running < 2 && Date.now() < until) await sleep(20);
    const stoppedAt = Date.now();
    process.kill(worker, 'SIGSTOP');
    // Sent while it hangs (before the pool's poll notices): the first-token limit or "no healthy worker".
    const fresh = [sendRequest(stack.url, '/v1/completions', { model: stack.model, prompt: '1', max_tokens: 3 }),
                   sendRequest(stack.url, '/v1/completions', { model: stack.model, prompt: '2', max_tokens: 3, stream: true })];
    const [streamed, plain] = await Promise.all(streams.map((s) => s.done));
    const limitMs = timeoutS * 1000 + 1000;  // the watchdog looks four times a second
    assert.ok(streamed.closedAt - stoppedAt < limitMs, `stream closed after ${streamed.closedAt - stoppedAt} ms`);
    assert.equal(outcomeOf(streamed), 'error-event');
    assert.match(JSON.parse(streamed.events.at(-1)).error.message, /no further token from the worker within 2 s \(--stall-timeout-s\)/);
    // The non-streamed one has sent nothing to its client yet: an HTTP 504.
    assert.ok(plain.closedAt - stoppedAt < limitMs, `answered after ${plain.closedAt - stoppedAt} ms`);
    assert.equal(plain.status, 504);
    assert.match(plain.json.error.message, /within 2 s/);
    for (const r of await Promise.all(fresh.map((s) => s.done))) {
      assert.ok([503, 504].includes(r.status), `fresh request: ${r.status} ${JSON.stringify(r.json ?? r.events)}`);
      assert.ok(r.closedAt - r.sentAt < limitMs, `fresh request answered after ${r.closedAt - r.sentAt} ms`);
    }
    const deadlines = Object.entries(await stack.metrics())
      .filter(([series]) => series.startsWith('ernie_gateway_upstream_errors_total{') && series.includes('service="worker"') &&
                            series.includes('code="DEADLINE_EXCEEDED"'))
      .reduce((sum, [, value]) => sum + value, 0);
    assert.ok(deadlines >= 2, `DEADLINE_EXCEEDED counted ${deadlines} times`);

    process.kill(worker, 'SIGCONT');
    const recovered = Date.now() + 15_000;
    let r;
    do {
      await sleep(100);
      r = await sendRequest(stack.url, '/v1/completions', { model: stack.model, prompt: '1', max_tokens: 3, ignore_eos: true }).done;
    } while (r.status !== 200 && Date.now() < recovered);
    assert.equal(outcomeOf(r), 'ok');
    // Nothing left behind in the worker.
    await stack.waitForIdleWorker(10_000);
  });
});
