// The chat page in a real headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core; no browser is downloaded) against the real
// stack: it loads, an answer streams with its stats, Stop cancels the
// generation at the worker, and server errors are shown readably.
// Screenshots land in BUILD/e2e/ for a person to look at.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { artifactsDir, startStack } from '../lib/stack.js';

const API_KEY = 'page-test-key';
let stack;
let context;
let page;
let profileDir;

before(async () => {
  stack = await startStack({ args: ['--api-key', API_KEY] });
  profileDir = mkdtempSync(path.join(os.tmpdir(), 'ernie-e2e-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1100, height: 800 },
  });
  page = context.pages()[0] ?? await context.newPage();
  // Nothing but our server may be contacted.
  await page.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1' && url.port === String(stack.port)) return route.continue();
    return route.abort();
  });
});

after(async () => {
  await context?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  await stack?.stop();
});

const lastAnswer = () => page.locator('.message.assistant').last();

async function setMaxTokens(n) {
  await page.fill('#max-tokens', String(n));
}

async function sendMessage(text) {
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
}

describe('chat page', () => {
  test('loads; without the API key the model list shows the 401 readably', async () => {
    const response = await page.goto(stack.url + '/');
    assert.equal(response.status(), 200);
    assert.equal(await page.title(), 'ernie-serve chat');
    const banner = page.locator('#banner');
    await banner.waitFor({ state: 'visible' });
    assert.match(await banner.textContent(), /HTTP 401/);
  });

  test('the API key is sent as a bearer token, remembered, and the model list fills', async () => {
    await page.fill('#api-key', API_KEY);
    await page.dispatchEvent('#api-key', 'change');
    await page.waitForFunction(() => document.querySelector('#model').options.length > 0);
    assert.equal(await page.inputValue('#model'), stack.model);
    assert.ok(await page.locator('#banner').isHidden());
    assert.equal(await page.evaluate(() => localStorage.getItem('ernie-serve.chat.apiKey')), API_KEY);
  });

  test('a message streams an answer progressively with tok/s and TTFT', async () => {
    // Enough tokens to span several animation frames: the page renders a
    // stream once a frame, and 60 tokens of the demo model can arrive in two.
    await setMaxTokens(400);
    // Record every length the answer text takes while it streams.
    await page.evaluate(() => {
      window.__lengths = [];
      new MutationObserver(() => {
        const answers = document.querySelectorAll('.message.assistant .text');
        const last = answers[answers.length - 1];
        if (last) window.__lengths.push(last.textContent.length);
      }).observe(document.querySelector('#messages'), { childList: true, subtree: true, characterData: true });
    });
    await sendMessage('Tell me about rivers.');
    await page.locator('#send').waitFor({ state: 'visible', timeout: 60_000 });
    const stats = await lastAnswer().locator('.stats').textContent();
    assert.match(stats, /^400 tokens · [\d.]+ tok\/s · TTFT \d+ ms · stopped at max tokens$/);
    const lengths = await page.evaluate(() => [...new Set(window.__lengths)].filter((n) => n > 0));
    assert.ok(lengths.length >= 3, `text grew in steps: ${lengths}`);
    assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b));
    assert.ok((await lastAnswer().locator('.text').textContent()).length > 0);
    await page.screenshot({ path: path.join(artifactsDir, 'chat-page-desktop.png') });
  });

  test('Stop ends a long answer and the worker stops generating', async () => {
    // The demo model's random weights can sample the end-of-sentence token
    // early, finishing the answer before Stop is clicked (seen in CI): this
    // request asks the server to ignore it, so only Stop or 3,000 tokens end it.
    const chat = '**/v1/chat/completions';
    await page.route(chat, (route) => {
      const body = JSON.parse(route.request().postData());
      return route.continue({ postData: JSON.stringify({ ...body, ignore_eos: true }) });
    });
    await setMaxTokens(3000);
    await sendMessage('Now write a very long story.');
    await page.waitForFunction(() => {
      const answers = document.querySelectorAll('.message.assistant .text');
      return answers[answers.length - 1]?.textContent.length > 10;
    });
    assert.equal((await stack.workerLoad()).running, 1);
    await page.click('#stop');
    await page.locator('#send').waitFor({ state: 'visible' });
    assert.match(await lastAnswer().locator('.stats').textContent(), /stopped by you/);
    await stack.waitForIdleWorker(5000);
    await page.unroute(chat);
  });

  test('a server error is shown with its status and message', async () => {
    await setMaxTokens(1_000_000);
    await sendMessage('This asks for too many tokens.');
    const error = lastAnswer().locator('.error');
    await error.waitFor({ state: 'visible' });
    const text = await error.textContent();
    assert.match(text, /^HTTP 400/);
    assert.match(text, /max_tokens|context|length/i);
    // A wrong key: 401 on the answer itself.
    await page.fill('#api-key', 'wrong-key');
    await setMaxTokens(8);
    await sendMessage('Hello?');
    await lastAnswer().locator('.error').waitFor({ state: 'visible' });
    assert.match(await lastAnswer().locator('.error').textContent(), /^HTTP 401/);
    await page.fill('#api-key', API_KEY);
  });

  test('phone width: nothing overflows sideways', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await setMaxTokens(20);
    await sendMessage('Short answer please.');
    await page.locator('#send').waitFor({ state: 'visible', timeout: 60_000 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
    await page.screenshot({ path: path.join(artifactsDir, 'chat-page-phone.png') });
  });
});
