'use strict';
// What a caller sees when something is wrong: the code and libdelayq's
// one-line message, nothing written.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { startRedis, delayq, queueName } = require('./redis');

const { Client, DelayqError } = delayq();
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

test('bad arguments are refused before anything is sent', async () => {
  const q = queueName('bad');
  const now = Date.now();
  const alone = 'a debounce goes alone: no delay, time, replace, expiry or dedupe window';
  // The due time of a delay is this host's now + delay.
  const late = new RegExp(`^expiry ${now + 1000} \\(Unix ms\\) is not after the due time ([0-9]+)$`);
  const cases = [
    [{ delay: -1 }, 'delay -1 ms is not in 0..3153600000000 (100 years)'],
    [{ delay: 3153600000001 }, 'delay 3153600000001 ms is not in 0..3153600000000 (100 years)'],
    [{ delay: 1.5 }, 'delay 1.5 ms is not in 0..3153600000000 (100 years)'],
    [{ delay: NaN }, 'delay NaN ms is not in 0..3153600000000 (100 years)'],
    [{ delay: '5x' }, 'delay "5x": unknown unit (use ms, s, m, h or d)'],
    [{ delay: '101000d' }, 'delay "101000d": duration is too long (over 100 years)'],
    [{ at: -5 }, 'time -5 (Unix ms) is negative or more than 100 years from now'],
    [{ at: new Date(Date.now() + 3153600000000 + 86400000) }, /is negative or more than 100 years from now/],
    [{ id: '12345' }, 'job id is all digits (that form is kept for generated ids)'],
    [{ id: 'has space' }, 'job id has a space or a non-printable character'],
    [{ id: 'x'.repeat(257) }, 'job id is longer than 256 bytes'],
    [{ priority: 10 }, 'priority 10 is not 0..9, "high", "normal" or "low"'],
    [{ priority: 'urgent' }, 'priority "urgent" is not 0..9, "high", "normal" or "low"'],
    [{ maxAttempts: -1 }, 'max attempts is negative'],
    [{ delay: 5, at: Date.now() }, 'delay and at are both set (keep one)'],
    [{ at: now + 5000, expireAt: now + 4000 }, `expiry ${now + 4000} (Unix ms) is not after the due time ${now + 5000}`],
    [{ at: new Date(now + 5000), expireAt: new Date(now + 5000) }, `expiry ${now + 5000} (Unix ms) is not after the due time ${now + 5000}`],
    [{ ttl: -1 }, 'ttl -1 ms is not in 1..3153600000000 (100 years)'],
    [{ ttl: 3153600000001 }, 'ttl 3153600000001 ms is not in 1..3153600000000 (100 years)'],
    [{ ttl: 1.5 }, 'ttl 1.5 ms is not in 1..3153600000000 (100 years)'],
    [{ ttl: '5x' }, 'ttl "5x": unknown unit (use ms, s, m, h or d)'],
    [{ expireAt: -5 }, 'expiry -5 (Unix ms) is negative or more than 200 years from now'],
    [{ expireAt: new Date(now + 3 * 3153600000000) }, `expiry ${now + 3 * 3153600000000} (Unix ms) is negative or more than 200 years from now`],
    [{ expireAt: now + 60000, ttl: 1000 }, 'expireAt and ttl are both set (keep one)'],
    [{ ttl: 1000, onExpire: 'delete' }, 'onExpire "delete" is not "dead" or "drop"'],
    [{ id: 'w', uniqueFor: -1 }, 'dedupe window -1 ms is not in 1..3153600000000 (100 years)'],
    [{ id: 'w', uniqueFor: 3153600000001 }, 'dedupe window 3153600000001 ms is not in 1..3153600000000 (100 years)'],
    [{ id: 'w', uniqueFor: 1.5 }, 'dedupe window 1.5 ms is not in 1..3153600000000 (100 years)'],
    [{ id: 'w', uniqueFor: '5x' }, 'dedupe window "5x": unknown unit (use ms, s, m, h or d)'],
    [{ uniqueFor: '1h' }, "a dedupe window needs the job's id"],
    [{ id: 'w', uniqueOk: true }, 'uniqueOk needs a dedupe window (uniqueFor)'],
    [{ id: 'w', uniqueFor: 0, uniqueOk: true }, 'uniqueOk needs a dedupe window (uniqueFor)'],
    [{ id: 'late', delay: 60000, expireAt: now + 1000 }, late],
    [{ debounce: 1000 }, "a debounce needs the job's id"],
    [{ id: 'd', maxWait: '1s' }, 'a max wait needs a debounce'],
    [{ id: 'd', debounce: 0, maxWait: 1000 }, 'a max wait needs a debounce'],
    [{ id: 'd', debounce: '1s', delay: 5 }, alone],
    [{ id: 'd', debounce: '1s', at: now + 5000 }, alone],
    [{ id: 'd', debounce: '1s', replace: true }, alone],
    [{ id: 'd', debounce: '1s', ttl: 60000 }, alone],
    [{ id: 'd', debounce: '1s', expireAt: now + 60000 }, alone],
    [{ id: 'd', debounce: '1s', uniqueFor: '1m' }, alone],
    [{ id: 'd', debounce: -1 }, 'debounce -1 ms is not in 1..3153600000000 (100 years)'],
    [{ id: 'd', debounce: 1.5 }, 'debounce 1.5 ms is not in 1..3153600000000 (100 years)'],
    [{ id: 'd', debounce: '5x' }, 'debounce "5x": unknown unit (use ms, s, m, h or d)'],
    [{ id: 'd', debounce: 1000, maxWait: 3153600000001 }, 'max wait 3153600000001 ms is not in 1..3153600000000 (100 years)'],
  ];
  for (const [opts, message] of cases) {
    await assert.rejects(dq.enqueue(q, 't', 'x', opts), (e) => {
      assert.ok(e instanceof DelayqError);
      assert.strictEqual(e.code, 'invalid');
      if (message instanceof RegExp) assert.match(e.message, message);
      else assert.strictEqual(e.message, message);
      return true;
    }, JSON.stringify(opts));
  }
  await assert.rejects(dq.enqueue(q, '', 'x'), { code: 'invalid', message: 'job type is empty' });
  await assert.rejects(dq.enqueue(q, '*', 'x'), { code: 'invalid', message: "job type '*' is kept for the handler table's fallback" });
  await assert.rejects(dq.enqueue('a{b}', 't', 'x'), { code: 'invalid', message: "queue name contains '{' or '}'" });
  await assert.rejects(dq.enqueue('', 't', 'x'), { code: 'invalid', message: 'queue name is empty' });
  await assert.rejects(dq.enqueue(q, 't', 42), { code: 'invalid' });
  await assert.rejects(dq.cancel(q, ''), { code: 'invalid', message: 'job id is empty' });
  // Nothing was written: not even the registry of queues.
  const raw = await dq.conn.command('SISMEMBER', ['dq:queues', q]);
  assert.strictEqual(raw, 0);
  // The local due time: now + the delay, on this host's clock.
  await assert.rejects(dq.enqueue(q, 't', 'x', { id: 'late', delay: 60000, expireAt: now + 1000 }), (e) => {
    const due = Number(late.exec(e.message)[1]);
    assert.ok(due >= now + 60000 && due <= Date.now() + 60000, e.message);
    return true;
  });
  // In a batch a bad expiry, window or debounce is refused alone; the
  // good jobs are sent and added.
  const res = await dq.enqueueMany([
    { queue: q, type: 't', payload: 'x', id: 'bad', ttl: -1 },
    { queue: q, type: 't', payload: 'x', id: 'bad2', expireAt: now + 60000, ttl: 5 },
    { queue: q, type: 't', payload: 'x', uniqueFor: 60000 },
    { queue: q, type: 't', payload: 'x', id: 'bad3', uniqueOk: true },
    { queue: q, type: 't', payload: 'x', id: 'good', ttl: 60000 },
    { queue: q, type: 't', payload: 'x', id: 'late', delay: 60000, expireAt: now + 1000 },
    { queue: q, type: 't', payload: 'x', id: 'deb', debounce: 1000 },
    { queue: q, type: 't', payload: 'x', id: 'good2', delay: 60000, expireAt: now + 120000 },
  ]);
  assert.deepStrictEqual(res.map((r) => r.error && r.error.code),
    ['invalid', 'invalid', 'invalid', 'invalid', undefined, 'invalid', 'invalid', undefined]);
  assert.deepStrictEqual([res[4].id, res[7].id], ['good', 'good2']);
  assert.match(res[5].error.message, late);
  assert.strictEqual(res[6].error.message, 'a debounced add goes one at a time (enqueue)');
  for (const id of ['bad', 'bad3', 'late', 'deb']) assert.strictEqual(await dq.show(q, id), null, id);
  assert.strictEqual((await dq.show(q, 'good2')).expireAtMs, now + 120000);
});

