'use strict';
// Recurring schedules (src/lib/ops_sched.c): add, list, remove.  They
// live with the queue's unpartitioned keys, or partition 0's.

const { Client, str, int } = require('./client');
const { fail } = require('./errors');
const K = require('./keys');
const cron = require('./cron');

const LIST_MAX = 10000;
const CATCH_UP = ['one', 'all', 'none'];
const P = Client.prototype;

// The eight keys of the schedule scripts.
P.schedKeys = async function schedKeys(queue) {
  const n = await this.partCount(queue);
  return [...this.keysOf(queue, 0, n).keys, ...K.schedKeys(this.prefix, queue, n)];
};

function checkName(name) {
  const why = K.checkScheduleName(name);
  if (why) throw fail('invalid', why);
}

// scheduleAdd(queue, name, expr, type, payload, {tz, maxAttempts,
// catchUp: 'one'|'all'|'none', replace}) -> the first tick (Unix ms).
P.scheduleAdd = async function scheduleAdd(queue, name, expr, type, payload, opts = {}) {
  this.checkQueue(queue);
  const why = K.checkType(type);
  if (why) throw fail('invalid', why);
  checkName(name);
  const tz = opts.tz || '';
  let e;
  try {
    e = cron.parse(expr);
    cron.checkZone(tz);
  } catch (err) {
    throw fail('invalid', err.message);
  }
  const req = this.request(queue, type, payload, { maxAttempts: opts.maxAttempts });
  const catchUp = opts.catchUp === undefined ? 'one' : opts.catchUp;
  if (!CATCH_UP.includes(catchUp)) throw fail('invalid', `catch-up policy ${catchUp} is not one, all or none`);
  const keys = await this.schedKeys(queue);
  const now = await this.serverTime();
  const first = cron.firstTick(e, tz, now);
  if (first < 0) throw fail('invalid', `expression "${expr}" fires at no time in the next eight years`);
  await this.register(queue);
  const r = await this.conn.evalScript('sched_add', keys, [name, expr, tz, type, req.body,
    req.max, catchUp, first, opts.replace ? 1 : 0]);
  if (!Array.isArray(r) || r.length !== 2) throw fail('redis', 'unexpected reply from the sched_add script');
  const status = str(r[0]);
  if (status === 'exists') throw fail('exists', `schedule ${name} already exists in queue ${queue} (use replace)`);
  if (!['ok', 'replaced', 'same'].includes(status)) throw fail('redis', 'unexpected reply from the sched_add script');
  return int(r[1]);
};

// scheduleList(queue) -> [{ name, expr, tz, type, payload, maxAttempts,
// catchUp, nextMs (-1 while paused), readable, pausedSinceMs (-1: not
// paused) }], soonest next tick first, paused ones last.
P.scheduleList = async function scheduleList(queue) {
  this.checkQueue(queue);
  const r = await this.conn.evalScript('sched_list', await this.schedKeys(queue), [-1, LIST_MAX]);
  if (!Array.isArray(r) || r.length < 1 || (r.length - 1) % 10 !== 0) {
    throw fail('redis', 'unexpected reply from the sched_list script');
  }
  const out = [];
  for (let i = 1; i < r.length; i += 10) {
    out.push({
      name: str(r[i]), expr: str(r[i + 1]), tz: str(r[i + 2]), type: str(r[i + 3]),
      payload: Buffer.isBuffer(r[i + 4]) ? r[i + 4] : Buffer.from(String(r[i + 4])),
      maxAttempts: int(r[i + 5]), catchUp: str(r[i + 6]), nextMs: int(r[i + 7]),
      readable: int(r[i + 8]) === 1, pausedSinceMs: int(r[i + 9]),
    });
  }
  return out;
};

// scheduleRemove(queue, name): no tick fires after it (DelayqError
// "notfound" when there is no such schedule).
P.scheduleRemove = async function scheduleRemove(queue, name) {
  this.checkQueue(queue);
  checkName(name);
  const r = await this.conn.evalScript('sched_remove', await this.schedKeys(queue), [name]);
  if (r === 0) throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  if (r !== 1) throw fail('redis', 'unexpected reply from the sched_remove script');
};

// scheduleRunNow(queue, name) -> the id of one job of the schedule made
// now (NAME@now-2026-11-23T10:05:00.123Z), outside its ticks.
P.scheduleRunNow = async function scheduleRunNow(queue, name) {
  this.checkQueue(queue);
  checkName(name);
  const keys = await this.schedKeys(queue);
  const now = await this.serverTime();
  const id = `${name}@now-${new Date(now).toISOString()}`;
  const wake = this.keysOf(queue, 0, await this.partCount(queue)).wake;
  const r = await this.conn.evalScript('sched_fire', [...keys], [wake, name, '-', now, id, 0]);
  const status = Array.isArray(r) && r.length === 2 ? str(r[0]) : '';
  if (status === 'fired') return id;
  if (status === 'missing') throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  if (status === 'exists') throw fail('exists', `job ${id} exists already`);
  throw fail('redis', 'unexpected reply from the sched_fire script');
};
