// Compiled (never run) by types.test.js with tsc --strict --noEmit: the
// README's calls must type-check against index.d.ts.
import { Client, DelayqError, Enqueued, EnqueueResult, Job, Stats, parseDuration } from 'delayq';

async function orderTimeout(): Promise<void> {
  const dq: Client = Client.fromUrl('redis://localhost:6379/0');
  const id: string = await dq.enqueue('orders', 'order.cancel', Buffer.from('{"order":1234}'),
    { delay: '30m', id: 'order:1234:cancel' });
  const cancelled: boolean = await dq.cancel('orders', id);
  await dq.enqueue('orders', 't', 'text', { at: new Date(), priority: 'high', maxAttempts: 3, replace: true });
  await dq.enqueue('orders', 't', new Uint8Array([1, 2]), { delay: 5000, priority: 7 });
  await dq.enqueue('orders', 't', 'x', { delay: '5m', ttl: '10m', onExpire: 'drop' });
  await dq.enqueue('orders', 't', 'x', { at: Date.now() + 1000, expireAt: new Date(Date.now() + 60000) });
  await dq.enqueue('orders', 't', 'x', { id: 'hook:1', uniqueFor: '1h', uniqueOk: true });
  const got: Enqueued = await dq.enqueue('orders', 't', 'x', { id: 'search:1', debounce: '500ms', maxWait: 2000, detail: true });
  if (got.debounced || got.nextRun) console.log(got.id, got.dueMs);
  if (got.finished && got.cancelled) console.log(got.finishedMs, got.untilMs);
  const plain: string = await dq.enqueue('orders', 't', 'x', { id: 'search:1', debounce: 500, detail: false });
  console.log(plain);
  try {
    await dq.enqueue('orders', 't', 'x', { id: 'hook:1', uniqueFor: 3600000 });
  } catch (e) {
    if (e instanceof DelayqError && e.code === 'unique') console.log(e.finishedMs, e.untilMs, e.cancelled === true);
  }
  const many: EnqueueResult[] = await dq.enqueueMany([{ queue: 'orders', type: 't', payload: 'x', delay: '1h' },
    { queue: 'orders', type: 't', payload: 'x', ttl: 60000, onExpire: 'dead' }]);
  for (const r of many) {
    if (r.error) console.log(r.error.code, r.error.message);
    else console.log(r.id.length, r.finished === true, r.replaced === true);
  }
  const job: Job | null = await dq.show('orders', id);
  if (job) console.log(job.payload.byteLength, job.state, job.priority, job.expireAtMs, job.onExpire);
  if (job && job.state === 'done') console.log(job.stateMs, job.uniqueMs, job.uniqueUntilMs);
  if (job && job.state === 'cancelled') console.log(job.stateMs, job.fence, job.uniqueUntilMs);
  const s: Stats = await dq.stats('orders');
  console.log(s.dueByPriority[0], s.jobsExpired, s.jobsCancelled, cancelled, parseDuration('1h30m'));
  await dq.runNow('orders', id);
  const since: number = await dq.pause('orders');
  console.log(since, await dq.paused('orders'), await dq.resume('orders'));
  const page = await dq.deadList('orders', { offset: 0, count: 10 });
  console.log(page.total, page.jobs[0]?.lastError);
  await dq.requeue('orders', id);
  const n: number = (await dq.requeueAll('orders')) + (await dq.purgeAll('orders'));
  await dq.purge('orders', id);
  const next: number = await dq.scheduleAdd('orders', 'nightly', '0 3 * * *', 'report', '', { tz: 'Europe/Berlin', catchUp: 'none' });
  const list = await dq.scheduleList('orders');
  console.log(n, next, list[0]?.nextMs);
  const pausedAt: number = await dq.schedulePause('orders', 'nightly');
  const resumed: number = await dq.scheduleResume('orders', 'nightly');
  console.log(pausedAt, resumed);
  await dq.scheduleRemove('orders', 'nightly');
  const conf = Client.fromConfig('/etc/delayq/delayqd.conf', { durability: 'replicated' });
  try {
    await conf.stats('orders');
  } catch (e) {
    if (e instanceof DelayqError && e.code === 'connect') console.log(e.message);
  }
  await new Client({ sentinel: { master: 'jobs', nodes: [{ host: 'a', port: 26379 }] } }).close();
  await new Client({ cluster: true, nodes: [{ host: 'a', port: 7000 }] }).close();
  await dq.close();
}

void orderTimeout;
