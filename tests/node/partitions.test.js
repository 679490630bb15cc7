'use strict';
// Partitioned queues: a producer's id goes to crc16(whole id) mod N, a
// schedule's job id to partition 0, a generated id names its partition;
// every call finds the job where the C library puts it.

const test = require('node:test');
const assert = require('node:assert');
const { startRedis, delayq, queueName } = require('./redis');

const { Client } = delayq();
let redis;
let dq;
let raw;

test.before(async () => {
  redis = await startRedis();
  dq = Client.fromUrl(`unix://${redis.sock}`);
  const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
  raw = new Redis({ path: redis.sock });
});

test.after(async () => {
  raw.disconnect();
  await dq.close();
  await redis.stop();
});

// CRC16/XMODEM, written here again from its definition (not the client's).
function crc16(s) {
  let crc = 0;
  for (const b of Buffer.from(s)) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

async function partitionHolding(q, n, id) {
  for (let p = 0; p < n; p++) {
    if (await raw.zscore(`dq:{${q}:${p}}:delayed`, id) !== null) return p;
  }
  return -1;
}

test('ids go to crc16(whole id) mod N; generated ids to their number mod N', async () => {
  const q = queueName('parts');
  const n = 5;
  await dq.setPartitions(q, n);
  assert.strictEqual(await dq.partitions(q), n);
  // crc16 of the whole id: a {tag} in it changes nothing, and it is not
  // the Cluster slot (mod 16384) either.
  const ids = ['order:1', 'order:2', 'user:{42}:mail', 'invoice-7', 'a', 'x:y:z'];
  for (const id of ids) {
    await dq.enqueue(q, 't', id, { id, delay: 60000 });
    assert.strictEqual(await partitionHolding(q, n, id), crc16(id) % n, id);
  }
  const gen = [];
  for (let i = 0; i < 10; i++) gen.push(await dq.enqueue(q, 't', 'g', { delay: 60000 }));
  for (const id of gen) assert.strictEqual(await partitionHolding(q, n, id), Number(id) % n, id);
  // Round robin: all five partitions get some of ten jobs.
  assert.strictEqual(new Set(gen.map((id) => Number(id) % n)).size, n);
  const many = await dq.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ queue: q, type: 't', payload: `m${i}`, delay: 60000 })));
  for (const r of many) assert.strictEqual(await partitionHolding(q, n, r.id), Number(r.id) % n);
  const named = await dq.enqueueMany(['k:1', 'k:2', 'k:3'].map((id) => ({ queue: q, type: 't', payload: id, id, delay: 60000 })));
  for (const r of named) assert.strictEqual(await partitionHolding(q, n, r.id), crc16(r.id) % n);
  // An id in the form of a schedule's job id (which lives in partition
  // 0) is refused: a producer's id always routes by its CRC16.
  await assert.rejects(dq.enqueue(q, 't', 's', { id: 'invoice@2026-01-06T00:00:00Z' }), {
    code: 'invalid',
    message: 'job id has the form NAME@2026-01-06T00:00:00Z, kept for the jobs of recurring schedules',
  });
  // A schedule's own job goes to partition 0.
  await dq.scheduleAdd(q, 'nightly', '@daily', 't', 's');
  const tick = await dq.scheduleRunNow(q, 'nightly');
  assert.match(tick, /^nightly@now-[0-9-]+T[0-9:.]+Z$/);
  assert.strictEqual(await partitionHolding(q, n, tick), 0);
  // Every call finds each job in its partition.
  const all = [...ids, ...gen, tick];
  for (const id of all) assert.strictEqual((await dq.show(q, id)).payload.length > 0, true, id);
  const s = await dq.stats(q);
  // (the schedule's job is due now: not delayed)
  assert.strictEqual(s.delayed + s.due, all.length + 23);
  for (const id of all) assert.strictEqual(await dq.cancel(q, id), true, id);
  assert.strictEqual((await dq.stats(q)).delayed, 23);
});

