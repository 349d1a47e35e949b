// ernie-serve soak test (a tool, not a CI test): the real stack at saturation
// for N minutes with random sampling parameters and random client
// cancellations, then the checks of README "Reliability and security
// guarantees": no failed or lost request (each one ends with a finish_reason,
// a 429/503, or our own cancel), the worker's KV blocks all free again at the
// end, and each process's RSS growing less than 5% from the end of the
// warm-up to the end. Writes a log (one JSON line per sample and a summary).
//
//   tools/soak/run [--minutes 30] [--warmup-minutes 3] [--clients 32] [--backend cpu|instant]
//                  [--max-num-seqs 8] [--max-waiting-requests 8] [--cancel-rate 0.1] [--kv-cache-bytes 16777216]
//                  [--log FILE] [--seed S]   (the build: $ERNIE_BUILD_DIR, default build/)
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { outcomeOf, sendRequest } from '../../tests/e2e/lib/sse_client.js';
import { buildDir, rssKiB, sleep, startStack } from '../../tests/e2e/lib/stack.js';

const { values: opts } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    'warmup-minutes': { type: 'string' },
    clients: { type: 'string' },
    backend: { type: 'string', default: 'cpu' },
    'max-num-seqs': { type: 'string', default: '8' },
    'max-waiting-requests': { type: 'string', default: '8' },
    'cancel-rate': { type: 'string', default: '0.1' },
    // Small on purpose: the whole pool is in use (and its pages resident) well before the warm-up
    // ends, so RSS growth after it measures leaks, not first touches of the KV cache.
    'kv-cache-bytes': { type: 'string', default: String(16 << 20) },
    'request-timeout-s': { type: 'string', default: '120' },
    log: { type: 'string' },
    seed: { type: 'string', default: String(Date.now() % 100000) },
  },
});
const minutes = Number(opts.minutes);
const warmupMinutes = opts['warmup-minutes'] !== undefined ? Number(opts['warmup-minutes']) : Math.min(3, minutes / 10);
const capacity = Number(opts['max-num-seqs']) + Number(opts['max-waiting-requests']);
const clients = opts.clients !== undefined ? Number(opts.clients) : 2 * capacity;  // saturation: twice what fits
const cancelRate = Number(opts['cancel-rate']);
const requestTimeoutMs = Number(opts['request-timeout-s']) * 1000;
const logFile = opts.log ?? path.join(buildDir, 'soak', `soak-${new Date().toISOString().replace(/[:.]/g, '-')}.log`);
mkdirSync(path.dirname(logFile), { recursive: true });
writeFileSync(logFile, '');
const log = (record) => {
  const line = JSON.stringify({ t: new Date().toISOString(), ...record });
  appendFileSync(logFile, `${line}\n`);
  console.log(line);
};

// A small deterministic generator (mulberry32), so a run can be repeated with --seed.
let state = Number(opts.seed) >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const between = (lo, hi) => lo + random() * (hi - lo);
const intBetween = (lo, hi) => Math.floor(between(lo, hi + 1));

// A random request: chat or completions, streamed or not, random sampling.
function randomRequest(model) {
  const chat = random() < 0.5;
  const body = {
    model,
    max_tokens: intBetween(1, 160),
    stream: random() < 0.6,
    temperature: pick([0, 0.3, 0.8, 1.0, 1.5]),
    top_p: pick([1, 0.9, 0.5, 0.1]),
    n: pick([1, 1, 1, 2, 3]),
  };
  if (random() < 0.3) body.top_k = intBetween(1, 50);
  if (random() < 0.3) body.seed = intBetween(0, 1 << 30);
  if (random() < 0.2) body.presence_penalty = between(-1, 1);
  if (random() < 0.2) body.frequency_penalty = between(-1, 1);
  if (random() < 0.2) body.repetition_penalty = between(0.8, 1.3);
  if (random() < 0.2) body.stop = ['e', ' t', '\n'].slice(0, intBetween(1, 3));
  if (random() < 0.2) body.logprobs = chat ? true : intBetween(0, 5);
  if (chat && body.logprobs === true) body.top_logprobs = intBetween(0, 5);
  if (random() < 0.3) body.ignore_eos = true;
  if (body.stream && random() < 0.5) body.stream_options = { include_usage: true };
  const words = Array.from({ length: intBetween(1, 60) }, () => pick(['the', 'ERNIE', 'model', '42', 'serves', 'tokens', 'fast', '世界', 'ok']));
  if (chat) body.messages = [{ role: 'user', content: words.join(' ') }];
  else body.prompt = words.join(' ');
  return { route: chat ? '/v1/chat/completions' : '/v1/completions', body };
}

