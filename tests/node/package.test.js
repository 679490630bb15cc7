'use strict';
// npm pack of the build's package, installed offline from the tarball
// into an empty directory that holds only ioredis (as a service that has
// its dependencies): the installed package enqueues and cancels.

const test = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { startRedis } = require('./redis');

const PKG = process.env.DELAYQ_NODE_PKG;

function npm(args, cwd) {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  assert.strictEqual(r.status, 0, `npm ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

test('the packed tarball installs offline and works', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-node-pack-'));
  const out = npm(['pack', '--silent', '--pack-destination', dir, PKG], dir).trim().split('\n').pop();
  const tgz = path.join(dir, out);
  assert.ok(fs.existsSync(tgz), tgz);
  const list = spawnSync('tar', ['tzf', tgz], { encoding: 'utf8' }).stdout.split('\n');
  for (const f of ['package/index.js', 'package/index.d.ts', 'package/README.md', 'package/scripts/enqueue.lua',
    'package/scripts/enqueue_many.lua', 'package/lib/conn.js']) assert.ok(list.includes(f), f);
  assert.ok(!list.some((f) => f.includes('node_modules')), 'no node_modules in the tarball');

  const app = path.join(dir, 'app');
  fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true });
  fs.writeFileSync(path.join(app, 'package.json'), '{ "private": true }\n');
  for (const m of fs.readdirSync(path.join(PKG, 'node_modules'))) {
    if (m.startsWith('.')) continue;
    fs.cpSync(path.join(PKG, 'node_modules', m), path.join(app, 'node_modules', m), { recursive: true });
  }
  npm(['install', '--offline', '--no-audit', '--no-fund', '--no-save', '--no-package-lock', tgz], app);

  const redis = await startRedis();
  const script = `
    const { Client } = require('delayq');
    (async () => {
      const dq = Client.fromUrl('unix://${redis.sock}');
      const id = await dq.enqueue('orders', 'order.cancel', Buffer.from([0, 1, 255]), { delay: '30m', id: 'order:1:cancel' });
      const job = await dq.show('orders', id);
      console.log(job.payload.toString('hex'), await dq.cancel('orders', id));
      await dq.close();
    })().catch((e) => { console.error(e.message); process.exit(1); });`;
  const r = spawnSync(process.execPath, ['-e', script], { cwd: app, encoding: 'utf8' });
  await redis.stop();
  assert.strictEqual(r.status, 0, r.stderr);
  assert.strictEqual(r.stdout.trim(), '0001ff true');
  fs.rmSync(dir, { recursive: true, force: true });
});
