// BullMQ's side of bench/producers/run.py: Queue.add one at a time, or
// Queue.addBulk in calls of 1000, each job delayed 30 minutes, same payload.
// Needs bullmq installed where NODE_PATH points (run.py says how).
'use strict';
const { Queue } = require('bullmq');
const [, , target, nArg, mode] = process.argv;
const n = Number(nArg);
const [host, port] = target.split(':');
const BULK = 1000;
const data = { order: 1234 };
const opts = { delay: 30 * 60 * 1000 };

async function main() {
  const q = new Queue('bench', { connection: { host, port: Number(port) } });
  await q.add('order.cancel', data, opts);          // connect, load scripts
  console.log('ready');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.destroy();
  const t0 = process.hrtime.bigint();
  if (mode === 'one') {
    for (let i = 0; i < n; i++) await q.add('order.cancel', data, opts);
  } else {
    for (let done = 0; done < n; done += BULK) {
      const k = Math.min(BULK, n - done);
      await q.addBulk(Array.from({ length: k }, () => ({ name: 'order.cancel', data, opts })));
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(secs.toFixed(6));
  await q.close();
}
main().catch((e) => { console.error(e.message); process.exit(1); });