test('a payload over the limit is too_large', async () => {
  const q = queueName('big');
  await assert.rejects(dq.enqueue(q, 't', Buffer.alloc(1024 * 1024 + 1)),
    { code: 'too_large', message: 'payload is 1048577 bytes, over the limit of 1048576' });
  await dq.enqueue(q, 't', Buffer.alloc(1024 * 1024));
  const small = Client.fromUrl(`unix://${redis.sock}`, { maxPayload: 10 });
  await assert.rejects(small.enqueue(q, 't', 'x'.repeat(11)), { code: 'too_large' });
  const res = await small.enqueueMany([{ queue: q, type: 't', payload: 'x'.repeat(11) }, { queue: q, type: 't', payload: 'ok' }]);
  assert.strictEqual(res[0].error.code, 'too_large');
  assert.match(res[1].id, /^[0-9]+$/);
  await small.close();
});

test('an id taken is exists, with the message naming it', async () => {
  const q = queueName('taken');
  await dq.enqueue(q, 't', 'x', { id: 'order:1' });
  await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'order:1' }),
    { code: 'exists', message: `job order:1 already exists in queue ${q} (use replace)` });
  assert.strictEqual((await dq.show(q, 'order:1')).payload.toString(), 'x');
});

test('Redis down: connect, and the next call after it is back works', async () => {
  const down = Client.fromUrl(`unix://${path.join(redis.dir, 'nothing.sock')}`);
  await assert.rejects(down.enqueue('q', 't', 'x'), (e) => {
    assert.strictEqual(e.code, 'connect');
    assert.match(e.message, /^cannot connect to redis at .*nothing\.sock: /);
    return true;
  });
  await down.close();

  const own = await startRedis();
  const c = Client.fromUrl(`unix://${own.sock}`);
  const q = queueName('restart');
  await c.enqueue(q, 't', 'x', { id: 'a:1' });
  await own.stop();
  await assert.rejects(c.enqueue(q, 't', 'x', { id: 'a:2' }), { code: 'connect' });
  const again = await startRedis([], 0, own.dir);
  // A new server: no scripts, no data; the client connects again and
  // loads what it needs.
  assert.strictEqual(await c.enqueue(q, 't', 'x', { id: 'a:3' }), 'a:3');
  assert.strictEqual((await c.stats(q)).due, 1);
  await c.close();
  await again.stop();
});

