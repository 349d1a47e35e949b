// ernie-serve chat page: streams /v1/chat/completions (SSE over fetch +
// ReadableStream), keeps the conversation, and shows per answer the time to
// first token and the decode speed. Plain script, no build step, nothing
// fetched from outside this server.
'use strict';

const $ = (id) => document.getElementById(id);
const els = {
  model: $('model'), settings: $('settings'), toggleSettings: $('toggle-settings'),
  system: $('system-prompt'), temperature: $('temperature'), temperatureValue: $('temperature-value'),
  maxTokens: $('max-tokens'), apiKey: $('api-key'), clear: $('clear'), banner: $('banner'),
  messages: $('messages'), hint: $('empty-hint'), composer: $('composer'), prompt: $('prompt'),
  send: $('send'), stop: $('stop'),
};

// Settings survive a reload (the API key too: it is this browser's, for this server).
const STORE = 'ernie-serve.chat.';
const saved = (key, fallback) => localStorage.getItem(STORE + key) ?? fallback;
const persist = (key, value) => localStorage.setItem(STORE + key, value);

const history = [];        // [{role, content}] of finished turns sent with every request
let controller = null;     // AbortController of the answer streaming now

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = els.apiKey.value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

// "HTTP 401 Unauthorized: message" from an OpenAI error body (or whatever came).
async function describeHttpError(response) {
  let detail = '';
  try {
    const text = await response.text();
    try {
      const json = JSON.parse(text);
      detail = json?.error?.message ?? json?.message ?? text;
      if (json?.error?.param) detail += ` (${json.error.param})`;
    } catch {
      detail = text;
    }
  } catch {
    // body unreadable: the status alone
  }
  const status = `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
  return detail ? `${status}: ${detail}` : status;
}

function showBanner(text) {
  els.banner.textContent = text;
  els.banner.hidden = !text;
}

async function loadModels() {
  const previous = saved('model', '');
  try {
    const response = await fetch('/v1/models', { headers: headers() });
    if (!response.ok) {
      showBanner(`Could not list models: ${await describeHttpError(response)}`);
      return;
    }
    const { data } = await response.json();
    els.model.replaceChildren(...data.map((m) => {
      const option = document.createElement('option');
      option.value = m.id;
      option.textContent = m.max_model_len ? `${m.id} (${m.max_model_len.toLocaleString()} tokens)` : m.id;
      return option;
    }));
    if (data.some((m) => m.id === previous)) els.model.value = previous;
    showBanner('');
  } catch (e) {
    showBanner(`Could not reach the server: ${e.message}`);
  }
}

function scrollToEnd() {
  els.messages.scrollTop = els.messages.scrollHeight;
}

function addMessage(role, text) {
  els.hint.hidden = true;
  const box = document.createElement('div');
  box.className = `message ${role}`;
  const body = document.createElement('div');
  body.className = 'text';
  body.textContent = text;
  box.append(body);
  els.messages.append(box);
  scrollToEnd();
  return box;
}

function addLine(box, className, text) {
  const line = document.createElement('div');
  line.className = className;
  line.textContent = text;
  box.append(line);
  scrollToEnd();
  return line;
}

function formatStats({ tokens, ttftMs, tokensPerSecond, finish }) {
  const parts = [`${tokens} token${tokens === 1 ? '' : 's'}`];
  if (tokensPerSecond !== null) parts.push(`${tokensPerSecond.toFixed(1)} tok/s`);
  if (ttftMs !== null) parts.push(`TTFT ${ttftMs.toFixed(0)} ms`);
  if (finish) parts.push(finish === 'length' ? 'stopped at max tokens' : finish === 'stopped' ? 'stopped by you' : finish);
  return parts.join(' · ');
}

function setStreaming(on) {
  els.send.hidden = on;
  els.stop.hidden = !on;
  els.prompt.disabled = false;
}

// Reads an SSE body, calling onEvent(parsedJson) per data event until [DONE].
async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += decoder.decode(value, { stream: true });
    let end;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
      if (!data) continue;
      if (data === '[DONE]') return;
      onEvent(JSON.parse(data));
    }
  }
}

async function send(text) {
  const userTurn = { role: 'user', content: text };
  history.push(userTurn);
  addMessage('user', text);
  const box = addMessage('assistant', '');
  box.classList.add('streaming');
  const textEl = box.querySelector('.text');
  const statsEl = addLine(box, 'stats', 'waiting for the first token…');
  // The answer reaches the page at most once a frame. Re-rendering the
  // whole answer and re-measuring the page for every token made the page's
  // work grow with the answer: at ~800 tok/s a long answer kept the main
  // thread busy enough that the Stop button could not be pressed.
  const answerText = document.createTextNode('');
  textEl.append(answerText);
  let unrendered = '';
  let frameRequested = false;

  const messages = [];
  const system = els.system.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history);
  const maxTokens = parseInt(els.maxTokens.value, 10);
  const request = {
    model: els.model.value,
    messages,
    temperature: parseFloat(els.temperature.value),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (Number.isFinite(maxTokens)) request.max_tokens = maxTokens;

  controller = new AbortController();
  setStreaming(true);
  const started = performance.now();
  let firstAt = null;
  let lastAt = null;
  let chunks = 0;
  let usageTokens = null;
  let finish = null;
  let answer = '';
  let failed = null;
  const stats = () => {
    const tokens = usageTokens ?? chunks;
    const decodeSeconds = firstAt !== null && lastAt !== null ? (lastAt - firstAt) / 1000 : 0;
    // Decode speed: tokens after the first over the time after the first.
    const tokensPerSecond = tokens > 1 && decodeSeconds > 0 ? (tokens - 1) / decodeSeconds : null;
    return formatStats({ tokens, ttftMs: firstAt === null ? null : firstAt - started, tokensPerSecond, finish });
  };
  const render = () => {
    frameRequested = false;
    if (unrendered) answerText.appendData(unrendered);
    unrendered = '';
    statsEl.textContent = stats();
    scrollToEnd();
  };
  try {
    const response = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(request), signal: controller.signal,
    });
    if (!response.ok) {
      failed = await describeHttpError(response);
    } else {
      await readEvents(response.body, (event) => {
        if (event.error) {
          failed = `Server error: ${event.error.message ?? JSON.stringify(event.error)}`;
          return;
        }
        if (event.usage) usageTokens = event.usage.completion_tokens;
        for (const choice of event.choices ?? []) {
          const delta = choice.delta?.content ?? '';
          if (delta) {
            const now = performance.now();
            if (firstAt === null) firstAt = now;
            lastAt = now;
            chunks += 1;
            answer += delta;
            unrendered += delta;
          }
          if (choice.finish_reason) finish = choice.finish_reason;
        }
        if (!frameRequested) {
          frameRequested = true;
          requestAnimationFrame(render);
        }
      });
    }
  } catch (e) {
    if (e.name === 'AbortError') finish = 'stopped';
    else failed = `Request failed: ${e.message}`;
  } finally {
    controller = null;
    render();  // what arrived since the last frame (a frame still requested finds nothing left)
    setStreaming(false);
    box.classList.remove('streaming');
  }
  if (failed) {
    // The failed turn is not sent again with the next message.
    history.splice(history.indexOf(userTurn), 1);
    statsEl.remove();
    addLine(box, 'error', failed);
    if (!answer) textEl.remove();
  } else {
    if (answer) history.push({ role: 'assistant', content: answer });
    statsEl.textContent = stats();
  }
  els.prompt.focus();
}

function autoGrow() {
  els.prompt.style.height = 'auto';
  els.prompt.style.height = `${Math.min(els.prompt.scrollHeight + 2, window.innerHeight * 0.4)}px`;
}

function init() {
  els.system.value = saved('system', '');
  els.temperature.value = saved('temperature', '0.8');
  els.maxTokens.value = saved('maxTokens', '256');
  els.apiKey.value = saved('apiKey', '');
  els.temperatureValue.textContent = els.temperature.value;

  els.system.addEventListener('input', () => persist('system', els.system.value));
  els.temperature.addEventListener('input', () => {
    els.temperatureValue.textContent = els.temperature.value;
    persist('temperature', els.temperature.value);
  });
  els.maxTokens.addEventListener('input', () => persist('maxTokens', els.maxTokens.value));
  els.apiKey.addEventListener('change', () => {
    persist('apiKey', els.apiKey.value.trim());
    loadModels();
  });
  els.model.addEventListener('change', () => persist('model', els.model.value));
  els.toggleSettings.addEventListener('click', () => {
    els.settings.hidden = !els.settings.hidden;
    els.toggleSettings.setAttribute('aria-expanded', String(!els.settings.hidden));
  });
  els.clear.addEventListener('click', () => {
    if (controller) controller.abort();
    history.length = 0;
    els.messages.replaceChildren(els.hint);
    els.hint.hidden = false;
  });
  els.composer.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = els.prompt.value.trim();
    if (!text || controller) return;
    els.prompt.value = '';
    autoGrow();
    send(text);
  });
  els.prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      els.composer.requestSubmit();
    }
  });
  els.prompt.addEventListener('input', autoGrow);
  els.stop.addEventListener('click', () => controller?.abort());
  // Wide screens show the settings at once; phones keep them folded.
  if (window.matchMedia('(min-width: 641px)').matches) els.toggleSettings.click();
  loadModels();
}

init();
