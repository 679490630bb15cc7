'use strict';
// Every producer call of the Node client against a real redis-server,
// with binary payloads kept byte for byte; jobs' expiries (shown, and a
// job past its expiry is never claimed); dedupe windows (an id kept after
// its job ran); debounced adds (a waiting job takes the add, a running
// one keeps it as its next run); schedules paused and resumed.

const test = require('node:test');
const assert = require('node:assert');
const { startRedis, delayq, queueName, sleep } = require('./redis');

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

const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

test('the order-timeout example: enqueue with an id, cancel while waiting', async () => {
  const q = queueName('orders');
  const id = await dq.enqueue(q, 'order.cancel', Buffer.from('{"order":1234}'),
    { delay: '30m', id: 'order:1234:cancel' });
  assert.strictEqual(id, 'order:1234:cancel');
  const job = await dq.show(q, id);
  assert.strictEqual(job.state, 'delayed');
  assert.strictEqual(job.dueMs - job.createdMs, 30 * 60 * 1000);
  assert.strictEqual(await dq.cancel(q, id), true);
  assert.strictEqual(await dq.cancel(q, id), false);
  assert.strictEqual(await dq.show(q, id), null);
});

test('binary payloads are kept byte for byte, one at a time and in bulk', async () => {
  const q = queueName('bin');
  const id = await dq.enqueue(q, 't', ALL_BYTES, { delay: 60000 });
  assert.match(id, /^[0-9]+$/);
  assert.deepStrictEqual((await dq.show(q, id)).payload, ALL_BYTES);
  const invalidUtf8 = Buffer.from([0xc3, 0x28, 0xff, 0x00, 0x80]);
  const res = await dq.enqueueMany([
    { queue: q, type: 't', payload: invalidUtf8, delay: 60000 },
    { queue: q, type: 't', payload: new Uint8Array([1, 2, 0, 3]), delay: 60000, id: 'u8' },
    { queue: q, type: 't', payload: 'text é', delay: 60000 },
  ]);
  assert.deepStrictEqual((await dq.show(q, res[0].id)).payload, invalidUtf8);
  assert.deepStrictEqual((await dq.show(q, 'u8')).payload, Buffer.from([1, 2, 0, 3]));
  assert.strictEqual((await dq.show(q, res[2].id)).payload.toString('utf8'), 'text é');
});

test('delay, at, priority, max attempts and replace reach the record', async () => {
  const q = queueName('opts');
  const now = await dq.serverTime();
  await dq.enqueue(q, 't', 'a', { id: 'd:1', delay: '1h30m' });
  const a = await dq.show(q, 'd:1');
  assert.strictEqual(a.dueMs - a.createdMs, 90 * 60 * 1000);
  const at = new Date(now + 3600 * 1000);
  await dq.enqueue(q, 't', 'b', { id: 'at:1', at, priority: 'high', maxAttempts: 7 });
  const b = await dq.show(q, 'at:1');
  assert.strictEqual(b.dueMs, at.getTime());
  assert.strictEqual(b.priority, 0);
  assert.strictEqual(b.maxAttempts, 7);
  await dq.enqueue(q, 't2', 'c', { id: 'at:1', delay: 5000, priority: 'low', replace: true });
  const c = await dq.show(q, 'at:1');
  assert.strictEqual(c.type, 't2');
  assert.strictEqual(c.priority, 9);
  assert.strictEqual(c.payload.toString(), 'c');
  await dq.enqueue(q, 't', 'n', { id: 'ms:1', at: now + 1000, priority: 3 });
  assert.strictEqual((await dq.show(q, 'ms:1')).priority, 3);
});

test('generated ids count up and the queue is registered', async () => {
  const q = queueName('gen');
  const a = await dq.enqueue(q, 't', 'x');
  const b = await dq.enqueue(q, 't', 'x');
  assert.strictEqual(Number(b), Number(a) + 1);
  const raw = new (require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] })))({ path: redis.sock });
  assert.strictEqual(await raw.sismember('dq:queues', q), 1);
  raw.disconnect();
});

