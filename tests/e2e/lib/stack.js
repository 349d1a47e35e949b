// Starts the real ernie-serve stack (launcher + tokenizer + worker + gateway
// as separate processes on loopback) for one test file, and gives the tests
// what they need to observe it: the URL, the model name, the gateway's
// /metrics and the worker's Worker.GetLoad (through `ernie-bench worker-load`).
import { spawn, execFile } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
// ctest sets ERNIE_BUILD_DIR; by hand it defaults to build/.
export const buildDir = process.env.ERNIE_BUILD_DIR || path.join(repoRoot, 'build');
export const binDir = path.join(buildDir, 'bin');
export const artifactsDir = path.join(buildDir, 'e2e');
// The demo checkpoint is made once per build tree and shared by every stack;
// its folder name is the model name clients use.
const demoDir = path.join(artifactsDir, 'demo-model');
export const demoModel = 'demo-model';

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Direct children of `pid` (Linux /proc).
export function childPids(pid) {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === pid) out.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

export function commandLine(pid) {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

// The launcher picks the worker's port; read it from the worker's command line.
function workerAddressOf(launcherPid) {
  for (const pid of childPids(launcherPid)) {
    const argv = commandLine(pid);
    if (!argv[0] || !argv[0].endsWith('ernie-worker')) continue;
    const i = argv.indexOf('--port');
    if (i >= 0) return `127.0.0.1:${argv[i + 1]}`;
  }
  throw new Error(`no ernie-worker child of ernie-serve (pid ${launcherPid})`);
}

/**
 * Starts ernie-serve on a free port. `args` are extra ernie-serve flags
 * (e.g. ['--backend', 'instant'] or ['--api-key', 'k']). Resolves once the
 * launcher prints "Running on".
 */
export async function startStack({ args = [], readyTimeoutMs = 120_000, workerAddress = true } = {}) {
  mkdirSync(artifactsDir, { recursive: true });
  const port = await freePort();
  const argv = ['--demo', '--demo-dir', demoDir, '--port', String(port), ...args];
  const child = spawn(path.join(binDir, 'ernie-serve'), argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const onData = (d) => { log += d.toString(); };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + readyTimeoutMs;
  while (!log.includes('Running on')) {
    if (child.exitCode !== null) throw new Error(`ernie-serve exited (${child.exitCode}) while starting:\n${log}`);
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`ernie-serve not ready after ${readyTimeoutMs} ms:\n${log}`);
    }
    await sleep(50);
  }
  const url = `http://127.0.0.1:${port}`;
  const stack = {
    url,
    port,
    model: demoModel,
    workerAddress: workerAddress ? workerAddressOf(child.pid) : null,
    pid: child.pid,
    log: () => log,
    // The pid of the launcher's child whose binary is `binary` (e.g. 'ernie-worker'), or null.
    childPid(binary) {
      for (const pid of childPids(child.pid)) {
        try {
          if (commandLine(pid)[0]?.endsWith(binary)) return pid;
        } catch {
          // ended while we looked
        }
      }
      return null;
    },
    // Polls /ready until 200 (after a restart), or throws.
    async waitReady(timeoutMs = 20_000) {
      const until = Date.now() + timeoutMs;
      while (Date.now() < until) {
        try {
          if ((await fetch(`${url}/ready`)).status === 200) return;
        } catch {
          // the gateway is not listening
        }
        await sleep(50);
      }
      throw new Error(`not ready after ${timeoutMs} ms:\n${log.slice(-4000)}`);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
      await exited;
      clearTimeout(timer);
    },
    // Gauges and counters of the gateway's Prometheus text, by series name.
    async metrics(headers = {}) {
      const text = await (await fetch(`${url}/metrics`, { headers })).text();
      // Keyed by the full series ("name{labels}") and, summed over its label
      // sets, by the bare metric name (every series carries model_name).
      const values = {};
      for (const line of text.split('\n')) {
        if (!line || line.startsWith('#')) continue;
        const space = line.lastIndexOf(' ');
        const series = line.slice(0, space), value = Number(line.slice(space + 1));
        values[series] = value;
        const brace = series.indexOf('{');
        if (brace > 0) {
          const name = series.slice(0, brace);
          values[name] = (values[name] ?? 0) + value;
        }
      }
      return values;
    },
    // {running, waiting, kv_blocks_used, kv_blocks_total, kv_blocks_free, draining}
    async workerLoad() {
      const { stdout } = await promisify(execFile)(path.join(binDir, 'ernie-bench'),
        ['worker-load', '--address', stack.workerAddress]);
      return JSON.parse(stdout);
    },
    // Polls until the worker runs nothing and holds no KV blocks (or fails).
    async waitForIdleWorker(timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      let load;
      while (Date.now() < until) {
        load = await stack.workerLoad();
        if (load.running === 0 && load.waiting === 0 && load.kv_blocks_used === 0) return load;
        await sleep(50);
      }
      throw new Error(`the worker is still busy after ${timeoutMs} ms: ${JSON.stringify(load)}`);
    },
  };
  return stack;
}

// Resident set size of a process in KiB (VmRSS), or null when it is gone.
export function rssKiB(pid) {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}
