'use strict';
// Jobs a Node producer makes, run by the real delayqd: binary payloads
// arrive byte for byte (the shipped redis handler pushes each job's
// payload to a list on the same server), on an unpartitioned queue and on
// one of three partitions (the daemon stores the count at start and the
// client reads it), and a schedule added from Node fires in the daemon.

const test = require('node:test');
const assert = require('node:assert');
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const { startRedis, delayq, sleep } = require('./redis');

const TOP = process.env.DELAYQ_TOP_BUILDDIR || '';
const DAEMON = path.join(TOP, 'delayqd');
const HANDLERS = path.join(TOP, 'handlers', '.libs');
const HAVE = TOP && fs.existsSync(DAEMON) && fs.existsSync(path.join(HANDLERS, 'redis.so'));
const { Client } = delayq();

async function listed(raw, key, n, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await raw.llen(key)) >= n) break;
    await sleep(50);
  }
  return raw.lrangeBuffer(key, 0, -1);
}

test('delayqd runs what Node enqueued, payload bytes intact; a Node schedule fires', { skip: !HAVE && 'delayqd or the redis handler is not built' }, async () => {
  const redis = await startRedis();
  // delayqd refuses handlers that others could replace.
  fs.chmodSync(HANDLERS, fs.statSync(HANDLERS).mode & ~0o022);
  fs.chmodSync(path.join(HANDLERS, 'redis.so'), fs.statSync(path.join(HANDLERS, 'redis.so')).mode & ~0o022);
  const conf = path.join(redis.dir, 'delayqd.conf');
  fs.writeFileSync(conf, `redis = { unix_socket = "${redis.sock}"; };
handler_dir = "${HANDLERS}";
queues = (
  { name = "orders"; workers = 1; },
  { name = "split"; workers = 2; partitions = 3; }
);
handlers = ( { type = "*"; file = "redis.so"; timeout = "5s";
               settings = { unix_socket = "${redis.sock}"; key = "delivered"; mode = "list"; }; } );
reaper = { interval = "1s"; batch = 100; };
shutdown_timeout = "5s";
log = { level = "info"; target = "stderr"; };
`);
  const log = fs.openSync(path.join(redis.dir, 'delayqd.log'), 'w');
  const daemon = spawn(DAEMON, ['-f', '-c', conf], { stdio: ['ignore', log, log] });
  const exited = new Promise((r) => daemon.on('exit', r));
  const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
  const raw = new Redis({ path: redis.sock });
  const dq = Client.fromUrl(`unix://${redis.sock}`);
  try {
    // The daemon stores the partition count at start.
    for (let i = 0; i < 100 && (await dq.partitions('split')) !== 3; i++) await sleep(50);
    assert.strictEqual(await dq.partitions('split'), 3);
    const payloads = [
      Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
      Buffer.from([0xc3, 0x28, 0x00, 0xff]),
      Buffer.from('{"order":1234}'),
      Buffer.alloc(0),
    ];
    await dq.enqueue('orders', 'order.cancel', payloads[0], { id: 'order:1:cancel' });
    await dq.enqueue('orders', 'order.cancel', payloads[1], { delay: 300 });
    const many = await dq.enqueueMany([
      { queue: 'split', type: 't', payload: payloads[2] },
      { queue: 'split', type: 't', payload: payloads[3], id: 'empty:1', priority: 'high' },
    ]);
    assert.ok(many.every((r) => r.id));
    // A job cancelled in time never runs.
    await dq.enqueue('orders', 'order.cancel', 'never', { id: 'order:2:cancel', delay: '1h' });
    assert.strictEqual(await dq.cancel('orders', 'order:2:cancel'), true);
    const got = await listed(raw, 'delivered', 4, 15000);
    assert.deepStrictEqual(got.map((b) => b.toString('hex')).sort(), payloads.map((b) => b.toString('hex')).sort());
    // A schedule added from Node (every second) fires in the daemon.
    await dq.scheduleAdd('orders', 'tick', '@every 1s', 'ping', Buffer.from([7, 0, 7]));
    const after = await listed(raw, 'delivered', 5, 15000);
    assert.ok(after.length >= 5, `the schedule fired (${after.length} delivered)`);
    assert.ok(after.slice(4).every((b) => b.equals(Buffer.from([7, 0, 7]))));
    await dq.scheduleRemove('orders', 'tick');
    const s = await dq.stats('orders');
    assert.strictEqual(s.dead, 0);
  } finally {
    await dq.close();
    raw.disconnect();
    daemon.kill('SIGTERM');
    await exited;
    fs.closeSync(log);
    await redis.stop();
  }
});
