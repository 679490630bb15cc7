#!/usr/bin/env node
'use strict';
// Producers in Node, side by side on one private redis-server: the delayq
// package (enqueue one at a time, enqueueMany) and BullMQ (Queue.add,
// Queue.addBulk), each job delayed by 30 minutes with the same payload.
// Prints, per row, jobs a second (wall clock of the producer) and Redis's
// own time per job (INFO commandstats, reset before each run).
//
//   node bench/node-producers.js --package BUILD/clients/node \
//        [--bullmq DIR] [--jobs 10000] [--rounds 3] [--redis-server PATH]
//
// DIR holds node_modules/bullmq and node_modules/ioredis
// (npm install --no-save bullmq ioredis@5 in an empty directory); without
// it the BullMQ rows are left out.  docs/benchmarks-producers-node.md has
// the figures and the commands that made them.

const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

function args() {
  const a = { jobs: 10000, rounds: 3, server: process.env.REDIS_SERVER || 'redis-server' };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '--package') a.pkg = path.resolve(v[++i]);
    else if (v[i] === '--bullmq') a.bullmq = path.resolve(v[++i]);
    else if (v[i] === '--jobs') a.jobs = Number(v[++i]);
    else if (v[i] === '--rounds') a.rounds = Number(v[++i]);
    else if (v[i] === '--redis-server') a.server = v[++i];
    else throw new Error(`unknown argument ${v[i]}`);
  }
  if (!a.pkg) throw new Error('--package BUILD/clients/node is required');
  return a;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PAYLOAD = '{"order":1234,"customer":"c-5678","total":"59.90"}';
const DELAY = 30 * 60 * 1000;

async function startRedis(server, dir, Redis) {
  const sock = path.join(dir, 'redis.sock');
  const child = spawn(server, ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no',
    '--dir', dir, '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
  for (let i = 0; i < 200 && !fs.existsSync(sock); i++) await sleep(20);
  const raw = new Redis({ path: sock });
  await raw.ping();
  return { sock, raw, stop: () => { raw.disconnect(); child.kill('SIGTERM'); } };
}

// Redis's time (µs) in scripts since the last reset, and the script
// calls: EVALSHA's (and EVAL's) own figures, which include the commands a
// script runs.  (Summing every cmdstat line would count those twice: a
// command inside a script has its own line too.)  Both producers do their
// work in scripts; any other command (a registration's SADD) is left out.
async function redisUsec(raw) {
  const info = await raw.info('commandstats');
  let usec = 0;
  let calls = 0;
  for (const m of info.matchAll(/cmdstat_(evalsha|eval|evalsha_ro|eval_ro):calls=([0-9]+),usec=([0-9]+)/g)) {
    calls += Number(m[2]);
    usec += Number(m[3]);
  }
  return { usec, calls };
}

async function measure(r, name, jobs, fn) {
  await r.raw.flushall();
  await fn(0, true);            // warm up: scripts loaded, connections made
  await r.raw.flushall();
  await r.raw.config('RESETSTAT');
  const t0 = process.hrtime.bigint();
  await fn(jobs, false);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const { usec, calls } = await redisUsec(r.raw);
  return { name, rate: jobs / secs, usPerJob: usec / jobs, callsPerJob: calls / jobs };
}

async function main() {
  const a = args();
  const { Client } = require(a.pkg);
  const Redis = require(require.resolve('ioredis', { paths: [a.pkg] }));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-bench-node-'));
  const r = await startRedis(a.server, dir, Redis);
  const payload = Buffer.from(PAYLOAD);
  const rows = new Map();
  const dq = Client.fromUrl(`unix://${r.sock}`);
  const runs = [
    ['delayq enqueue (one at a time)', async (n, warm) => {
      for (let i = 0; i < (warm ? 10 : n); i++) await dq.enqueue('bench', 'order.cancel', payload, { delay: DELAY });
    }],
    ['delayq enqueueMany (one call)', async (n, warm) => {
      const jobs = Array.from({ length: warm ? 10 : n }, () => ({ queue: 'bench', type: 'order.cancel', payload, delay: DELAY }));
      const res = await dq.enqueueMany(jobs);
      if (res.some((x) => x.error)) throw res.find((x) => x.error).error;
    }],
  ];
  let queue = null;
  if (a.bullmq) {
    const { Queue } = require(require.resolve('bullmq', { paths: [a.bullmq] }));
    queue = new Queue('bench', { connection: { path: r.sock } });
    runs.push(['BullMQ Queue.add (one at a time)', async (n, warm) => {
      for (let i = 0; i < (warm ? 10 : n); i++) await queue.add('order.cancel', PAYLOAD, { delay: DELAY });
    }]);
    runs.push(['BullMQ Queue.addBulk (one call)', async (n, warm) => {
      await queue.addBulk(Array.from({ length: warm ? 10 : n }, () => ({ name: 'order.cancel', data: PAYLOAD, opts: { delay: DELAY } })));
    }]);
  }
  // Rounds alternate the order of the rows, so that a load that drifts
  // over the run weighs on each alike.
  for (let round = 0; round < a.rounds; round++) {
    const order = round % 2 ? runs.slice().reverse() : runs;
    for (const [name, fn] of order) {
      const m = await measure(r, name, a.jobs, fn);
      if (!rows.has(name)) rows.set(name, []);
      rows.get(name).push(m);
    }
  }
  const median = (xs) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  console.log(`node ${process.version}, ${os.cpus().length} cores, ${a.jobs} jobs per run, ` +
    `${a.rounds} rounds (medians; range in brackets), payload ${payload.length} bytes, delay 30 min`);
  console.log('| producer | jobs/s | Redis µs per job (in scripts) | script calls per job |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [name, ms] of rows) {
    const rate = ms.map((m) => m.rate);
    const us = ms.map((m) => m.usPerJob);
    console.log(`| ${name} | ${Math.round(median(rate))} (${Math.round(Math.min(...rate))}-${Math.round(Math.max(...rate))}) ` +
      `| ${median(us).toFixed(1)} (${Math.min(...us).toFixed(1)}-${Math.max(...us).toFixed(1)}) | ${median(ms.map((m) => m.callsPerJob)).toFixed(3)} |`);
  }
  await dq.close();
  if (queue) await queue.close();
  r.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}

main().catch((e) => { console.error(`node-producers: ${e.stack || e}`); process.exit(1); });
