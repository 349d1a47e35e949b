// Security on the real stack: the API key on every /v1 route, probes open or
// keyed by --probe-auth, request limits (body, prompt tokens, max_tokens, n,
// stop strings, logit_bias) each a 400/413 naming the field and the limit,
// and the request's `model` never taken as a path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { binDir, demoModel, freePort, sleep, startStack } from '../lib/stack.js';

const key = 'sk-limits-test';
const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };

describe('API keys and request limits (instant backend, small limits)', () => {
  let stack;
  before(async () => {
    stack = await startStack({ args: ['--backend', 'instant', '--api-key', key, '--max-body-bytes', '20000',
                                      '--max-prompt-tokens', '40', '--max-tokens-limit', '100', '--max-n', '3',
                                      '--max-stop-strings', '2', '--max-stop-string-bytes', '8',
                                      '--max-logit-bias', '2'] });
  });
  after(async () => { await stack?.stop(); });

  const post = (route, body, headers = auth) =>
    fetch(`${stack.url}${route}`, { method: 'POST', headers, body: JSON.stringify(body) });

  test('every /v1 route, known or not, refuses a request without a key or with a wrong one', async () => {
    const routes = [['POST', '/v1/chat/completions'], ['POST', '/v1/completions'], ['GET', '/v1/models'],
                    ['GET', '/v1/models/demo-model'], ['POST', '/v1/embeddings'], ['GET', '/v1'], ['GET', '/v1/'],
                    ['POST', '/tokenize'], ['POST', '/detokenize']];
    const body = JSON.stringify({ model: demoModel, prompt: 'x', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
    for (const [method, route] of routes) {
      for (const headers of [{}, { Authorization: 'Bearer wrong' }, { Authorization: key }]) {
        const r = await fetch(`${stack.url}${route}`, { method, headers, body: method === 'POST' ? body : undefined });
        assert.equal(r.status, 401, `${method} ${route} with ${JSON.stringify(headers)}`);
        assert.equal((await r.json()).error.type, 'authentication_error');
      }
    }
    // With the key the known routes answer.
    assert.equal((await fetch(`${stack.url}/v1/models`, { headers: auth })).status, 200);
    assert.equal((await post('/v1/completions', { model: demoModel, prompt: '1', max_tokens: 2 })).status, 200);
  });

  test('probes stay open by default (--probe-auth open)', async () => {
    for (const route of ['/health', '/ready', '/version', '/metrics']) {
      assert.equal((await fetch(`${stack.url}${route}`)).status, 200, route);
    }
  });

  async function expectError(response, status, param, ...words) {
    assert.equal(response.status, status);
    const error = (await response.json()).error;
    if (param !== undefined) assert.equal(error.param, param);
    for (const word of words) assert.ok(error.message.includes(word), `"${error.message}" lacks "${word}"`);
  }

  test('a body over --max-body-bytes is a 413 naming the limit', async () => {
    const r = await post('/v1/completions', { model: demoModel, prompt: 'a'.repeat(30000), max_tokens: 1 });
    await expectError(r, 413, null, '20000', '--max-body-bytes');
  });

  test('prompt tokens over --max-prompt-tokens: 400 naming prompt / messages and the limit', async () => {
    await expectError(await post('/v1/completions', { model: demoModel, prompt: Array(41).fill(7), max_tokens: 1 }),
                      400, 'prompt', '41 tokens', '40', '--max-prompt-tokens');
    await expectError(await post('/v1/completions', { model: demoModel, prompt: ['1', Array(50).fill(7)], max_tokens: 1 }),
                      400, 'prompt[1]', '--max-prompt-tokens');
    const long = '3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4 6 2 6 4 3 3 8 3 2 7 9 5';
    await expectError(await post('/v1/chat/completions', { model: demoModel, messages: [{ role: 'user', content: long }],
                                                           max_tokens: 1 }), 400, 'messages', '--max-prompt-tokens');
    // At the limit it is served.
    assert.equal((await post('/v1/completions', { model: demoModel, prompt: Array(40).fill(7), max_tokens: 1 })).status, 200);
  });

  test('max_tokens, n, stop strings and logit_bias over their limits: 400 naming the field and the limit', async () => {
    // Digits only (ids 3-12): valid whatever vocabulary the instant backend is given.
    const base = { model: demoModel, prompt: '1' };
    await expectError(await post('/v1/completions', { ...base, max_tokens: 101 }), 400, 'max_tokens', '100',
                      '--max-tokens-limit');
    await expectError(await post('/v1/chat/completions', { model: demoModel, messages: [{ role: 'user', content: 'x' }],
                                                           max_completion_tokens: 500 }),
                      400, 'max_completion_tokens', '--max-tokens-limit');
    await expectError(await post('/v1/completions', { ...base, max_tokens: 1, n: 4 }), 400, 'n', '3');
    await expectError(await post('/v1/completions', { ...base, max_tokens: 1, stop: ['a', 'b', 'c'] }), 400, 'stop',
                      '3 strings', '--max-stop-strings');
    await expectError(await post('/v1/completions', { ...base, max_tokens: 1, stop: ['a', '123456789'] }), 400,
                      'stop[1]', '9 bytes', '--max-stop-string-bytes');
    await expectError(await post('/v1/completions', { ...base, max_tokens: 1, stop: '123456789' }), 400, 'stop',
                      '--max-stop-string-bytes');
    await expectError(await post('/v1/completions', { ...base, max_tokens: 1, logit_bias: { 1: 1, 2: 1, 3: 1 } }), 400,
                      'logit_bias', '3 entries', '--max-logit-bias');
    // Within every limit the same request is served.
    const ok = await post('/v1/completions', { ...base, max_tokens: 100, n: 3, stop: ['a', '12345678'],
                                               logit_bias: { 1: 1, 2: 1 }, ignore_eos: true });
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).choices.length, 3);
  });

  test("a request's model naming a path is a name, refused unless it is the served one", async () => {
    const demoDir = path.join(path.dirname(binDir), 'e2e', demoModel);
    for (const model of [demoDir, `${demoDir}/`, '/etc', '../demo-model', './demo-model', `file://${demoDir}`]) {
      for (const route of ['/v1/completions', '/v1/chat/completions']) {
        const r = await post(route, { model, prompt: 'x', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
        assert.equal(r.status, 404, `${route} model ${model}`);
        const error = (await r.json()).error;
        assert.equal(error.code, 'model_not_found');
        assert.equal(error.param, 'model');
      }
    }
  });
});

describe('--probe-auth keyed (a lone ernie-gateway)', () => {
  let gateway;
  let url;
  before(async () => {
    const [port, nobody1, nobody2] = await Promise.all([freePort(), freePort(), freePort()]);
    const demoDir = path.join(path.dirname(binDir), 'e2e', demoModel);
    gateway = spawn(path.join(binDir, 'ernie-gateway'),
      ['--model', demoDir, '--tokenizer', `127.0.0.1:${nobody1}`, '--worker', `127.0.0.1:${nobody2}`,
       '--port', String(port), '--api-key', key, '--probe-auth', 'keyed'], { stdio: 'ignore' });
    url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 200; i++) {
      try {
        await fetch(`${url}/version`);
        return;
      } catch {
        await sleep(25);
      }
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

  test('/health, /ready, /version and /metrics need the key', async () => {
    for (const route of ['/health', '/ready', '/version', '/metrics']) {
      assert.equal((await fetch(`${url}${route}`)).status, 401, route);
      const keyed = await fetch(`${url}${route}`, { headers: { Authorization: `Bearer ${key}` } });
      assert.equal(keyed.status, route === '/ready' ? 503 : 200, route);  // no tokenizer or worker: not ready
    }
  });
});
