'use strict';
// Redis Cluster: three real masters (TCP on free ports of 127.0.0.1, the
// slots split in three), a partitioned queue spread over them, every call
// routed by its keys, enqueueMany in one pipeline per master, and the
// scripts loaded again on every master after SCRIPT FLUSH.

const test = require('node:test');
const assert = require('node:assert');
const { startRedis, freePort, delayq, queueName, sleep } = require('./redis');

const Redis = require(require.resolve('ioredis', { paths: [process.env.DELAYQ_NODE_PKG] }));
const { Client } = delayq();
const masters = [];
const raws = [];
let dq;

// A cluster node on two free ports of its own: the client port and the bus
// port named apart (the default, port + 10000, is past 65535 for a quarter
// of the kernel's ephemeral range, and redis-server then exits).  A port
// taken between the probe and the bind is retried on another pair.
async function startNode() {
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    const bus = await freePort();
    if (bus === port) continue;
    try {
      const node = await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
        '--cluster-port', String(bus), '--cluster-node-timeout', '5000'], port);
      node.bus = bus;
      return node;
    } catch (e) {
      if (tries >= 4) throw e;
    }
  }
}

test.before(async () => {
  for (let i = 0; i < 3; i++) {
    masters.push(await startNode());
    raws.push(new Redis({ path: masters[i].sock }));
  }
  const ranges = [[0, 5460], [5461, 10922], [10923, 16383]];
  for (let i = 0; i < 3; i++) {
    await raws[i].call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
    const slots = [];
    for (let s = ranges[i][0]; s <= ranges[i][1]; s++) slots.push(s);
    await raws[i].call('CLUSTER', 'ADDSLOTS', ...slots);
  }
  // Every node meets node 0 (so that each learns the address it is known by).
  for (let i = 1; i < 3; i++) await raws[i].call('CLUSTER', 'MEET', '127.0.0.1', String(masters[0].port),
    String(masters[0].bus));
  // Until every node says ok, knows the others by their addresses, and
  // maps the slots the same way (a node that is ok may still send a
  // client on to a master it has not met yet).
  let agreed = false;
  for (let t = 0; t < 400 && !agreed; t++) {
    const states = await Promise.all(raws.map((r) => r.call('CLUSTER', 'INFO')));
    const nodes = await Promise.all(raws.map((r) => r.call('CLUSTER', 'NODES')));
    const maps = await Promise.all(raws.map(async (r) => JSON.stringify(
      (await r.call('CLUSTER', 'SLOTS')).map((e) => [e[0], e[1], e[2][1]]).sort((a, b) => a[0] - b[0]))));
    agreed = states.every((s) => /cluster_state:ok/.test(s) && /cluster_known_nodes:3/.test(s))
      && nodes.every((s) => !/handshake|:0@/.test(s)) && maps.every((m) => m === maps[0]);
    if (!agreed) await sleep(50);
  }
  if (!agreed) throw new Error('the test cluster did not agree on its slots within 20 s');
  dq = new Client({ cluster: true, nodes: [{ host: '127.0.0.1', port: masters[0].port }] });
});

test.after(async () => {
  if (dq) await dq.close();
  for (const r of raws) r.disconnect();
  for (const m of masters) await m.stop();
});

async function evalshaCalls(r) {
  const m = /cmdstat_evalsha:calls=([0-9]+)/.exec(await r.call('INFO', 'commandstats'));
  return m ? Number(m[1]) : 0;
}

test('a partitioned queue over three masters: every call finds its job', async () => {
  const q = queueName('cl');
  await dq.setPartitions(q, 6);
  assert.strictEqual(await dq.partitions(q), 6);
  const ids = [];
  for (let i = 0; i < 12; i++) ids.push(await dq.enqueue(q, 't', Buffer.from([i, 0, 255]), { delay: 60000 }));
  for (let i = 0; i < 6; i++) ids.push(await dq.enqueue(q, 't', `named ${i}`, { id: `order:${i}`, delay: 60000 }));
  // The partitions' keys are spread: each master holds some of the jobs.
  const held = await Promise.all(raws.map((r) => r.call('DBSIZE')));
  assert.ok(held.every((n) => n > 0), `keys on every master: ${held}`);
  for (const [i, id] of ids.slice(0, 12).entries()) assert.deepStrictEqual((await dq.show(q, id)).payload, Buffer.from([i, 0, 255]));
  const s = await dq.stats(q);
  assert.strictEqual(s.delayed, 18);
  assert.strictEqual(await dq.cancel(q, 'order:3'), true);
  await dq.runNow(q, ids[0]);
  assert.strictEqual((await dq.stats(q)).due, 1);
  const since = await dq.pause(q);
  assert.strictEqual(await dq.paused(q), since);
  await dq.resume(q);
});

test('enqueueMany sends one pipeline per master', async () => {
  const q = queueName('clmany');
  await dq.setPartitions(q, 6);
  // The first call on a master loads the script there (NOSCRIPT, then
  // SCRIPT LOAD and the calls again): warm every master up first.
  await dq.enqueueMany(Array.from({ length: 6 }, () => ({ queue: q, type: 't', payload: 'w', delay: 60000 })));
  const before = await Promise.all(raws.map(evalshaCalls));
  const jobs = Array.from({ length: 600 }, (_, i) => ({ queue: q, type: 't', payload: `p${i}`, delay: 60000 }));
  const res = await dq.enqueueMany(jobs);
  assert.ok(res.every((r) => r.id), JSON.stringify(res.find((r) => !r.id)));
  const after = await Promise.all(raws.map(evalshaCalls));
  // One enqueue_many per partition (six), spread over the masters.
  assert.strictEqual(after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0), 6);
  assert.strictEqual((await dq.stats(q)).delayed, 606);
  assert.strictEqual((await dq.show(q, res[599].id)).payload.toString(), 'p599');
});

