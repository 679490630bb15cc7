'use strict';
// The package's scripts are the build's scripts: byte for byte the texts
// libdelayq embeds (the build tree's scripts/NAME.lua, prelude included),
// every one of them, with the SHA1 Redis computes; and a flushed script
// cache (a restart, a failover, SCRIPT FLUSH) is reloaded, not failed.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { startRedis, delayq, queueName } = require('./redis');

const BUILD = process.env.DELAYQ_SCRIPTS_DIR;
const PKG_SCRIPTS = path.join(process.env.DELAYQ_NODE_PKG, 'scripts');
const { Client } = delayq();

function luaFiles(dir) {
  return fs.readdirSync(dir).filter((f) => f.endsWith('.lua')).sort();
}

test('the package carries every script of the build, byte for byte', () => {
  const build = luaFiles(BUILD);
  assert.ok(build.length >= 20, `the build has scripts (${build.length})`);
  assert.deepStrictEqual(luaFiles(PKG_SCRIPTS), build);
  for (const f of build) {
    const a = fs.readFileSync(path.join(BUILD, f));
    const b = fs.readFileSync(path.join(PKG_SCRIPTS, f));
    assert.ok(a.equals(b), `${f} differs from the C library's`);
  }
  // And every SCRIPT_NAMES entry of Makefile.am is there.
  const am = fs.readFileSync(path.join(process.env.DELAYQ_SRCDIR, 'Makefile.am'), 'utf8');
  const names = /SCRIPT_NAMES = ([^]*?)\n[A-Z]/.exec(am)[1].replace(/\\\n/g, ' ').trim().split(/\s+/);
  assert.deepStrictEqual(names.map((n) => `${n}.lua`).sort(), build);
});

test('the client runs the texts by the SHA1 Redis gives them', async () => {
  const redis = await startRedis();
  const dq = Client.fromUrl(`unix://${redis.sock}`);
  for (const f of luaFiles(BUILD)) {
    const text = fs.readFileSync(path.join(BUILD, f));
    const sha = String(await dq.conn.command('SCRIPT', ['LOAD', text]));
    assert.strictEqual(sha, crypto.createHash('sha1').update(text).digest('hex'), f);
  }
  await dq.close();
  await redis.stop();
});

test('NOSCRIPT: a flushed script cache is reloaded between calls', async () => {
  const redis = await startRedis();
  const dq = Client.fromUrl(`unix://${redis.sock}`);
  const q = queueName('flush');
  const loads = async () => {
    const info = String(await dq.conn.command('INFO', ['commandstats']));
    const m = /cmdstat_script\|load:calls=([0-9]+)/.exec(info) || /cmdstat_script:calls=([0-9]+)/.exec(info);
    return m ? Number(m[1]) : 0;
  };
  await dq.enqueue(q, 't', 'x', { id: 'f:1' });
  const before = await loads();
  await dq.conn.command('SCRIPT', ['FLUSH']);
  assert.strictEqual(await dq.enqueue(q, 't', 'x', { id: 'f:2' }), 'f:2');
  await dq.conn.command('SCRIPT', ['FLUSH']);
  assert.strictEqual((await dq.show(q, 'f:1')).state, 'delayed');
  await dq.conn.command('SCRIPT', ['FLUSH']);
  assert.strictEqual(await dq.cancel(q, 'f:1'), true);
  await dq.conn.command('SCRIPT', ['FLUSH']);
  const res = await dq.enqueueMany([{ queue: q, type: 't', payload: 'a' }, { queue: q, type: 't', payload: 'b', id: 'f:3' }]);
  assert.ok(res.every((r) => r.id), JSON.stringify(res));
  assert.strictEqual((await dq.stats(q)).due, 3);
  assert.ok((await loads()) - before >= 4, 'loaded again after each flush');
  await dq.close();
  await redis.stop();
});
