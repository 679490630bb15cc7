'use strict';
// A private redis-server for a test file: a unix socket in a temporary
// directory, no persistence, stopped by pid (also when the test fails:
// node:test's after hook, and process exit).

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const SERVER = process.env.REDIS_SERVER || 'redis-server';
const PKG = process.env.DELAYQ_NODE_PKG;
const started = new Set();
const made = new Set();

// At exit, the servers still running are killed and the directories made
// for them removed (a test may start a server again in the same one).
process.on('exit', () => {
  for (const child of started) {
    try { process.kill(child.pid, 'SIGKILL'); } catch (_) { /* gone */ }
  }
  for (const dir of made) {
    try { fs.rmSync(dir, { recursive: true, force: true }); } catch (_) { /* leave it */ }
  }
});

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// One round trip on the socket: PING, answered +PONG (or -NOAUTH).
function ping(sock) {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    c.on('error', () => resolve(false));
    c.on('data', () => { c.end(); resolve(true); });
    c.on('connect', () => c.write('PING\r\n'));
  });
}

// Start a redis-server: `args` are extra settings ("--requirepass x");
// `port` a TCP port (0: none).  Returns { sock, dir, port, stop() }.
async function startRedis(args = [], port = 0, dir = null) {
  if (!dir) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-node-'));
    made.add(dir);
  }
  const sock = path.join(dir, 'redis.sock');
  const child = spawn(SERVER, ['--port', String(port), '--unixsocket', sock, '--unixsocketperm', '700',
    '--save', '', '--appendonly', 'no', '--dir', dir, '--bind', '127.0.0.1', ...args],
  { stdio: ['ignore', 'ignore', 'inherit'] });
  started.add(child);
  const exited = new Promise((r) => child.on('exit', r));
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode})`);
    if (fs.existsSync(sock) && await ping(sock)) break;
    await sleep(50);
  }
  return {
    sock,
    dir,
    port,
    pid: child.pid,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      started.delete(child);
    },
  };
}

// Whether `port` of 127.0.0.1 can be listened on now.
function bindable(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

// A free TCP port on 127.0.0.1 (for a replica or a cluster node, which need
// TCP), from below the kernel's ephemeral range: a port from that range can
// become the local port of any connection opened before the server binds it.
const given = new Set();
async function freePort() {
  let low = 32768;
  try {
    low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) || low;
  } catch (e) { /* keep the default */ }
  for (let tries = 0; low - 15000 >= 1000 && tries < 200; tries++) {
    const port = 15000 + Math.floor(Math.random() * (low - 15000));
    // a test takes several before it binds them
    if (!given.has(port) && await bindable(port)) {
      given.add(port);
      return port;
    }
  }
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function delayq() {
  return require(PKG);
}

let n = 0;
// A queue name unique to this run.
function queueName(what) {
  n++;
  return `${what}-${process.pid}-${n}`;
}

module.exports = { startRedis, freePort, delayq, queueName, sleep, PKG };
