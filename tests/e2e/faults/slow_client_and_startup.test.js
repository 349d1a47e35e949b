// A client that stops reading is cut after --write-timeout-s with bounded
// buffers while a reader beside it is unaffected; and start-up failures
// (missing model, unreadable weights, a disk that fills while the demo
// checkpoint is written) end ernie-serve with a message naming the path and
// a distinct exit code (README: "Reliability and security guarantees").
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { outcomeOf, sendRequest } from '../lib/sse_client.js';
import { binDir, demoModel, freePort, rssKiB, sleep, startStack } from '../lib/stack.js';

describe('a client that stops reading (instant backend, --write-timeout-s 2)', () => {
  let stack;
  before(async () => {
    stack = await startStack({ args: ['--backend', 'instant', '--max-model-len', '400000', '--max-num-seqs', '4',
                                      '--max-tokens-limit', '400000', '--write-timeout-s', '2'] });
  });
  after(async () => { await stack?.stop(); });

  test('its connection is reset after the write timeout, buffers stay bounded, a reader beside it finishes', async () => {
    const gateway = stack.childPid('ernie-gateway');
    const rssBefore = rssKiB(gateway);
    // The stalled client: reads the head and the first bytes, then nothing.
    let response;
    let endedAt = null;
    let sawDone = false;
    let received = 0;
    const stalled = http.request(`${stack.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' } },
      (res) => {
        response = res;
        res.on('data', (d) => {
          received += d.length;
          sawDone ||= d.toString().includes('[DONE]');
          if (received === d.length) res.pause();  // the first chunk only, until we resume below
        });
        res.on('close', () => { endedAt ??= Date.now(); });
        res.on('error', () => { endedAt ??= Date.now(); });
      });
    stalled.on('error', () => { endedAt ??= Date.now(); });
    stalled.end(JSON.stringify({ model: stack.model, prompt: '1', max_tokens: 390000, ignore_eos: true, stream: true }));
    const startedAt = Date.now();
    while (received === 0) await sleep(10);
    // A normal reader at the same time.
    const reader = await sendRequest(stack.url, '/v1/completions',
                                     { model: stack.model, prompt: '2', max_tokens: 4000, ignore_eos: true, stream: true }).done;
    assert.equal(outcomeOf(reader), 'ok');
    // The gateway stops pulling tokens for the stalled stream at 256 KiB buffered; once the
    // kernel's buffers are full too, a write waits 2 s and the connection is reset. Filling the
    // kernel's send buffer is most of the wait: it grows to ~3.9 MB at ~180 KB/s (one stream of
    // the instant backend, ~1,000 tokens/s), ~22 s on the 2-core CI machine and once past the 25 s
    // this bound used to be, so it is 60 s (a gateway that never cuts the stream still fails
    // here; the ctest timeout is 180 s).
    let metrics;
    const waitFrom = Date.now();
    const until = waitFrom + 60_000;
    do {
      await sleep(100);
      metrics = await stack.metrics();
    } while ((metrics.ernie_gateway_streams_in_flight > 0 || !(metrics.ernie_gateway_client_disconnects_total >= 1)) &&
             Date.now() < until);
    const cutAt = Date.now();
    assert.equal(metrics.ernie_gateway_streams_in_flight, 0,
                 `the stalled client was never cut off (waited ${cutAt - waitFrom} ms after the reader finished)`);
    assert.ok(metrics.ernie_gateway_client_disconnects_total >= 1);
    assert.ok(cutAt - startedAt >= 2000, `cut after ${cutAt - startedAt} ms, before the 2 s write timeout`);
    const rssAfter = rssKiB(gateway);
    assert.ok(rssAfter - rssBefore < 64 * 1024, `gateway RSS grew from ${rssBefore} to ${rssAfter} KiB`);
    // The worker dropped the sequence: nothing running, every KV block back.
    await stack.waitForIdleWorker(10_000);
    // The client, reading again, finds a reset connection at once, not megabytes of backlog and no [DONE].
    const resumedAt = Date.now();
    response.resume();
    while (endedAt === null && Date.now() - resumedAt < 5000) await sleep(20);
    assert.ok(endedAt !== null && endedAt - resumedAt < 2000, 'the stalled connection was not reset');
    assert.equal(sawDone, false);
  });
});

// Runs ernie-serve with `args` (via sh, so a test can set limits first) and
// resolves with its exit code and output.
function runServe(args, { shellPrefix = '' } = {}) {
  return new Promise((resolve) => {
    const quoted = args.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
    const child = spawn('sh', ['-c', `${shellPrefix} exec '${path.join(binDir, 'ernie-serve')}' ${quoted}`],
                        { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d) => { log += d; });
    child.stderr.on('data', (d) => { log += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 25_000);
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, log }); });
  });
}

describe('start-up failures: clear errors and distinct exit codes', () => {
  let dir;
  before(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'ernie-startup-')); });
  after(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  test('a model folder that does not exist: exit 3, naming it', async () => {
    const missing = path.join(dir, 'no-such-model');
    const { code, log } = await runServe([missing, '--port', String(await freePort())]);
    assert.equal(code, 3, log);
    assert.match(log, new RegExp(`model folder ${missing} does not exist`));
  });

  test('a model whose weights cannot be read: exit 4, naming the file', async () => {
    const demoDir = path.join(path.dirname(binDir), 'e2e', demoModel);
    const copy = path.join(dir, 'unreadable-model');
    mkdirSync(copy);
    for (const name of readdirSync(demoDir)) copyFileSync(path.join(demoDir, name), path.join(copy, name));
    const weights = path.join(copy, 'model.safetensors');
    if (process.getuid() === 0) {
      // root reads any file: a folder in its place cannot be read by anyone.
      rmSync(weights);
      mkdirSync(weights);
    } else {
      chmodSync(weights, 0o000);
    }
    const { code, log } = await runServe([copy, '--port', String(await freePort())]);
    assert.equal(code, 4, log);
    assert.match(log, new RegExp(`cannot (open|read) ${weights}: (Permission denied|Is a directory)`));
  });

  test('the disk fills while the demo checkpoint is written: exit 5, naming the file, nothing half-written left', async () => {
    const target = path.join(dir, 'demo-on-a-full-disk');
    // A file size limit of 64 KiB makes every larger write fail with EFBIG,
    // as ENOSPC would (SIGXFSZ ignored, so the write returns the error).
    const { code, log } = await runServe(['--demo', '--demo-dir', target, '--port', String(await freePort())],
                                         { shellPrefix: "trap '' XFSZ; ulimit -f 128;" });
    assert.equal(code, 5, log);
    assert.match(log, new RegExp(`cannot write '${target}/[a-z_.]+'`));
    assert.match(log, new RegExp(`could not write the demo checkpoint in ${target}`));
    assert.equal(existsSync(target), false);
  });
});