const stack = await startStack({ args: ['--backend', opts.backend, '--max-num-seqs', opts['max-num-seqs'],
                                        '--max-waiting-requests', opts['max-waiting-requests'], '--max-model-len', '1024',
                                        '--kv-cache-bytes', opts['kv-cache-bytes']] });
const pids = { gateway: stack.childPid('ernie-gateway'), worker: stack.childPid('ernie-worker'),
               tokenizer: stack.childPid('ernie-tokenizer') };
const rss = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, rssKiB(pid)]));
log({ event: 'start', minutes, warmupMinutes, clients, capacity, backend: opts.backend, cancelRate, seed: opts.seed,
      pids, rss: rss(), url: stack.url });

const tally = { ok: 0, rejected: 0, cancelled: 0, failed: 0, lost: 0, tokens: 0 };
const failures = [];
const startedAt = Date.now();
const warmupEnd = startedAt + warmupMinutes * 60_000;
const end = startedAt + minutes * 60_000;
let rssAtWarmup = null;

async function client() {
  while (Date.now() < end) {
    const { route, body } = randomRequest(stack.model);
    const request = sendRequest(stack.url, route, body);
    const cancelAfter = random() < cancelRate ? between(5, 1500) : null;
    const cancelTimer = cancelAfter !== null ? setTimeout(request.destroy, cancelAfter) : null;
    let lost = false;
    const lostTimer = setTimeout(() => { lost = true; request.destroy(); }, requestTimeoutMs);
    const r = await request.done;
    clearTimeout(cancelTimer);
    clearTimeout(lostTimer);
    if (lost) {
      tally.lost++;
      failures.push({ kind: 'lost', route, body, status: r.status });
      continue;
    }
    const outcome = outcomeOf(r);
    if (outcome === 'ok') {
      tally.ok++;
      const usage = r.json?.usage ?? r.events.map((e) => (e.startsWith('{') ? JSON.parse(e).usage : null)).findLast(Boolean);
      tally.tokens += usage?.completion_tokens ?? 0;
    } else if (outcome === 'rejected') {
      tally.rejected++;
      if (r.headers['retry-after'] !== '1') failures.push({ kind: 'no Retry-After', status: r.status });
      await sleep(between(200, 1000));  // as Retry-After: 1 allows
    } else if (outcome === 'cancelled') {
      tally.cancelled++;
    } else {
      tally.failed++;
      failures.push({ kind: outcome, route, body, status: r.status, json: r.json, tail: r.events.slice(-2),
                      error: r.networkError });
    }
  }
}

const sampler = setInterval(async () => {
  const now = Date.now();
  if (rssAtWarmup === null && now >= warmupEnd) {
    rssAtWarmup = rss();
    log({ event: 'warmup-end', rss: rssAtWarmup, tally: { ...tally } });
  }
  let load = null;
  try {
    load = await stack.workerLoad();
  } catch (e) {
    load = { error: e.message };
  }
  log({ event: 'sample', elapsed_s: Math.round((now - startedAt) / 1000), rss: rss(), load, tally: { ...tally } });
}, 15_000);

await Promise.all(Array.from({ length: clients }, client));
clearInterval(sampler);
if (rssAtWarmup === null) rssAtWarmup = rss();

// Every request has ended; the worker must hold no sequence and every KV block must be free again.
let load;
const idleBy = Date.now() + 30_000;
do {
  load = await stack.workerLoad();
  if (load.running === 0 && load.waiting === 0 && load.kv_blocks_free === load.kv_blocks_total) break;
  await sleep(200);
} while (Date.now() < idleBy);
const rssEnd = rss();
const growth = Object.fromEntries(Object.keys(pids).map((k) => [k, (rssEnd[k] - rssAtWarmup[k]) / rssAtWarmup[k]]));
const elapsedS = (Date.now() - startedAt) / 1000;
const checks = {
  no_failed_or_lost: tally.failed === 0 && tally.lost === 0 && failures.length === 0,
  kv_blocks_full: load.running === 0 && load.waiting === 0 && load.kv_blocks_free === load.kv_blocks_total,
  rss_growth_under_5_percent: Object.values(growth).every((g) => g < 0.05),
};
log({ event: 'summary', elapsed_s: elapsedS, tally, requests: tally.ok + tally.rejected + tally.cancelled + tally.failed + tally.lost,
      completed_per_s: tally.ok / elapsedS, tokens_per_s: tally.tokens / elapsedS, load, rss_warmup: rssAtWarmup,
      rss_end: rssEnd, rss_growth: growth, checks, failures: failures.slice(0, 20) });
await stack.stop();
const passed = Object.values(checks).every(Boolean);
console.log(`soak ${passed ? 'PASSED' : 'FAILED'}; log: ${logFile}`);
process.exit(passed ? 0 : 1);
