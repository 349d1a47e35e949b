// The internal gRPC links: loopback by default, and TLS / mutual TLS between
// the gateway and the tokenizer and worker with certificates made here by
// openssl (a CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate, and a second CA that signed nothing of ours).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { listeningSockets, startServer } from '../lib/processes.js';
import { artifactsDir, binDir, demoModel, freePort, sleep, startStack } from '../lib/stack.js';

const demoDir = path.join(path.dirname(binDir), 'e2e', demoModel);

describe('internal servers bind loopback by default', () => {
  let stack;
  before(async () => { stack = await startStack({ args: ['--backend', 'instant', '--host', '127.0.0.1'] }); });
  after(async () => { await stack?.stop(); });

  test("the tokenizer's and worker's gRPC and metrics ports listen on 127.0.0.1 only", () => {
    for (const binary of ['ernie-tokenizer', 'ernie-worker']) {
      const sockets = listeningSockets(stack.childPid(binary));
      assert.ok(sockets.length >= 2, `${binary}: ${JSON.stringify(sockets)}`);  // gRPC + /metrics
      for (const socket of sockets) assert.equal(socket.address, '127.0.0.1', `${binary}: ${JSON.stringify(socket)}`);
    }
  });

  test('started alone without --host, they still bind 127.0.0.1', async () => {
    const [tokenizerPort, workerPort] = await Promise.all([freePort(), freePort()]);
    const tokenizer = await startServer('ernie-tokenizer', ['--model', demoDir, '--port', String(tokenizerPort)],
                                        { readyLine: 'serving on' });
    const worker = await startServer('ernie-worker', ['--backend', 'instant', '--port', String(workerPort)],
                                     { readyLine: 'serving on' });
    try {
      for (const server of [tokenizer, worker]) {
        const sockets = listeningSockets(server.child.pid);
        assert.ok(sockets.length >= 1);
        for (const socket of sockets) assert.equal(socket.address, '127.0.0.1', JSON.stringify(socket));
      }
    } finally {
      await Promise.all([tokenizer.stop(), worker.stop()]);
    }
  });
});

// openssl: a CA, a server certificate (SAN 127.0.0.1, localhost), a client
// certificate, all signed by the CA; and a rogue CA with its own client certificate.
function makeCertificates(dir) {
  const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ca = (name) => ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`,
                           '-keyout', `${name}.key`, '-out', `${name}.crt`);
  const leaf = (name, caName, cn, extensions) => {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    writeFileSync(path.join(dir, `${name}.ext`), extensions);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.crt`, '-CAkey', `${caName}.key`, '-CAcreateserial',
        '-days', '2', '-out', `${name}.crt`, '-extfile', `${name}.ext`);
  };
  ca('ca');
  ca('rogue-ca');
  leaf('server', 'ca', 'ernie-internal', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'ca', 'ernie-gateway', 'extendedKeyUsage=clientAuth\n');
  leaf('rogue-client', 'rogue-ca', 'intruder', 'extendedKeyUsage=clientAuth\n');
}

