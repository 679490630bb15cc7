'use strict';
// The dead set (list, requeue, purge), with dead jobs made through the
// claim and fail scripts as a worker makes them; a running job (claimed
// through the claim script) replaced, run now, cancelled.

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

test('a running job cannot be replaced or run now', async () => {
  const q = queueName('running');
  await dq.enqueue(q, 't', 'x', { id: 'run:1' });
  const k = dq.keysOf(q, 0, 1);
  await dq.conn.evalScript('claim', k.keys, [10, 60000]);
  await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'run:1', replace: true }),
    { code: 'running', message: `job run:1 in queue ${q} is running and cannot be replaced` });
  await assert.rejects(dq.runNow(q, 'run:1'),
    { code: 'running', message: `job run:1 in queue ${q} is running; it is no longer waiting` });
  assert.strictEqual((await dq.show(q, 'run:1')).state, 'processing');
  assert.strictEqual((await dq.stats(q)).processing, 1);
});

for (const parts of [1, 3]) {
  test(`a running job is cancelled at once, with ${parts} partition(s)`, async () => {
    const q = queueName('cancelrun');
    await dq.setPartitions(q, parts);
    await dq.enqueue(q, 't', 'x', { id: 'run:1' });
    await dq.enqueue(q, 't', 'w', { id: 'wait:1', delay: 60000 });
    // claim it as a worker does: its fence
    const k = await dq.keysOfId(q, 'run:1');
    const r = await dq.conn.evalScript('claim', k.keys, [10, 60000]);
    assert.strictEqual(Number(r[2]), 1);
    assert.strictEqual(String(r[3]), 'run:1');
    const fence = Number(r[5]);
    const held = await dq.show(q, 'run:1');
    assert.deepStrictEqual([held.state, held.fence], ['processing', fence]);

    assert.strictEqual(await dq.cancel(q, 'run:1'), true);
    const j = await dq.show(q, 'run:1');
    assert.strictEqual(j.state, 'cancelled');
    assert.strictEqual(j.fence, fence);   // the run that was stopped
    assert.deepStrictEqual([j.type, j.payload.length, j.attempts, j.lastError], ['', 0, 0, '']);
    assert.ok(Math.abs(j.stateMs - j.nowMs) < 5000, `cancelled at ${j.stateMs}, now ${j.nowMs}`);
    // its id is kept until the run's lease would have ended
    assert.strictEqual(j.uniqueUntilMs, held.stateMs);
    assert.strictEqual(await dq.cancel(q, 'run:1'), false);   // nothing left to cancel
    // the run's ack under its fence is refused: the cancel won
    assert.deepStrictEqual((await dq.conn.evalScript('ack', k.keys, ['run:1', fence])).map(Number), [0]);

    // a waiting job's cancel counts too, on whatever partition it is
    assert.strictEqual(await dq.cancel(q, 'wait:1'), true);
    const s = await dq.stats(q);
    assert.deepStrictEqual([s.delayed, s.due, s.processing, s.dead, s.jobsCancelled], [0, 0, 0, 0, 2]);

    // an add of the id meanwhile is refused, saying a cancelled run keeps it
    const refused = { code: 'unique', message: `job run:1 in queue ${q} finished within its dedupe window`,
      finishedMs: j.stateMs, untilMs: j.uniqueUntilMs, cancelled: true };
    await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'run:1' }), refused);
    await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'run:1', replace: true }), refused);
    const got = await dq.enqueue(q, 't', 'y', { id: 'run:1', uniqueFor: 60000, uniqueOk: true, detail: true });
    assert.deepStrictEqual(got, { id: 'run:1', dueMs: 0, finished: true, finishedMs: j.stateMs,
      untilMs: j.uniqueUntilMs, cancelled: true });
    const [many] = await dq.enqueueMany([{ queue: q, type: 't', payload: 'y', id: 'run:1' }]);
    assert.strictEqual(many.error.code, 'unique');
    assert.strictEqual((await dq.show(q, 'run:1')).state, 'cancelled');
  });
}

// Script calls Redis counted since the last CONFIG RESETSTAT.
async function evalshaCalls(client) {
  const info = (await client.conn.command('INFO', ['commandstats'])).toString();
  const m = /cmdstat_evalsha:calls=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

// A producer's show of a waiting job is one script call that hands back
// the record, which the client reads; a record it cannot vouch for costs a
// second call, whose answer says what is wrong; a job the script cannot hand
// back raw (a queue with expiries) is answered in full at once.
test('show reads a waiting record in one call', async () => {
  const q = queueName('show');
  await dq.enqueue(q, 't', 'hello', { id: 's-1', delay: 60000, maxAttempts: 3 });
  assert.strictEqual(await dq.show(q, 'none'), null);   // the script loaded (NOSCRIPT once)
  await dq.conn.command('CONFIG', ['RESETSTAT']);
  let j = await dq.show(q, 's-1');
  assert.deepStrictEqual([j.state, j.payload.toString(), j.maxAttempts, j.stateMs], ['delayed', 'hello', 3, j.dueMs]);
  assert.strictEqual(await evalshaCalls(dq), 1);

  // an array 16 of six elements: no record body for the scripts
  const bad = Buffer.from('333a303adc0006a174a17803cf0000019b76daa800cdea60a0', 'hex');
  await dq.conn.command('HSET', [`dq:{${q}}:jobs`, 's-2', bad]);
  await dq.conn.command('ZADD', [`dq:{${q}}:delayed`, '1', 's-2']);
  await dq.conn.command('CONFIG', ['RESETSTAT']);
  j = await dq.show(q, 's-2');
  assert.strictEqual(j.state, 'unreadable');
  assert.match(j.unreadable, /not a MessagePack array of 6 or 7/);
  assert.strictEqual(await evalshaCalls(dq), 2);

  await dq.enqueue(q, 't', 'x', { id: 's-3', delay: 60000, ttl: 60000 });
  await dq.conn.command('CONFIG', ['RESETSTAT']);
  j = await dq.show(q, 's-3');
  assert.strictEqual(j.state, 'delayed');
  assert.ok(j.expireAtMs > 0);
  assert.strictEqual(await evalshaCalls(dq), 1);
});

module.exports = { claimAndFail };