test('enqueueMany: jobs of several queues in one round trip, bad ones alone', async () => {
  const q1 = queueName('many');
  const q2 = queueName('many');
  const jobs = [];
  for (let i = 0; i < 2500; i++) jobs.push({ queue: i % 2 ? q1 : q2, type: 't', payload: `p${i}`, delay: 60000 });
  jobs.push({ queue: q1, type: 't', payload: 'dup', id: 'same' });
  jobs.push({ queue: q1, type: 't', payload: 'dup', id: 'same' });
  jobs.push({ queue: q1, type: 't', payload: 'bad', delay: -5 });
  const before = await evalshaCalls();
  const res = await dq.enqueueMany(jobs);
  const calls = (await evalshaCalls()) - before;
  // 1250 jobs per queue in calls of up to 1000, plus the ids: 4 calls.
  assert.strictEqual(calls, 4);
  assert.strictEqual(res.length, jobs.length);
  assert.strictEqual(res.filter((r) => r.id).length, 2501);
  assert.strictEqual(res[2501].error.code, 'exists');
  assert.strictEqual(res[2502].error.code, 'invalid');
  assert.strictEqual(new Set(res.slice(0, 2500).map((r, i) => `${jobs[i].queue} ${r.id}`)).size, 2500);
  assert.strictEqual((await dq.stats(q1)).delayed, 1250);
  assert.strictEqual((await dq.stats(q2)).delayed, 1250);
  const shown = await dq.show(q2, res[0].id);
  assert.strictEqual(shown.payload.toString(), 'p0');
});

