// The official `openai` npm client against the real stack (CPU backend, demo
// model): chat and completions, streamed and not, n > 1, stop strings,
// logprobs, usage in the stream, and the error statuses the gateway answers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from '../lib/stack.js';

const API_KEY = 'e2e-secret-key';
const MAX_BODY_BYTES = 262144;
let stack;
let client;

before(async () => {
  stack = await startStack({ args: ['--api-key', API_KEY, '--max-body-bytes', String(MAX_BODY_BYTES)] });
  client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60_000 });
});

after(async () => {
  await stack?.stop();
});

const hello = [{ role: 'user', content: 'Write one sentence about rivers.' }];

async function collectChat(stream) {
  const texts = {};
  const finish = {};
  const chunks = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const choice of chunk.choices) {
      texts[choice.index] = (texts[choice.index] ?? '') + (choice.delta?.content ?? '');
      if (choice.finish_reason) finish[choice.index] = choice.finish_reason;
    }
  }
  return { texts, finish, chunks };
}

describe('models', () => {
  test('GET /v1/models lists the served model with its length', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    assert.deepEqual(ids, [stack.model]);
    assert.equal(page.data[0].object, 'model');
    assert.ok(page.data[0].max_model_len > 0);
  });
});

describe('chat completions', () => {
  test('non-streamed: message, finish_reason length, exact usage', async () => {
    const r = await client.chat.completions.create({ model: stack.model, messages: hello, max_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, stack.model);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 8);
    assert.ok(r.usage.prompt_tokens > 5);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  });

  test('streamed with include_usage: role first, deltas, usage chunk last, same text as non-streamed', async () => {
    const request = { model: stack.model, messages: hello, max_tokens: 12, temperature: 0 };
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const { texts, finish, chunks } = await collectChat(stream);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.ok(chunks.length >= 3);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null, 'usage is null on content chunks');
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.completion_tokens, 12);
    assert.equal(last.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.equal(texts[0], whole.choices[0].message.content);
    assert.equal(finish[0], 'length');
  });

  test('n = 3: three choices, numbered, each with its own tokens', async () => {
    const r = await client.chat.completions.create({ model: stack.model, messages: hello, max_tokens: 6, n: 3, temperature: 1, seed: 11 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of r.choices) assert.ok(c.message.content.length > 0);
    assert.equal(r.usage.completion_tokens, 18);
  });

  test('n = 2 streamed: deltas for both indices, both finish', async () => {
    const stream = await client.chat.completions.create({
      model: stack.model, messages: hello, max_tokens: 5, n: 2, temperature: 1, seed: 5, stream: true,
    });
    const { texts, finish } = await collectChat(stream);
    assert.deepEqual(Object.keys(texts).sort(), ['0', '1']);
    assert.equal(finish[0], 'length');
    assert.equal(finish[1], 'length');
  });

  test('a stop string truncates the text (streamed and not) and finishes with stop', async () => {
    const base = { model: stack.model, messages: hello, temperature: 0 };
    const full = (await client.chat.completions.create({ ...base, max_tokens: 24 })).choices[0].message.content;
    assert.ok(full.length >= 6, `need some text to cut: ${JSON.stringify(full)}`);
    // A stop string taken from the middle; the answer must end right before its first occurrence.
    const stop = [...full].slice(3, 5).join('');
    const expected = full.slice(0, full.indexOf(stop));
    const cut = await client.chat.completions.create({ ...base, max_tokens: 24, stop: [stop, 'never-appears-xyz'] });
    assert.equal(cut.choices[0].message.content, expected);
    assert.equal(cut.choices[0].finish_reason, 'stop');
    const { texts, finish } = await collectChat(await client.chat.completions.create({ ...base, max_tokens: 24, stop, stream: true }));
    assert.equal(texts[0], expected);
    assert.equal(finish[0], 'stop');
  });

  test('logprobs with top_logprobs: one entry per token, alternatives best first', async () => {
    const r = await client.chat.completions.create({
      model: stack.model, messages: hello, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3,
    });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 5);
    for (const entry of content) {
      assert.equal(typeof entry.token, 'string');
      assert.ok(entry.logprob <= 0);
      assert.equal(entry.top_logprobs.length, 3);
      const lps = entry.top_logprobs.map((t) => t.logprob);
      assert.deepEqual(lps, [...lps].sort((a, b) => b - a));
      // Greedy: the chosen token is the best alternative.
      assert.ok(Math.abs(entry.logprob - lps[0]) < 1e-4);
    }
    assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
  });
});

describe('completions', () => {
  test('non-streamed: text, usage; a list of prompts gives one choice each', async () => {
    const r = await client.completions.create({ model: stack.model, prompt: ['The river', 'A mountain'], max_tokens: 4, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    for (const c of r.choices) {
      assert.ok(c.text.length > 0);
      assert.equal(c.finish_reason, 'length');
    }
    assert.equal(r.usage.completion_tokens, 8);
  });

  test('streamed with include_usage matches the non-streamed text', async () => {
    const request = { model: stack.model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
    const whole = await client.completions.create(request);
    const stream = await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) text += c.text;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(usage.completion_tokens, 10);
  });

  test('echo and logprobs', async () => {
    const r = await client.completions.create({ model: stack.model, prompt: 'Hello there', max_tokens: 3, temperature: 0, echo: true, logprobs: 2 });
    assert.ok(r.choices[0].text.startsWith('Hello there'));
    const lp = r.choices[0].logprobs;
    assert.ok(lp.tokens.length >= 3);
    assert.equal(lp.tokens.length, lp.token_logprobs.length);
    const generated = lp.top_logprobs.filter((t) => t !== null);
    assert.ok(generated.length >= 3);
    for (const alternatives of generated.slice(-3)) assert.ok(Object.keys(alternatives).length >= 1 && Object.keys(alternatives).length <= 2);
  });
});

describe('errors', () => {
  test('400 names the bad field', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: stack.model, messages: hello, temperature: -1 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature' && /temperature/.test(e.message));
    await assert.rejects(
      client.chat.completions.create({ model: stack.model, messages: [{ role: 'wizard', content: 'x' }] }),
      (e) => e.status === 400 && e.param === 'messages[0].role');
  });

  test('400 when prompt + max_tokens exceed the model length', async () => {
    const [model] = (await client.models.list()).data;
    await assert.rejects(
      client.chat.completions.create({ model: stack.model, messages: hello, max_tokens: model.max_model_len + 1 }),
      (e) => e.status === 400 && /max_tokens|context|length/i.test(e.message));
  });

  test('401 with a wrong API key and without one', async () => {
    const wrong = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'not-the-key', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const r = await fetch(`${stack.url}/v1/models`);
    assert.equal(r.status, 401);
    assert.ok((await r.json()).error.message.length > 0);
  });

  test('404 for an unknown model (model_not_found) and an unknown route', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'no-such-model', messages: hello }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found' && e.param === 'model');
    const r = await fetch(`${stack.url}/v1/no-such-route`, { headers: { Authorization: `Bearer ${API_KEY}` } });
    assert.equal(r.status, 404);
    assert.equal(typeof (await r.json()).error.message, 'string');
  });

  test('413 for a body over --max-body-bytes', async () => {
    const big = 'x'.repeat(MAX_BODY_BYTES + 1000);
    await assert.rejects(
      client.chat.completions.create({ model: stack.model, messages: [{ role: 'user', content: big }] }),
      (e) => e.status === 413);
  });

  test('the stack is idle after all of the above', async () => {
    await stack.waitForIdleWorker();
    const m = await stack.metrics();
    assert.equal(m.ernie_gateway_streams_in_flight, 0);
  });
});