test('wrong password is auth; the right one, and an ACL user with a password file, work', async () => {
  const locked = await startRedis(['--requirepass', 'sesame']);
  const none = Client.fromUrl(`unix://${locked.sock}`);
  await assert.rejects(none.enqueue('q', 't', 'x'), (e) => {
    assert.strictEqual(e.code, 'auth');
    assert.match(e.message, /NOAUTH/);
    return true;
  });
  await none.close();
  const wrong = Client.fromUrl(`unix://${locked.sock}?password=nope`);
  await assert.rejects(wrong.enqueue('q', 't', 'x'), (e) => {
    assert.strictEqual(e.code, 'auth');
    assert.match(e.message, /^redis refused AUTH: WRONGPASS/);
    return true;
  });
  await wrong.close();
  const right = Client.fromUrl(`unix://${locked.sock}?password=sesame`);
  assert.strictEqual(await right.enqueue('q', 't', 'x', { id: 'p:1' }), 'p:1');
  await right.conn.command('ACL', ['SETUSER', 'producer', 'on', '>s3cret', '~dq:*', '&*', '+@all']);
  await right.close();
  const conf = path.join(locked.dir, 'delayqd.conf');
  fs.writeFileSync(path.join(locked.dir, 'redis.pass'), 's3cret\n', { mode: 0o600 });
  fs.writeFileSync(conf, `redis = {\n  unix_socket = "${locked.sock}";\n  user = "producer";\n  password_file = "redis.pass";\n};\n`);
  const acl = Client.fromConfig(conf);
  assert.strictEqual(await acl.enqueue('q', 't', 'x', { id: 'p:2' }), 'p:2');
  assert.strictEqual(await acl.cancel('q', 'p:2'), true);
  await acl.close();
  fs.writeFileSync(path.join(locked.dir, 'redis.pass'), 'wrong\n');
  const badAcl = Client.fromConfig(conf);
  await assert.rejects(badAcl.stats('q'), { code: 'auth' });
  await badAcl.close();
  await locked.stop();
});

test('replicated durability: WAIT without a replica times out, with one it succeeds', async () => {
  const lone = Client.fromUrl(`unix://${redis.sock}`, { durability: 'replicated', replicationTimeout: 50 });
  const q = queueName('wait');
  await assert.rejects(lone.enqueue(q, 't', 'x', { id: 'w:1' }),
    { code: 'timeout', message: 'not replicated within 50 ms (the write is on the master only)' });
  // The write is on the master (as libdelayq says): not lost, not confirmed.
  assert.strictEqual((await dq.show(q, 'w:1')).state, 'delayed');
  const res = await lone.enqueueMany([{ queue: q, type: 't', payload: 'a', id: 'w:2' }]);
  assert.strictEqual(res[0].error.code, 'timeout');
  // Reads wait for nothing.
  assert.strictEqual((await lone.stats(q)).due, 2);
  await lone.close();

  const { freePort } = require('./redis');
  const port = await freePort();
  const master = await startRedis([], port);
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(port)]);
  const c = Client.fromUrl(`unix://${master.sock}`, { durability: 'replicated', replicationTimeout: 5000 });
  // Until the replica has synced, WAIT may count none: retry briefly.
  let ok = false;
  for (let i = 0; i < 50 && !ok; i++) {
    try {
      await c.enqueue(q, 't', 'x', { id: `r:${i}` });
      ok = true;
    } catch (e) {
      if (e.code !== 'timeout') throw e;
    }
  }
  assert.ok(ok, 'a write confirmed by the replica');
  const res2 = await c.enqueueMany([{ queue: q, type: 't', payload: 'a' }, { queue: q, type: 't', payload: 'b' }]);
  assert.ok(res2.every((r) => r.id));
  assert.strictEqual(await c.cancel(q, res2[0].id), true);
  await c.close();
  await replica.stop();
  await master.stop();
});