test('a partitioned queue refuses a new count while it holds jobs', async () => {
  const q = queueName('resize');
  await dq.setPartitions(q, 3);
  await dq.enqueue(q, 't', 'x', { id: 'r:1' });
  await assert.rejects(dq.setPartitions(q, 4),
    { code: 'exists', message: `queue ${q} holds 1 job in its 3 partitions: drain it first (not set to 4)` });
  await assert.rejects(dq.setPartitions(q, 0), { code: 'invalid', message: 'partitions 0 is not in 1..256' });
  assert.strictEqual(await dq.cancel(q, 'r:1'), true);
  await dq.setPartitions(q, 4);
  assert.strictEqual(await dq.partitions(q), 4);
});

test('pause and resume write every partition; schedules live in partition 0', async () => {
  const q = queueName('ppause');
  await dq.setPartitions(q, 3);
  const since = await dq.pause(q);
  for (let p = 0; p < 3; p++) assert.ok(Number(await raw.hget(`dq:{${q}:${p}}:meta`, 'paused')) >= since);
  assert.strictEqual(await dq.paused(q), since);
  await dq.resume(q);
  for (let p = 0; p < 3; p++) assert.strictEqual(await raw.hget(`dq:{${q}:${p}}:meta`, 'paused'), null);
  await dq.scheduleAdd(q, 'hourly', '@hourly', 't', 'x');
  assert.strictEqual(await raw.hexists(`dq:{${q}:0}:schedules`, 'hourly'), 1);
  assert.strictEqual((await dq.scheduleList(q))[0].name, 'hourly');
});

// A script that keeps Redis busy for 300 ms: it reads no connection
// meanwhile, so what a client sends waits in its socket.
const BUSY_300MS = "local s = redis.call('TIME') repeat local t = redis.call('TIME') "
  + 'until (t[1] - s[1]) * 1000000 + t[2] - s[2] > 300000 return 1';

async function readsProcessed() {
  return Number(/total_reads_processed:(\d+)/.exec(await raw.info('stats'))[1]);
}

// Redis's reads for `call`, made while Redis was busy (so that a pipeline
// arrives in one read, where one call at a time takes one per partition).
async function readsOf(busy, call) {
  const before = await readsProcessed();
  const done = busy.eval(BUSY_300MS, 0);
  await new Promise((r) => setTimeout(r, 50));
  await call();
  await done;
  return await readsProcessed() - before - 2;    // less the busy script's and the INFO's
}

test('calls over twelve partitions take one round trip each', async () => {
  const q = queueName('span');
  await dq.setPartitions(q, 12);
  for (let i = 0; i < 12; i++) await dq.enqueue(q, 't', 'x', { delay: 60000 });
  const calls = {
    stats: () => dq.stats(q),
    pause: () => dq.pause(q),
    resume: () => dq.resume(q),
    'dead list': () => dq.deadList(q),
    'requeue all': () => dq.requeueAll(q),
    'purge all': () => dq.purgeAll(q),
  };
  for (const call of Object.values(calls)) await call();   // the scripts loaded, the count read
  const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
  const busy = new Redis({ path: redis.sock });
  try {
    await busy.ping();      // connected, its ready check done
    for (const [name, call] of Object.entries(calls)) {
      assert.strictEqual(await readsOf(busy, call), 1, name);
    }
  } finally {
    busy.disconnect();
  }
  // Each partition's reply counts: the twelve summed, all paused.
  assert.strictEqual((await dq.stats(q)).delayed, 12);
  const since = await dq.pause(q);
  // Each partition's pause began when its script ran: partition 0's is
  // the queue's, the others' within the same call.
  for (let p = 0; p < 12; p++) {
    const at = Number(await raw.hget(`dq:{${q}:${p}}:meta`, 'paused'));
    assert.ok(at >= since && at < since + 1000, `partition ${p}: paused at ${at}, the queue at ${since}`);
  }
  assert.strictEqual(await dq.resume(q), since);
  assert.strictEqual(await dq.paused(q), -1);
});