describe('TLS and mutual TLS between the gateway, the tokenizer and the worker', () => {
  let dir;
  let tokenizer;
  let worker;
  let tokenizerAddress;
  let workerAddress;
  before(async () => {
    mkdirSync(artifactsDir, { recursive: true });
    dir = mkdtempSync(path.join(os.tmpdir(), 'ernie-tls-'));
    makeCertificates(dir);
    const tls = ['--tls-cert', path.join(dir, 'server.crt'), '--tls-key', path.join(dir, 'server.key'),
                 '--tls-ca', path.join(dir, 'ca.crt')];
    const [tokenizerPort, workerPort] = await Promise.all([freePort(), freePort()]);
    tokenizerAddress = `127.0.0.1:${tokenizerPort}`;
    workerAddress = `127.0.0.1:${workerPort}`;
    tokenizer = await startServer('ernie-tokenizer', ['--model', demoDir, '--port', String(tokenizerPort), ...tls],
                                  { readyLine: 'serving on' });
    worker = await startServer('ernie-worker', ['--backend', 'instant', '--port', String(workerPort), ...tls],
                               { readyLine: 'serving on' });
  });
  after(async () => {
    await Promise.all([tokenizer?.stop(), worker?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function gatewayWith(clientArgs) {
    const port = await freePort();
    const gateway = await startServer('ernie-gateway', ['--model', demoDir, '--tokenizer', tokenizerAddress, '--worker',
                                                        workerAddress, '--port', String(port), ...clientArgs],
                                      { readyLine: 'listening on' });
    return { gateway, url: `http://127.0.0.1:${port}` };
  }

  // Polls /ready for `ms`; true as soon as it is 200.
  async function readyWithin(url, ms) {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if ((await fetch(`${url}/ready`)).status === 200) return true;
      await sleep(100);
    }
    return false;
  }

  test('a gateway with the CA and the client certificate is served (a text prompt through both links)', async () => {
    const { gateway, url } = await gatewayWith(['--upstream-tls-ca', path.join(dir, 'ca.crt'),
                                                '--upstream-tls-cert', path.join(dir, 'client.crt'),
                                                '--upstream-tls-key', path.join(dir, 'client.key')]);
    try {
      assert.ok(await readyWithin(url, 15_000), gateway.log());
      const r = await fetch(`${url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: demoModel, prompt: '2718', max_tokens: 5, ignore_eos: true }),
      });
      assert.equal(r.status, 200);
      assert.equal((await r.json()).usage.completion_tokens, 5);
    } finally {
      await gateway.stop();
    }
  });

  test('refused: no client certificate, a client certificate of another CA, a server checked against the wrong CA, plaintext', async () => {
    const cases = {
      'no client certificate': ['--upstream-tls-ca', path.join(dir, 'ca.crt')],
      'rogue client certificate': ['--upstream-tls-ca', path.join(dir, 'ca.crt'),
                                   '--upstream-tls-cert', path.join(dir, 'rogue-client.crt'),
                                   '--upstream-tls-key', path.join(dir, 'rogue-client.key')],
      'wrong CA for the server': ['--upstream-tls-ca', path.join(dir, 'rogue-ca.crt'),
                                  '--upstream-tls-cert', path.join(dir, 'client.crt'),
                                  '--upstream-tls-key', path.join(dir, 'client.key')],
      plaintext: [],
    };
    const gateways = await Promise.all(Object.values(cases).map(gatewayWith));
    try {
      // Each runs side by side for 4 s: none may become ready, and generation is a 503.
      const ready = await Promise.all(gateways.map(({ url }) => readyWithin(url, 4000)));
      assert.deepEqual(ready, Object.keys(cases).map(() => false), Object.keys(cases).join(', '));
      for (const { url } of gateways) {
        const r = await fetch(`${url}/v1/completions`, {
          method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: demoModel, prompt: 'x', max_tokens: 1 }),
        });
        assert.equal(r.status, 503);
      }
    } finally {
      await Promise.all(gateways.map(({ gateway }) => gateway.stop()));
    }
  });

  test('a missing certificate file is a clear error naming it', async () => {
    const missing = path.join(dir, 'nothing.crt');
    const port = await freePort();
    const bad = await startServer('ernie-worker', ['--backend', 'instant', '--port', String(port),
                                                   '--tls-cert', missing, '--tls-key', path.join(dir, 'server.key')]);
    const { code } = await bad.exited;
    assert.equal(code, 2);
    assert.match(bad.log(), new RegExp(`cannot read ${missing}`));
  });

  test('ernie-serve --internal-tls-dir: the launched stack speaks mutual TLS inside and serves', async () => {
    const tlsDir = path.join(dir, 'internal');
    mkdirSync(tlsDir);
    for (const name of ['ca.crt', 'server.crt', 'server.key', 'client.crt', 'client.key']) {
      execFileSync('cp', [path.join(dir, name), path.join(tlsDir, name)]);
    }
    const stack = await startStack({ args: ['--backend', 'instant', '--internal-tls-dir', tlsDir] });
    try {
      const r = await fetch(`${stack.url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: demoModel, prompt: '1', max_tokens: 3, ignore_eos: true }),
      });
      assert.equal(r.status, 200);
      // The worker really requires a client certificate: a plaintext gateway pointed at it never gets ready.
      const port = await freePort();
      const intruder = await startServer('ernie-gateway', ['--model', demoDir, '--tokenizer', tokenizerAddress,
                                                           '--worker', stack.workerAddress, '--port', String(port),
                                                           '--upstream-tls-ca', path.join(dir, 'ca.crt')],
                                         { readyLine: 'listening on' });
      try {
        assert.equal(await readyWithin(`http://127.0.0.1:${port}`, 3000), false);
      } finally {
        await intruder.stop();
      }
    } finally {
      await stack.stop();
    }
  });
});