async function evalshaCalls() {
  const info = String(await dq.conn.command('INFO', ['commandstats']));
  const m = /cmdstat_evalsha:calls=([0-9]+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

test('runNow makes a delayed job due; stats count it', async () => {
  const q = queueName('runnow');
  await dq.enqueue(q, 't', 'x', { id: 'r:1', delay: '1h' });
  let s = await dq.stats(q);
  assert.strictEqual(s.delayed, 1);
  assert.strictEqual(s.due, 0);
  await dq.runNow(q, 'r:1');
  s = await dq.stats(q);
  assert.strictEqual(s.due, 1);
  assert.strictEqual(s.dueByPriority[5], 1);
  await assert.rejects(dq.runNow(q, 'r:none'), { code: 'notfound', message: `no job r:none in queue ${q}` });
});

test('pause, paused and resume', async () => {
  const q = queueName('pause');
  assert.strictEqual(await dq.paused(q), -1);
  const since = await dq.pause(q);
  assert.ok(since > 0);
  assert.strictEqual(await dq.paused(q), since);
  assert.strictEqual(await dq.pause(q), since);
  assert.strictEqual(await dq.resume(q), since);
  assert.strictEqual(await dq.paused(q), -1);
  assert.strictEqual(await dq.resume(q), -1);
});

test('schedules: add, list, remove', async () => {
  const q = queueName('sched');
  // Once a year (January 1st), so that it is never sooner than 'often'
  // (soonest first), as a daily one is a minute or two each day.
  const next = await dq.scheduleAdd(q, 'nightly', '0 3 1 1 *', 'report', Buffer.from([0, 1]),
    { tz: 'Europe/Berlin', maxAttempts: 2, catchUp: 'none' });
  const now = await dq.serverTime();
  assert.ok(next > now && next <= now + 366 * 86400000);
  const every = await dq.scheduleAdd(q, 'often', '@every 90s', 'ping', 'x');
  assert.ok(every - now <= 90000 && every - now > 88000);
  await assert.rejects(dq.scheduleAdd(q, 'often', '@every 90s', 'ping', 'x'),
    { code: 'exists', message: `schedule often already exists in queue ${q} (use replace)` });
  await dq.scheduleAdd(q, 'often', '@every 2m', 'ping', 'y', { replace: true });
  const list = await dq.scheduleList(q);
  assert.deepStrictEqual(list.map((s) => s.name), ['often', 'nightly']);
  const nightly = list[1];
  assert.strictEqual(nightly.tz, 'Europe/Berlin');
  assert.strictEqual(nightly.catchUp, 'none');
  assert.strictEqual(nightly.maxAttempts, 2);
  assert.deepStrictEqual(nightly.payload, Buffer.from([0, 1]));
  assert.strictEqual(list[0].expr, '@every 2m');
  await dq.scheduleRemove(q, 'often');
  await assert.rejects(dq.scheduleRemove(q, 'often'), { code: 'notfound' });
  await assert.rejects(dq.scheduleAdd(q, 'bad', '0 25 * * *', 't', 'x'),
    { code: 'invalid', message: 'field 2 (hour) "25": 25 is not in 0..23' });
  await assert.rejects(dq.scheduleAdd(q, 'bad', '0 3 * * *', 't', 'x', { tz: 'Mars/Olympus' }), { code: 'invalid' });
  await assert.rejects(dq.scheduleAdd(q, 'a@b', '0 3 * * *', 't', 'x'), { code: 'invalid' });
  assert.strictEqual((await dq.scheduleList(q)).length, 1);
});

// Claim the due jobs of every partition through the claim script, as a
// worker does (a lease of 60 s): the ids handed out, sorted.
async function claimAll(q, n = 1) {
  const ids = [];
  for (let p = 0; p < n; p++) {
    const r = await dq.conn.evalScript('claim', dq.keysOf(q, p, n).keys, [1000, 60000]);
    for (let i = 0; i < Number(r[2]); i++) ids.push(String(r[3 + 4 * i]));
  }
  return ids.sort();
}

test('expireAt, ttl and onExpire reach show; a replacement keeps only its own', async () => {
  const q = queueName('expiry');
  await dq.enqueue(q, 't', 'x', { id: 'ttl', delay: '5m', ttl: '10m' });
  let j = await dq.show(q, 'ttl');
  assert.strictEqual(j.expireAtMs, j.dueMs + 600000);
  assert.strictEqual(j.onExpire, 'dead');
  await dq.enqueue(q, 't', 'x', { id: 'ms', delay: 1000, ttl: 5000, onExpire: 'drop' });
  j = await dq.show(q, 'ms');
  assert.deepStrictEqual([j.expireAtMs - j.dueMs, j.onExpire], [5000, 'drop']);
  const at = new Date((await dq.serverTime()) + 3600000);
  const until = new Date(at.getTime() + 1800000);
  await dq.enqueue(q, 't', 'x', { id: 'abs', at, expireAt: until, priority: 'high' });
  j = await dq.show(q, 'abs');
  assert.deepStrictEqual([j.dueMs, j.expireAtMs, j.priority], [at.getTime(), until.getTime(), 0]);
  await dq.enqueue(q, 't', 'x', { id: 'unix', at: at.getTime(), expireAt: until.getTime() + 1 });
  assert.strictEqual((await dq.show(q, 'unix')).expireAtMs, until.getTime() + 1);
  await dq.enqueue(q, 't', 'x', { id: 'plain', delay: 1000 });
  j = await dq.show(q, 'plain');
  assert.deepStrictEqual([j.expireAtMs, j.onExpire], [0, '']);
  await dq.enqueue(q, 't', 'x', { id: 'ttl', delay: 1000, replace: true });
  assert.strictEqual((await dq.show(q, 'ttl')).expireAtMs, 0);
  await dq.enqueue(q, 't', 'x', { id: 'plain', delay: 1000, replace: true, ttl: 2000 });
  j = await dq.show(q, 'plain');
  assert.strictEqual(j.expireAtMs, j.dueMs + 2000);
  assert.strictEqual((await dq.stats(q)).jobsExpired, 0);
});

test('a job past its expiry is never claimed: dead "expired", or dropped; stats count it', async () => {
  const q = queueName('expired');
  await dq.enqueue(q, 't', 'd', { id: 'x:dead', ttl: 150 });
  await dq.enqueue(q, 't', 'g', { id: 'x:drop', ttl: '150ms', onExpire: 'drop' });
  await dq.enqueue(q, 't', 'p', { id: 'plain' });
  await dq.enqueue(q, 't', 'l', { id: 'later', ttl: '1m' });
  await sleep(300);
  assert.deepStrictEqual(await claimAll(q), ['later', 'plain']);
  const j = await dq.show(q, 'x:dead');
  assert.deepStrictEqual([j.state, j.lastError, j.attempts, j.payload.toString()], ['dead', 'expired', 0, 'd']);
  assert.deepStrictEqual([j.expireAtMs, j.onExpire], [0, '']);
  assert.strictEqual(await dq.show(q, 'x:drop'), null);
  const s = await dq.stats(q);
  assert.deepStrictEqual([s.delayed, s.due, s.processing, s.dead, s.jobsExpired], [0, 0, 2, 1, 2]);
  const page = await dq.deadList(q);
  assert.deepStrictEqual(page.jobs.map((d) => [d.id, d.lastError]), [['x:dead', 'expired']]);
  await dq.requeue(q, 'x:dead');      // its expiry went with its death
  assert.deepStrictEqual(await claimAll(q), ['x:dead']);
});

test('enqueueMany carries expiries, on a partitioned queue too', async () => {
  const q = queueName('manyexp');
  await dq.setPartitions(q, 3);
  const now = await dq.serverTime();
  const res = await dq.enqueueMany([
    { queue: q, type: 't', payload: '', id: 'm:ttl', ttl: 150 },
    { queue: q, type: 't', payload: '', id: 'm:at', expireAt: now + 200, onExpire: 'drop' },
    { queue: q, type: 't', payload: '', id: 'm:prio', ttl: '150ms', priority: 'high' },
    { queue: q, type: 't', payload: '', id: 'm:plain' },
    { queue: q, type: 't', payload: '', ttl: 150 },
    { queue: q, type: 't', payload: '', id: 'm:long', delay: 100, ttl: 60000, onExpire: 'drop' },
  ]);
  assert.ok(res.every((r) => r.id), JSON.stringify(res.map((r) => r.error && r.error.message)));
  await dq.enqueue(q, 't', '', { id: 'one', ttl: 150, onExpire: 'drop' });
  const gen = res[4].id;
  const want = { 'm:ttl': [150, 'dead'], 'm:prio': [150, 'dead'], [gen]: [150, 'dead'], 'm:long': [60000, 'drop'], one: [150, 'drop'] };
  for (const [id, [ttl, mode]] of Object.entries(want)) {
    const j = await dq.show(q, id);
    assert.deepStrictEqual([j.expireAtMs - j.dueMs, j.onExpire], [ttl, mode], id);
  }
  const j = await dq.show(q, 'm:at');
  assert.deepStrictEqual([j.expireAtMs, j.onExpire], [now + 200, 'drop']);
  assert.strictEqual((await dq.show(q, 'm:prio')).priority, 0);
  assert.strictEqual((await dq.show(q, 'm:plain')).expireAtMs, 0);
  await sleep(400);
  assert.deepStrictEqual(await claimAll(q, 3), ['m:long', 'm:plain']);
  for (const id of ['m:ttl', 'm:prio', gen]) {
    const d = await dq.show(q, id);
    assert.deepStrictEqual([d.state, d.lastError], ['dead', 'expired'], id);
  }
  assert.strictEqual(await dq.show(q, 'm:at'), null);
  assert.strictEqual(await dq.show(q, 'one'), null);
  const s = await dq.stats(q);
  assert.deepStrictEqual([s.dead, s.processing, s.jobsExpired], [3, 2, 5]);
});

// Claim every due job of an unpartitioned queue and ack it, as a worker
// that succeeds does: the ids run, sorted.
async function runAll(q) {
  const keys = dq.keysOf(q, 0, 1).keys;
  const r = await dq.conn.evalScript('claim', keys, [1000, 60000]);
  const held = [];
  for (let i = 0; i < Number(r[2]); i++) held.push(String(r[3 + 4 * i]), String(r[5 + 4 * i]));
  if (held.length) {
    assert.deepStrictEqual(await dq.conn.evalScript('ack', keys, held), held.filter((_, i) => i % 2).map(() => 1));
  }
  return held.filter((_, i) => i % 2 === 0).sort();
}

test('a dedupe window keeps the id after its job ran: unique, uniqueOk, show says done', async () => {
  const q = queueName('unique');
  const hour = 3600000;
  assert.strictEqual(await dq.enqueue(q, 't', '1', { id: 'hook:1', uniqueFor: '1h' }), 'hook:1');
  let j = await dq.show(q, 'hook:1');
  assert.deepStrictEqual([j.state, j.uniqueMs, j.uniqueUntilMs], ['delayed', hour, 0]);
  assert.deepStrictEqual(await runAll(q), ['hook:1']);
  let err = null;
  await assert.rejects(dq.enqueue(q, 't', '2', { id: 'hook:1', uniqueFor: hour }), (e) => {
    err = e;
    return e.code === 'unique' && e.message === `job hook:1 in queue ${q} finished within its dedupe window`;
  });
  assert.strictEqual(err.untilMs, err.finishedMs + hour);
  assert.ok(Math.abs(err.finishedMs - await dq.serverTime()) < 5000);
  // a replace is refused too; uniqueOk resolves to the id; nothing is added
  await assert.rejects(dq.enqueue(q, 't', '3', { id: 'hook:1', replace: true }), { code: 'unique' });
  assert.strictEqual(await dq.enqueue(q, 't', '4', { id: 'hook:1', uniqueFor: hour, uniqueOk: true }), 'hook:1');
  j = await dq.show(q, 'hook:1');
  assert.deepStrictEqual([j.state, j.stateMs, j.uniqueMs, j.uniqueUntilMs, j.payload.length],
    ['done', err.finishedMs, hour, err.untilMs, 0]);
  const s = await dq.stats(q);
  assert.deepStrictEqual([s.delayed, s.due, s.processing, s.dead], [0, 0, 0, 0]);
  // a cancel starts the window too; without one an id is free at once
  await dq.enqueue(q, 't', 'x', { id: 'c:1', delay: 60000, uniqueFor: hour });
  await dq.enqueue(q, 't', 'x', { id: 'plain', delay: 60000 });
  assert.strictEqual(await dq.cancel(q, 'c:1'), true);
  assert.strictEqual(await dq.cancel(q, 'plain'), true);
  await assert.rejects(dq.enqueue(q, 't', 'x', { id: 'c:1' }), { code: 'unique' });
  assert.strictEqual(await dq.enqueue(q, 't', 'x', { id: 'plain' }), 'plain');
  assert.strictEqual((await dq.show(q, 'c:1')).state, 'done');
});

test('a short dedupe window ends: the id can be added again', async () => {
  const q = queueName('window');
  await dq.enqueue(q, 't', '1', { id: 'w', uniqueFor: '300ms' });
  assert.deepStrictEqual(await runAll(q), ['w']);
  let until = 0;
  await assert.rejects(dq.enqueue(q, 't', '2', { id: 'w' }), (e) => {
    until = e.untilMs;
    return e.code === 'unique';
  });
  await sleep(Math.max(0, until - await dq.serverTime()) + 20);
  assert.strictEqual(await dq.enqueue(q, 't', '2', { id: 'w' }), 'w');
  const j = await dq.show(q, 'w');
  assert.deepStrictEqual([j.state, j.payload.toString(), j.uniqueMs], ['delayed', '2', 0]);
  assert.deepStrictEqual(await runAll(q), ['w']);
  assert.strictEqual(await dq.show(q, 'w'), null);   // that job had no window
});

test('enqueueMany with windows on a partitioned queue: unique, finished, added', async () => {
  const q = queueName('manyunique');
  await dq.setPartitions(q, 3);
  let res = await dq.enqueueMany([
    { queue: q, type: 't', payload: '', id: 'a', uniqueFor: 60000 },
    { queue: q, type: 't', payload: '', id: 'b', uniqueFor: 60000, priority: 'high', ttl: 60000 },
  ]);
  assert.ok(res.every((r) => r.id && !r.finished));
  assert.deepStrictEqual(await claimAll(q, 3), ['a', 'b']);
  for (const id of ['a', 'b']) {
    const k = await dq.keysOfId(q, id);
    assert.deepStrictEqual(await dq.conn.evalScript('ack', k.keys, [id, (await dq.show(q, id)).fence]), [1]);
  }
  res = await dq.enqueueMany([
    { queue: q, type: 't', payload: '', id: 'a', uniqueFor: 60000 },
    { queue: q, type: 't', payload: '', id: 'b', uniqueFor: '1m', uniqueOk: true, delay: 5000 },
    { queue: q, type: 't', payload: '', id: 'c', uniqueFor: 60000, uniqueOk: true, delay: 5000 },
    { queue: q, type: 't', payload: '', id: 'a' },
    { queue: q, type: 't', payload: '', delay: 5000 },
  ]);
  assert.deepStrictEqual([res[0].error.code, res[0].error.untilMs], ['unique', null]);
  assert.deepStrictEqual(res[1], { id: 'b', finished: true });
  assert.deepStrictEqual(res[2], { id: 'c' });
  assert.strictEqual(res[3].error.code, 'unique');
  assert.match(res[4].id, /^[0-9]+$/);
  const states = [];
  for (const id of ['a', 'b', 'c', res[4].id]) states.push((await dq.show(q, id)).state);
  assert.deepStrictEqual(states, ['done', 'done', 'delayed', 'delayed']);
  assert.strictEqual((await dq.show(q, 'c')).uniqueMs, 60000);
  assert.strictEqual(await dq.enqueue(q, 't', '', { id: 'd', delay: 5000, priority: 'low', uniqueFor: '30s' }), 'd');
  const d = await dq.show(q, 'd');
  assert.deepStrictEqual([d.uniqueMs, d.priority, d.expireAtMs], [30000, 9, 0]);
  assert.strictEqual((await dq.stats(q)).delayed, 3);
});

test('a debounced add takes the waiting job\'s place, due later, never past maxWait', async () => {
  const q = queueName('debounce');
  const now = await dq.serverTime();
  const first = await dq.enqueue(q, 't', '1', { id: 'd', debounce: '1m', priority: 'low', detail: true });
  assert.deepStrictEqual(Object.keys(first).sort(), ['dueMs', 'id']);   // a new job
  assert.ok(first.dueMs >= now + 60000 && first.dueMs < now + 65000, JSON.stringify(first));
  let j = await dq.show(q, 'd');
  assert.deepStrictEqual([j.state, j.payload.toString(), j.dueMs, j.priority], ['delayed', '1', first.dueMs, 9]);
  const created = j.createdMs;
  await sleep(50);
  const again = await dq.enqueue(q, 'u', '2', { id: 'd', debounce: 60000, maxWait: '2m', detail: true });
  assert.deepStrictEqual([again.id, again.debounced, again.nextRun], ['d', true, undefined]);
  assert.ok(again.dueMs > first.dueMs);
  j = await dq.show(q, 'd');
  assert.deepStrictEqual([j.state, j.type, j.payload.toString(), j.dueMs, j.createdMs, j.priority],
    ['delayed', 'u', '2', again.dueMs, created, 5]);
  // never later than maxWait after the first add; without detail, the id
  assert.strictEqual(await dq.enqueue(q, 't', '3', { id: 'd', debounce: 60000, maxWait: '1s' }), 'd');
  j = await dq.show(q, 'd');
  assert.deepStrictEqual([j.payload.toString(), j.dueMs, j.createdMs], ['3', created + 1000, created]);
  const s = await dq.stats(q);
  assert.deepStrictEqual([s.delayed + s.due, s.processing], [1, 0]);
});

test('a debounced add while the job runs is its next run, which follows the ack', async () => {
  const q = queueName('debrun');
  await dq.enqueue(q, 't', '1', { id: 'r', debounce: 1 });
  await sleep(20);
  assert.deepStrictEqual(await claimAll(q), ['r']);
  const fence = (await dq.show(q, 'r')).fence;
  const now = await dq.serverTime();
  const next = await dq.enqueue(q, 't', '2', { id: 'r', debounce: '5s', detail: true });
  assert.deepStrictEqual([next.nextRun, next.debounced], [true, undefined]);
  assert.ok(next.dueMs >= now + 5000 && next.dueMs < now + 10000, JSON.stringify(next));
  const later = await dq.enqueue(q, 't', '3', { id: 'r', debounce: 5000, detail: true });
  assert.ok(later.nextRun && later.dueMs >= next.dueMs);
  let j = await dq.show(q, 'r');
  assert.deepStrictEqual([j.state, j.payload.toString(), j.fence], ['processing', '1', fence]);
  assert.deepStrictEqual(await dq.conn.evalScript('ack', dq.keysOf(q, 0, 1).keys, ['r', fence]), [1]);
  j = await dq.show(q, 'r');
  assert.deepStrictEqual([j.state, j.payload.toString(), j.dueMs, j.attempts], ['delayed', '3', later.dueMs, 0]);
  // a dead job keeps its id: exists
  await dq.enqueue(q, 't', 'x', { id: 'x' });
  assert.deepStrictEqual(await claimAll(q), ['x']);
  const k = dq.keysOf(q, 0, 1);
  await dq.conn.evalScript('fail', k.keys, [k.wake, 'x', (await dq.show(q, 'x')).fence, 'boom', 'dead',
    -1, 1000, 60000, 0, 1, 0]);
  await assert.rejects(dq.enqueue(q, 't', 'y', { id: 'x', debounce: 1000 }), { code: 'exists' });
  assert.deepStrictEqual([(await dq.show(q, 'x')).state, (await dq.show(q, 'x')).payload.toString()], ['dead', 'x']);
});

test('detail: replaced and finished; enqueueMany refuses a debounced add alone', async () => {
  const q = queueName('detail');
  await dq.enqueue(q, 't', 'a', { id: 'a', delay: '1h' });
  const now = await dq.serverTime();
  const r = await dq.enqueue(q, 't', 'b', { id: 'a', delay: 1000, replace: true, detail: true });
  assert.deepStrictEqual([r.id, r.replaced, r.finished], ['a', true, undefined]);
  assert.ok(r.dueMs >= now + 1000 && r.dueMs < now + 6000);
  await dq.enqueue(q, 't', 'w', { id: 'w', uniqueFor: '1h', delay: 60000 });
  await dq.cancel(q, 'w');
  const done = await dq.enqueue(q, 't', 'w', { id: 'w', uniqueFor: '1h', uniqueOk: true, detail: true });
  assert.deepStrictEqual([done.id, done.dueMs, done.finished, done.untilMs - done.finishedMs], ['w', 0, true, 3600000]);
  const res = await dq.enqueueMany([
    { queue: q, type: 't', payload: '', id: 'd1', debounce: 1000 },
    { queue: q, type: 't', payload: '', id: 'ok1' },
    { queue: q, type: 't', payload: '', id: 'd2', debounce: '1s', maxWait: '5s' },
    { queue: q, type: 't', payload: '', id: 'a', replace: true },
  ]);
  assert.deepStrictEqual(res.map((x) => x.error && [x.error.code, x.error.message]), [
    ['invalid', 'a debounced add goes one at a time (enqueue)'], undefined,
    ['invalid', 'a debounced add goes one at a time (enqueue)'], undefined]);
  assert.deepStrictEqual([res[1], res[3]], [{ id: 'ok1' }, { id: 'a', replaced: true }]);
  assert.deepStrictEqual([await dq.show(q, 'd1'), await dq.show(q, 'd2')], [null, null]);
});

test('schedules: pause keeps the definition and stops the ticks; resume fires from the next tick', async () => {
  const q = queueName('schedpause');
  await dq.scheduleAdd(q, 'often', '@every 90s', 'ping', 'x');
  await dq.scheduleAdd(q, 'nightly', '0 3 * * *', 'report', '', { tz: 'Europe/Berlin' });
  let now = await dq.serverTime();
  const since = await dq.schedulePause(q, 'nightly');
  assert.ok(Math.abs(since - now) < 5000);
  let list = await dq.scheduleList(q);
  assert.deepStrictEqual(list.map((s) => [s.name, s.nextMs === -1, s.pausedSinceMs]),
    [['often', false, -1], ['nightly', true, since]]);
  await sleep(10);
  assert.strictEqual(await dq.schedulePause(q, 'nightly'), since);   // the first pause's time
  // a replace keeps it paused, with the new definition
  assert.strictEqual(await dq.scheduleAdd(q, 'nightly', '0 4 * * *', 'report', '',
    { tz: 'Europe/Berlin', replace: true }), -1);
  assert.strictEqual((await dq.scheduleList(q))[1].pausedSinceMs, since);
  now = await dq.serverTime();
  const next = await dq.scheduleResume(q, 'nightly');
  assert.ok(next > now && next <= now + 86400000, `${next} after ${now}`);
  assert.strictEqual(new Date(next).getUTCMinutes(), 0);
  assert.ok([2, 3].includes(new Date(next).getUTCHours()), '04:00 in Berlin');
  list = await dq.scheduleList(q);
  const n = list.find((s) => s.name === 'nightly');
  assert.deepStrictEqual([n.nextMs, n.pausedSinceMs, n.expr], [next, -1, '0 4 * * *']);
  // resuming a running schedule changes nothing: its next tick
  assert.strictEqual(await dq.scheduleResume(q, 'nightly'), next);
  for (const call of ['schedulePause', 'scheduleResume']) {
    await assert.rejects(dq[call](q, 'none'), { code: 'notfound', message: `no schedule none in queue ${q}` });
    await assert.rejects(dq[call](q, 'a@b'), { code: 'invalid' });
  }
});
