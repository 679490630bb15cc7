'use strict';
// Recurring schedules (src/lib/ops_sched.c): add, list, remove, pause,
// resume, run now.  They live with the queue's unpartitioned keys, or
// partition 0's.

const { Client, str, int } = require('./client');
const { fail } = require('./errors');
const K = require('./keys');
const cron = require('./cron');

const LIST_MAX = 10000;
const CATCH_UP = ['one', 'all', 'none'];
const RESUME_TRIES = 5;   // reads of a definition replaced under a resume, as libdelayq
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
// catchUp: 'one'|'all'|'none', replace}) -> the first tick (Unix ms), or
// -1 when the schedule stays paused (a paused one replaced keeps its
// pause: scheduleResume gives its next tick).
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
  return schedulesOf(r);
};

// The schedules of a sched_list reply: now_ms, then ten elements each.
function schedulesOf(r) {
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
}

// scheduleRemove(queue, name): no tick fires after it (DelayqError
// "notfound" when there is no such schedule).
P.scheduleRemove = async function scheduleRemove(queue, name) {
  this.checkQueue(queue);
  checkName(name);
  const r = await this.conn.evalScript('sched_remove', await this.schedKeys(queue), [name]);
  if (r === 0) throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  if (r !== 1) throw fail('redis', 'unexpected reply from the sched_remove script');
};

// Run sched_pause: its reply's [status, ms].
P.schedPause = async function schedPause(keys, args) {
  const r = await this.conn.evalScript('sched_pause', keys, args);
  if (!Array.isArray(r) || r.length !== 2) throw fail('redis', 'unexpected reply from the sched_pause script');
  return [str(r[0]), int(r[1])];
};

// schedulePause(queue, name) -> when it was paused (server Unix ms; the
// first pause's time when it was paused already).  No tick fires after
// it, the jobs it made ahead of ticks not yet due are deleted, and its
// definition stays (a replacing scheduleAdd keeps it paused).
P.schedulePause = async function schedulePause(queue, name) {
  this.checkQueue(queue);
  checkName(name);
  const [status, ms] = await this.schedPause(await this.schedKeys(queue), [name, 'pause']);
  if (status === 'missing') throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  if (status !== 'paused' && status !== 'already') throw fail('redis', 'unexpected reply from the sched_pause script');
  return ms;
};

// One resume: read the definition, find its first tick after now on the
// Redis clock, and store it unless the definition changed meanwhile
// ('changed': read it again).  Resolves to [status, ms].
P.resumeOnce = async function resumeOnce(queue, name, keys) {
  const r = await this.conn.evalScript('sched_list', keys, [-1, 1, name]);
  const found = schedulesOf(r);
  if (found.length !== 1) throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  const s = found[0];
  if (s.pausedSinceMs < 0) return ['running', s.nextMs];
  let e = null;
  try {
    if (s.readable) e = cron.parse(s.expr);
  } catch (_) {
    e = null;
  }
  if (!e) throw fail('invalid', `schedule ${name} has an unreadable definition: remove it and add it again`);
  try {
    cron.checkZone(s.tz);   // (the zone may have gone since the add)
  } catch (err) {
    throw fail('invalid', err.message);
  }
  const next = cron.firstTick(e, s.tz, int(r[0]));
  if (next < 0) throw fail('invalid', `expression "${s.expr}" fires at no time in the next eight years`);
  // expr and tz exactly as read: the script compares them.
  return this.schedPause(keys, [name, 'resume', next, r[2], r[3]]);
};

// scheduleResume(queue, name) -> its next tick (Unix ms), the first after
// now: the ticks missed while paused are not made up.  A schedule that is
// not paused is left as it is (its next tick).
P.scheduleResume = async function scheduleResume(queue, name) {
  this.checkQueue(queue);
  checkName(name);
  const keys = await this.schedKeys(queue);
  // A definition replaced between the read and the write is read again
  // (a few times: someone replacing it without end wins).
  let [status, ms] = ['changed', 0];
  for (let i = 0; i < RESUME_TRIES && status === 'changed'; i++) {
    [status, ms] = await this.resumeOnce(queue, name, keys);
  }
  if (status === 'missing') throw fail('notfound', `no schedule ${name} in queue ${queue}`);
  if (status !== 'resumed' && status !== 'running') throw fail('redis', `schedule ${name}: resume failed (${status})`);
  return ms;
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
