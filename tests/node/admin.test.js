'use strict';
// The dead set (list, requeue, purge), with dead jobs made through the
// claim and fail scripts as a worker makes them.

const test = require('node:test');
const assert = require('node:assert');
const { startRedis, delayq, queueName } = require('./redis');

const { Client } = delayq();
let redis;
let dq;

test.before(async () => {
  redis = await startRedis();
  dq = Client.fromUrl(`unix://${redis.sock}`);
});

test.after(async () => {
  await dq.close();
  await redis.stop();
});

// Claim every due job of each partition and fail it dead, as a worker
// would: returns the ids, in the order they died.
async function claimAndFail(client, queue, error) {
  const n = await client.partitions(queue);
  const ids = [];
  for (let p = 0; p < n; p++) {
    const k = client.keysOf(queue, p, n);
    const r = await client.conn.evalScript('claim', k.keys, [1000, 60000]);
    const count = Number(r[2]);
    for (let i = 0; i < count; i++) {
      const id = String(r[3 + 4 * i]);
      const fence = String(r[5 + 4 * i]);
      await client.conn.evalScript('fail', k.keys, [k.wake, id, fence, error, 'dead', -1, 1000, 60000, 0, 1, 5]);
      ids.push(id);
    }
  }
  return ids;
}

for (const parts of [1, 3]) {
  test(`dead set with ${parts} partition(s): list, requeue, purge`, async () => {
    const q = queueName('dead');
    await dq.setPartitions(q, parts);
    assert.strictEqual(await dq.partitions(q), parts);
    for (let i = 0; i < 6; i++) await dq.enqueue(q, 't', Buffer.from([i, 0xff]), { id: `job:${i}` });
    const dead = await claimAndFail(dq, q, 'boom');
    assert.strictEqual(dead.length, 6);
    const page = await dq.deadList(q, { offset: 0, count: 4 });
    assert.strictEqual(page.total, 6);
    assert.strictEqual(page.jobs.length, 4);
    for (const j of page.jobs) {
      assert.strictEqual(j.lastError, 'boom');
      assert.strictEqual(j.payloadBytes, 2);
      assert.strictEqual(j.attempts, 1);
      assert.strictEqual(j.unreadable, '');
    }
    const all = await dq.deadList(q, { count: 100 });
    assert.deepStrictEqual(all.jobs.map((j) => j.id).sort(), dead.slice().sort());
    for (let i = 1; i < all.jobs.length; i++) assert.ok(all.jobs[i - 1].diedMs <= all.jobs[i].diedMs);
    assert.strictEqual((await dq.show(q, 'job:0')).state, 'dead');
    await assert.rejects(dq.cancel(q, 'job:0'), { code: 'dead', message: `job job:0 in queue ${q} is dead; purge it instead` });
    await dq.requeue(q, 'job:0');
    assert.strictEqual((await dq.show(q, 'job:0')).state, 'delayed');
    await assert.rejects(dq.requeue(q, 'job:0'), { code: 'notfound', message: `no dead job job:0 in queue ${q}` });
    await dq.purge(q, 'job:1');
    assert.strictEqual(await dq.show(q, 'job:1'), null);
    await assert.rejects(dq.purge(q, 'job:1'), { code: 'notfound' });
    assert.strictEqual(await dq.requeueAll(q), 4);
    assert.strictEqual(await dq.deadList(q).then((p) => p.total), 0);
    await claimAndFail(dq, q, 'again');
    assert.strictEqual(await dq.purgeAll(q), 5);
    const s = await dq.stats(q);
    assert.deepStrictEqual([s.delayed, s.due, s.processing, s.dead], [0, 0, 0, 0]);
    await assert.rejects(dq.deadList(q, { count: 0 }), { code: 'invalid', message: 'bad page: offset 0, count 0 (1..10000)' });
  });
}

test('a running job cannot be cancelled or replaced', async () => {
  const q = queueName('running');
  await dq.enqueue(q, 't', 'x', { id: 'run:1' });
  const k = dq.keysOf(q, 0, 1);
  await dq.conn.evalScript('claim', k.keys, [10, 60000]);
  await assert.rejects(dq.cancel(q, 'run:1'),
    { code: 'running', message: `job run:1 in queue ${q} is running; it can no longer be cancelled` });
  await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'run:1', replace: true }),
    { code: 'running', message: `job run:1 in queue ${q} is running and cannot be replaced` });
  assert.strictEqual((await dq.show(q, 'run:1')).state, 'processing');
  assert.strictEqual((await dq.stats(q)).processing, 1);
});

module.exports = { claimAndFail };
