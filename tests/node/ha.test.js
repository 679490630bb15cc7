'use strict';
// Sentinel (a real sentinel watching a master and its replica, and a
// failover under the client) and TLS (a redis-server on a TLS port, the
// test CA of tests/tls-certs.sh, a client certificate), through
// Client.fromConfig as a service would configure them.

const test = require('node:test');
const assert = require('node:assert');
const { spawn, spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { startRedis, freePort, delayq, queueName, sleep } = require('./redis');

const { Client } = delayq();
const SERVER = process.env.REDIS_SERVER || 'redis-server';

// A sentinel on `port` watching master `name` at 127.0.0.1:masterPort;
// stopped by pid.
async function startSentinel(dir, port, name, masterPort) {
  const conf = path.join(dir, `sentinel-${port}.conf`);
  fs.writeFileSync(conf, `port ${port}\nbind 127.0.0.1\ndir ${dir}\n` +
    `sentinel monitor ${name} 127.0.0.1 ${masterPort} 1\n` +
    `sentinel down-after-milliseconds ${name} 1000\nsentinel failover-timeout ${name} 5000\n`);
  const child = spawn(SERVER, [conf, '--sentinel'], { stdio: 'ignore' });
  const exited = new Promise((r) => child.on('exit', r));
  const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
  const raw = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50 });
  raw.on('error', () => {});
  for (let i = 0; i < 100; i++) {
    try {
      await raw.connect().catch(() => {});
      const r = await raw.call('SENTINEL', 'get-master-addr-by-name', name);
      if (r) break;
    } catch (_) { /* not yet */ }
    await sleep(50);
  }
  return {
    raw,
    async stop() {
      raw.disconnect();
      child.kill('SIGTERM');
      await exited;
    },
  };
}

test('Sentinel: the client finds the master, and follows a failover', async () => {
  const mport = await freePort();
  const rport = await freePort();
  const master = await startRedis([], mport);
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(mport)], rport);
  const sport = await freePort();
  const sentinel = await startSentinel(master.dir, sport, 'jobs', mport);
  const conf = path.join(master.dir, 'delayqd.conf');
  fs.writeFileSync(conf, `redis = {\n  sentinel = {\n    master = "jobs";\n    nodes = [ "127.0.0.1:${sport}" ];\n  };\n` +
    '  connect_timeout = "15s";\n};\n');
  const dq = Client.fromConfig(conf);
  const q = queueName('sentinel');
  try {
    assert.strictEqual(await dq.enqueue(q, 't', 'before', { id: 's:1' }), 's:1');
    // Wait until the replica has the job, then fail over.
    const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
    const r = new Redis({ path: replica.sock });
    for (let i = 0; i < 100 && !(await r.exists(`dq:{${q}}:jobs`)); i++) await sleep(50);
    await sentinel.raw.call('SENTINEL', 'FAILOVER', 'jobs');
    let promoted = false;
    for (let i = 0; i < 200 && !promoted; i++) {
      promoted = String((await r.call('ROLE'))[0]) === 'master';
      if (!promoted) await sleep(50);
    }
    r.disconnect();
    assert.ok(promoted, 'the replica was promoted');
    // The old master becomes a replica: READONLY, then the sentinel names
    // the new master, and the call goes there.
    assert.strictEqual(await dq.enqueue(q, 't', 'after', { id: 's:2' }), 's:2');
    assert.strictEqual((await dq.show(q, 's:1')).payload.toString(), 'before');
    assert.strictEqual((await dq.stats(q)).due, 2);
  } finally {
    await dq.close();
    await sentinel.stop();
    await replica.stop();
    await master.stop();
  }
});

test('TLS: rediss with the test CA and a client certificate', async (t) => {
  const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'dq-node-tls-'));
  const made = spawnSync('sh', [path.join(process.env.DELAYQ_SRCDIR, 'tests', 'tls-certs.sh'), dir], { encoding: 'utf8' });
  if (made.status !== 0) {
    t.skip(`no test certificates: ${made.stderr.trim()}`);
    return;
  }
  const port = await freePort();
  let server;
  try {
    server = await startRedis(['--tls-port', String(port), '--tls-cert-file', path.join(dir, 'server.crt'),
      '--tls-key-file', path.join(dir, 'server.key'), '--tls-ca-cert-file', path.join(dir, 'ca.crt'),
      '--tls-auth-clients', 'yes'], 0, dir);
  } catch (e) {
    t.skip(`this redis-server has no TLS: ${e.message}`);
    return;
  }
  const q = queueName('tls');
  const conf = path.join(dir, 'delayqd.conf');
  fs.writeFileSync(conf, `redis = {\n  host = "127.0.0.1";\n  port = ${port};\n  tls = {\n    ca_file = "ca.crt";\n` +
    '    cert_file = "client.crt";\n    key_file = "client.key";\n  };\n};\n');
  const dq = Client.fromConfig(conf);
  try {
    assert.strictEqual(await dq.enqueue(q, 't', Buffer.from([0, 255]), { id: 'tls:1' }), 'tls:1');
    assert.deepStrictEqual((await dq.show(q, 'tls:1')).payload, Buffer.from([0, 255]));
    // A server its CA did not sign is refused.
    const other = path.join(dir, 'other.conf');
    fs.writeFileSync(other, `redis = {\n  host = "127.0.0.1";\n  port = ${port};\n  tls = {\n    ca_file = "other-ca.crt";\n` +
      '    cert_file = "client.crt";\n    key_file = "client.key";\n  };\n};\n');
    const wrong = Client.fromConfig(other);
    await assert.rejects(wrong.stats(q), { code: 'connect' });
    await wrong.close();
    // Without a client certificate the server refuses the handshake.
    const nocert = Client.fromUrl(`rediss://127.0.0.1:${port}`, { tls: { ca: fs.readFileSync(path.join(dir, 'ca.crt')) } });
    await assert.rejects(nocert.stats(q), { code: 'connect' });
    await nocert.close();
  } finally {
    await dq.close();
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
