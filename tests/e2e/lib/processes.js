// Starting lone servers (ernie-tokenizer, ernie-worker, ernie-gateway) for
// tests that wire them by hand, and reading where a process listens.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { binDir, sleep } from './stack.js';

/** Starts `binary` with `args`; resolves once `readyLine` shows up in its output. */
export async function startServer(binary, args, { readyLine, timeoutMs = 30_000 } = {}) {
  const child = spawn(path.join(binDir, binary), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => { log += d.toString(); });
  child.stderr.on('data', (d) => { log += d.toString(); });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const server = {
    child,
    exited,
    log: () => log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  if (readyLine) {
    const until = Date.now() + timeoutMs;
    while (!log.includes(readyLine)) {
      if (child.exitCode !== null) throw new Error(`${binary} exited (${child.exitCode}):\n${log}`);
      if (Date.now() > until) {
        await server.stop();
        throw new Error(`${binary} did not print "${readyLine}" in ${timeoutMs} ms:\n${log}`);
      }
      await sleep(25);
    }
  }
  return server;
}

// Socket inodes a process holds open.
function socketInodes(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]);
    } catch {
      // closed while we looked
    }
  }
  return inodes;
}

// "0100007F:1F90" (little-endian IPv4) or the 32-hex-digit IPv6 form -> "127.0.0.1" / "::" ...
function decodeAddress(hex) {
  const [address] = hex.split(':');
  if (address.length === 8) {
    return [3, 2, 1, 0].map((i) => parseInt(address.slice(i * 2, i * 2 + 2), 16)).join('.');
  }
  const words = [];
  for (let i = 0; i < 4; i++) {
    const word = address.slice(i * 8, i * 8 + 8);
    const bytes = [3, 2, 1, 0].map((j) => word.slice(j * 2, j * 2 + 2)).join('');
    words.push(bytes.slice(0, 4), bytes.slice(4, 8));
  }
  const v6 = words.map((w) => parseInt(w, 16).toString(16)).join(':');
  // An IPv4-mapped IPv6 socket (::ffff:a.b.c.d) listens on that IPv4 address only.
  const mapped = /^0:0:0:0:0:ffff:([0-9a-f]+):([0-9a-f]+)$/.exec(v6);
  if (mapped) {
    const [hi, lo] = [parseInt(mapped[1], 16), parseInt(mapped[2], 16)];
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  return v6;
}

/** Every TCP socket `pid` listens on: [{ address, port }] (IPv4 and IPv6). */
export function listeningSockets(pid) {
  const inodes = socketInodes(pid);
  const out = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A' || !inodes.has(fields[9])) continue;  // 0A: LISTEN
      out.push({ address: decodeAddress(fields[1]), port: parseInt(fields[1].split(':')[1], 16) });
    }
  }
  return out;
}