test('SCRIPT FLUSH on every master: the scripts are loaded again', async () => {
  const q = queueName('clflush');
  await dq.setPartitions(q, 3);
  await dq.enqueue(q, 't', 'x', { id: 'f:1' });
  for (const r of raws) await r.call('SCRIPT', 'FLUSH');
  assert.strictEqual(await dq.enqueue(q, 't', 'y', { id: 'f:2' }), 'f:2');
  for (const r of raws) await r.call('SCRIPT', 'FLUSH');
  const res = await dq.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ queue: q, type: 't', payload: `${i}` })));
  assert.ok(res.every((r) => r.id), JSON.stringify(res.find((r) => !r.id)));
  assert.strictEqual((await dq.stats(q)).due, 32);
});

test('a cluster that cannot be reached fails the call with connect', async () => {
  const port = await freePort();
  const c = new Client({ cluster: true, nodes: [{ host: '127.0.0.1', port }], connectTimeout: 1000 });
  await assert.rejects(c.enqueue('q', 't', 'x'), (e) => {
    assert.strictEqual(e.code, 'connect');
    assert.match(e.message, /^cannot connect to redis at cluster 127\.0\.0\.1:[0-9]+: /);
    return true;
  });
  await c.close();
});

// Last: it kills a master of the cluster the tests above share.
test('a master out of reach fails only the enqueueMany jobs bound for it', async () => {
  const K = require(require('path').join(process.env.DELAYQ_NODE_PKG, 'lib', 'keys'));
  const q = queueName('cldown');
  const n = 12;
  await dq.setPartitions(q, n);
  await dq.enqueue(q, 't', 'x', { id: 'first', delay: 60000 });   // registered, count read
  // The victim holds partitions, but neither the queue's meta nor the
  // registry (a call needs both before it sends a job).
  const ranges = [[0, 5460], [5461, 10922], [10923, 16383]];
  const nodeOf = (key) => ranges.findIndex(([lo, hi]) => K.keySlot(key) >= lo && K.keySlot(key) <= hi);
  const keep = new Set([nodeOf(`dq:{${q}}:meta`), nodeOf('dq:queues')]);
  const victim = [0, 1, 2].find((i) => !keep.has(i));
  const onVictim = new Set([...Array(n).keys()].filter((p) => nodeOf(`dq:{${q}:${p}}:jobs`) === victim));
  assert.ok(onVictim.size > 0);
  // The others keep answering once they mark it failed (cluster-node-timeout
  // 5 s): the default stops every master then.
  for (const i of [0, 1, 2].filter((k) => k !== victim)) {
    await raws[i].call('CONFIG', 'SET', 'cluster-require-full-coverage', 'no');
  }
  raws[victim].disconnect();   // the test's own connection: no reconnecting to a dead node
  process.kill(masters[victim].pid, 'SIGKILL');
  await masters[victim].stop();
  const jobs = Array.from({ length: 60 }, (_, i) => ({ queue: q, type: 't', id: `job:${i}`, payload: 'p', delay: 60000 }));
  const t0 = Date.now();
  const res = await dq.enqueueMany(jobs);
  const took = Date.now() - t0;
  const down = jobs.filter((j) => onVictim.has(K.partitionOf(j.id, n))).map((j) => j.id);
  assert.ok(down.length > 0 && down.length < 60, `${down.length}`);
  for (const [k, j] of jobs.entries()) {
    if (down.includes(j.id)) {
      assert.strictEqual(res[k].error && res[k].error.code, 'connect', `${j.id}: ${JSON.stringify(res[k])}`);
      assert.match(res[k].error.message, new RegExp(`127\\.0\\.0\\.1:${masters[victim].port}\\b`),
        `${j.id}: the error names the master down`);
    } else {
      assert.strictEqual(res[k].id, j.id, `${j.id}: ${res[k].error}`);
      const shown = await dq.show(q, j.id).catch((e) => e);
      assert.strictEqual(shown.type, 't', `${j.id} (partition ${K.partitionOf(j.id, n)} on master ` +
        `${nodeOf(`dq:{${q}:${K.partitionOf(j.id, n)}}:jobs`)}, master ${victim} down): ${shown.message}`);
    }
  }
  console.error(`enqueueMany with a master down: ${60 - down.length} jobs scheduled, ${down.length} ` +
    `refused in ${took} ms (${res[jobs.findIndex((j) => down.includes(j.id))].error.message})`);
  // The same under durability "replicated", where each master's calls are
  // followed by a WAIT on its own connection: the victim's jobs fail with
  // connect, naming it (not with a MOVED from another master); the others
  // were written and fail the WAIT, as these masters have no replica.
  const rdq = new Client({ cluster: true, nodes: [{ host: '127.0.0.1', port: masters[(victim + 1) % 3].port }],
    durability: 'replicated', replicationTimeout: 100 });
  try {
    const rres = await rdq.enqueueMany(jobs.map((j) => ({ ...j, id: `r${j.id}` })));
    for (const [k, j] of jobs.entries()) {
      const e = rres[k].error;
      if (onVictim.has(K.partitionOf(`r${j.id}`, n))) {
        assert.strictEqual(e && e.code, 'connect', `r${j.id}: ${JSON.stringify(rres[k])} ${e && e.message}`);
        assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${masters[victim].port}\\b`));
      } else {
        assert.strictEqual(e && e.code, 'timeout', `r${j.id}: ${JSON.stringify(rres[k])} ${e && e.message}`);
        assert.match(e.message, /not replicated/);
      }
    }
  } finally {
    await rdq.close();
  }
});
