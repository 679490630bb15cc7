// The delayq Node client's side of bench/producers/run.py: enqueue() one
// call at a time, or enqueueMany() in calls of 1000 (pipelined: one round
// trip per call), the same job as the other producers. NODE_PATH must
// reach the build's staged package (run.py sets it).
'use strict';
const path = require('path');
const { Client } = require(path.join(process.env.DQ_NODE_PKG));
const [, , target, nArg, mode] = process.argv;
const n = Number(nArg);
const BULK = 1000;
const payload = Buffer.from('{"order":1234}');
const DELAY = 30 * 60 * 1000;

async function main() {
  const dq = Client.fromUrl('redis://' + target);
  await dq.enqueue('bench', 'order.cancel', payload, { delay: DELAY });   // loads the script
  console.log('ready');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.destroy();
  const t0 = process.hrtime.bigint();
  if (mode === 'one') {
    for (let i = 0; i < n; i++) await dq.enqueue('bench', 'order.cancel', payload, { delay: DELAY });
  } else {
    for (let done = 0; done < n; done += BULK) {
      const k = Math.min(BULK, n - done);
      const got = await dq.enqueueMany(Array.from({ length: k },
        () => ({ queue: 'bench', type: 'order.cancel', payload, delay: DELAY })));
      const bad = got.find((r) => r.error);
      if (bad) throw bad.error;
    }
  }
  console.log((Number(process.hrtime.bigint() - t0) / 1e9).toFixed(6));
  await dq.close();
}
main().catch((e) => { console.error(e.message); process.exit(1); });
