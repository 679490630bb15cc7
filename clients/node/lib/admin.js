'use strict';
// The operator's calls of the Client: stats, show, the dead set, pause
// and resume, and the partition count; partitioned queues are summed or
// merged as libdelayq does (src/lib/ops_admin.c).

const { Client, str, int } = require('./client');
const { fail } = require('./errors');
const K = require('./keys');
const { readRecord } = require('./msgpack');

const ADMIN_BATCH = 500;       // dead jobs moved per script call
const DEAD_PAGE_MAX = 10000;
const P = Client.prototype;

function statsOf(r) {
  if (!Array.isArray(r) || r.length < 7) throw fail('redis', 'unexpected reply from the stats script');
  const due = int(r[2]);
  const byPriority = new Array(10).fill(0);
  if (r.length >= 18) for (let p = 0; p < 10; p++) byPriority[p] = int(r[8 + p]);
  else byPriority[5] = due;
  return {
    delayed: int(r[1]), due, processing: int(r[3]), expired: int(r[6]), dead: int(r[4]),
    nextDueInMs: int(r[5]), nowMs: int(r[0]), dueByPriority: byPriority,
    jobsExpired: r.length > 19 ? int(r[19]) : 0,   // none from a script older than expiries
    // none from a script older than cancelling a running job
    jobsCancelled: r.length > 20 ? int(r[20]) : 0,
  };
}

// Calls of script `name` ({keys, args} each) in one pipeline (one round
// trip per master): the replies in order; the first error is thrown.
async function runAll(c, name, calls) {
  const out = await c.conn.pipelineScripts(name, calls);
  for (const r of out) if (r instanceof Error) throw r;
  return out;
}

// stats(queue) -> { delayed, due, processing, expired, dead, nextDueInMs,
// nowMs, dueByPriority[10], jobsExpired, jobsCancelled }, summed over the
// partitions.
P.stats = async function stats(queue) {
  const n = await this.partCount(queue);
  const calls = [];
  for (let p = 0; p < n; p++) calls.push({ keys: this.keysOf(queue, p, n).keys, args: [] });
  let sum = null;
  for (const r of await runAll(this, 'stats', calls)) {
    const one = statsOf(r);
    if (!sum) {
      sum = one;
      continue;
    }
    for (const f of ['delayed', 'due', 'processing', 'expired', 'dead', 'jobsExpired', 'jobsCancelled']) sum[f] += one[f];
    one.dueByPriority.forEach((v, i) => { sum.dueByPriority[i] += v; });
    if (one.nextDueInMs >= 0 && (sum.nextDueInMs < 0 || one.nextDueInMs < sum.nextDueInMs)) {
      sum.nextDueInMs = one.nextDueInMs;
    }
    sum.nowMs = one.nowMs;
  }
  return sum;
};

// show(queue, id) -> the job (payload a Buffer), or null when there is none;
// state 'done' for one that finished within its dedupe window (stateMs
// when, uniqueUntilMs when the window ends; the other fields '' or 0), and
// 'cancelled' for one cancelled while it ran (the same, with fence the run
// that was stopped and uniqueUntilMs when its id is free).
P.show = async function show(queue, id) {
  this.checkQueue(queue);
  if (typeof id !== 'string' || id === '') throw fail('invalid', 'job id is empty');
  const k = await this.keysOfId(queue, id);
  // A waiting job's record undecoded first (the script's work is then its
  // commands); in full when it does not read here as the scripts would
  // read it, and the script says why (docs/protocol.md, show).
  let r = await this.conn.evalScript('show', k.keys, [id, 'raw']);
  if (Array.isArray(r) && r.length === 4 && str(r[0]) === 'record') {
    const rec = Buffer.isBuffer(r[1]) ? readRecord(r[1]) : null;
    if (rec) {
      return {
        id, state: 'delayed', type: rec.type.toString('utf8'), payload: rec.payload,
        attempts: rec.attempts, maxAttempts: rec.max, createdMs: rec.created, dueMs: rec.due,
        // stateMs: the score as ZSCORE gives it, truncated (as Redis truncates
        // a script's number in a reply)
        fence: 0, lastError: rec.err.toString('utf8'), stateMs: Math.trunc(int(r[2])), nowMs: int(r[3]),
        unreadable: '', where: 'delayed', priority: rec.prio, expireAtMs: 0, onExpire: '',
        uniqueMs: 0, uniqueUntilMs: 0,
      };
    }
    r = await this.conn.evalScript('show', k.keys, [id]);
  }
  if (Array.isArray(r) && r.length >= 1 && str(r[0]) === 'notfound') return null;
  if (!Array.isArray(r) || r.length < 11) throw fail('redis', 'unexpected reply from the show script');
  return {
    id,
    state: str(r[0]),
    type: str(r[1]),
    payload: Buffer.isBuffer(r[2]) ? r[2] : Buffer.from(String(r[2])),
    attempts: int(r[3]),
    maxAttempts: int(r[4]),
    createdMs: int(r[5]),
    dueMs: int(r[6]),
    fence: int(r[7]),
    lastError: str(r[8]),
    stateMs: int(r[9]),
    nowMs: int(r[10]),
    unreadable: r.length > 11 ? str(r[11]) : '',
    where: r.length > 12 ? str(r[12]) : str(r[0]),
    priority: r.length > 13 ? int(r[13]) : 5,
    // 0 and '' when it never expires (or from a script older than expiries)
    expireAtMs: r.length > 15 ? int(r[14]) : 0,
    onExpire: r.length > 15 ? str(r[15]) : '',
    // 0 when it has no window (or from a script older than dedupe windows)
    uniqueMs: r.length > 17 ? int(r[16]) : 0,
    uniqueUntilMs: r.length > 17 ? int(r[17]) : 0,
  };
};

function deadEntries(r) {
  if (!Array.isArray(r) || r.length < 1 || (r.length - 1) % 7 !== 0) {
    throw fail('redis', 'unexpected reply from the dead_list script');
  }
  const jobs = [];
  for (let i = 1; i < r.length; i += 7) {
    const unreadable = str(r[i + 6]);
    jobs.push({
      id: str(r[i]), diedMs: int(r[i + 1]), type: str(r[i + 2]), attempts: int(r[i + 3]),
      lastError: unreadable ? `unreadable record: ${unreadable}` : str(r[i + 4]),
      payloadBytes: int(r[i + 5]), unreadable,
    });
  }
  return { total: int(r[0]), jobs };
}

// deadList(queue, {offset = 0, count = 100}) -> { total, jobs: [...] },
// oldest death first, the partitions merged by time of death.
P.deadList = async function deadList(queue, opts = {}) {
  const offset = opts.offset === undefined ? 0 : opts.offset;
  const count = opts.count === undefined ? 100 : opts.count;
  if (!Number.isInteger(offset) || offset < 0 || !Number.isInteger(count) || count < 1 || count > DEAD_PAGE_MAX) {
    throw fail('invalid', `bad page: offset ${offset}, count ${count} (1..${DEAD_PAGE_MAX})`);
  }
  const n = await this.partCount(queue);
  if (n === 1) return deadEntries(await this.conn.evalScript('dead_list', this.keysOf(queue, 0, 1).keys, [offset, count]));
  // Each partition's first offset + count entries, merged by time.
  const size = Math.min(offset + count, DEAD_PAGE_MAX);
  let total = 0;
  const all = [];
  const calls = [];
  for (let p = 0; p < n; p++) calls.push({ keys: this.keysOf(queue, p, n).keys, args: [0, size] });
  (await runAll(this, 'dead_list', calls)).forEach((r, p) => {
    const page = deadEntries(r);
    total += page.total;
    page.jobs.forEach((j, i) => all.push({ j, p, i }));
  });
  all.sort((a, b) => (a.j.diedMs - b.j.diedMs) || (a.p - b.p) || (a.i - b.i));
  return { total, jobs: all.slice(offset, offset + count).map((x) => x.j) };
};

// requeue or purge of one dead job (in its partition) or of all (every
// partition, in rounds of one batch in each partition that has more, each
// round one pipeline): the count moved.
P.deadBatches = async function deadBatches(name, queue, id) {
  const n = await this.partCount(queue);
  let total = 0;
  let parts = [];
  for (let p = 0; p < n; p++) if (!id || p === K.partitionOf(id, n)) parts.push(p);
  while (parts.length) {
    const calls = parts.map((p) => {
      const k = this.keysOf(queue, p, n);
      return { keys: k.keys, args: name === 'requeue' ? [k.wake, id || '', ADMIN_BATCH] : [id || '', ADMIN_BATCH] };
    });
    const replies = await runAll(this, name, calls);
    parts = parts.filter((p, i) => {
      const r = replies[i];
      if (!Array.isArray(r) || r.length < 2) throw fail('redis', `unexpected reply from the ${name} script`);
      const moved = int(r[0]);
      total += moved;
      return !id && int(r[1]) > 0 && moved > 0;
    });
  }
  if (id && total === 0) throw fail('notfound', `no dead job ${id} in queue ${queue}`);
  return total;
};

function needId(id) {
  if (typeof id !== 'string' || id === '') throw fail('invalid', 'job id is empty');
}

// requeue(queue, id): a dead job is due now, its attempts reset.
P.requeue = async function requeue(queue, id) {
  this.checkQueue(queue);
  needId(id);
  await this.deadBatches('requeue', queue, id);
};

// requeueAll(queue) -> how many dead jobs were requeued.
P.requeueAll = function requeueAll(queue) {
  return this.deadBatches('requeue', queue, null);
};

// purge(queue, id): delete a dead job.
P.purge = async function purge(queue, id) {
  this.checkQueue(queue);
  needId(id);
  await this.deadBatches('purge', queue, id);
};

// purgeAll(queue) -> how many dead jobs were deleted.
P.purgeAll = function purgeAll(queue) {
  return this.deadBatches('purge', queue, null);
};

// pause, resume (every partition) and pause_state (partition 0): the
// since_ms of partition 0's reply.
P.pauseScript = async function pauseScript(name, queue) {
  const n = await this.partCount(queue);
  const calls = [];
  for (let p = 0; p < (name === 'pause_state' ? 1 : n); p++) {
    const k = this.keysOf(queue, p, n);
    calls.push({ keys: k.keys, args: name === 'pause_state' ? [] : [k.wake] });
  }
  const replies = await runAll(this, name, calls);
  for (const r of replies) {
    if (!Array.isArray(r) || r.length < 2) throw fail('redis', `unexpected reply from the ${name} script`);
  }
  return int(replies[0][1]);
};

// pause(queue) -> when the pause began (server ms).
P.pause = function pause(queue) {
  return this.pauseScript('pause', queue);
};

// resume(queue) -> when the pause had begun, -1 when it was not paused.
P.resume = function resume(queue) {
  return this.pauseScript('resume', queue);
};

// paused(queue) -> when the pause began, or -1 when it is not paused.
P.paused = function paused(queue) {
  return this.pauseScript('pause_state', queue);
};

// The count's epoch: `count` into the meta hash of partitions 0..upto-1
// of `queue` (one round trip), where enqueue and enqueue_many compare it
// with the count their caller read, so that a producer that read an older
// count is refused before it writes and reads the count again
// (docs/protocol.md, "Partitioned queues").
async function markPartitions(c, queue, upto, count) {
  if (upto < 2) return;
  const list = [];
  for (let p = 0; p < upto; p++) {
    list.push(['HSET', [c.keysOf(queue, p, upto).keys[4], 'partitions', String(count)]]);
  }
  await c.conn.commands(list);
}

// setPartitions(queue, n): store a new partition count (see
// dq_queue_set_partitions: refused while any partition holds jobs).
P.setPartitions = async function setPartitions(queue, n) {
  if (!Number.isInteger(n) || n < 1 || n > K.PARTITIONS_MAX) {
    throw fail('invalid', `partitions ${n} is not in 1..${K.PARTITIONS_MAX}`);
  }
  const from = await this.partitions(queue);
  if (from === n) {
    await markPartitions(this, queue, n, n);    // a queue partitioned before the epoch gets it
    return;
  }
  if (from > 1) {
    let jobs = 0;
    for (let p = 0; p < from; p++) {
      const s = statsOf(await this.conn.evalScript('stats', this.keysOf(queue, p, from).keys, []));
      jobs += s.delayed + s.due + s.processing + s.dead;
    }
    if (jobs > 0) {
      throw fail('exists', `queue ${queue} holds ${jobs} job${jobs === 1 ? '' : 's'} in its ${from} partitions: drain it first (not set to ${n})`);
    }
  }
  if ((from === 1) !== (n === 1)) {
    const due = K.schedKeys(this.prefix, queue, from)[1];
    const count = await this.conn.command('ZCARD', [due]); // the schedules, one member each
    if (count > 0) {
      throw fail('exists', `queue ${queue} has ${count} recurring schedule${count === 1 ? '' : 's'}: remove them first and add them again after (not set to ${n} partitions)`);
    }
  }
  // The new count goes into every partition either layout has before it
  // is stored: a producer of the old count is refused from now on (and
  // reads the old count again until the store), one of the new count
  // finds it there.
  const upto = Math.max(from, n);
  await markPartitions(this, queue, upto, n);
  const r = await this.conn.evalScript('partitions', this.keysOf(queue, 0, 1).keys, [from, n]);
  this.parts.delete(queue);     // read again at the next use
  const what = Array.isArray(r) ? str(r[0]) : '';
  const x = Array.isArray(r) && r.length > 1 ? str(r[1]) : '';
  if (what === 'ok') return;
  // Not stored: the partitions get back the count that is (best effort:
  // the refusal below is what the caller hears).
  try {
    const now = await this.readCount(queue);
    await markPartitions(this, queue, Math.max(upto, now), now);
  } catch (_) { /* the refusal is told */ }
  if (what === 'changed') throw fail('stale', `queue ${queue}: its partition count changed from ${from} to ${x} meanwhile: not set to ${n}`);
  if (what === 'jobs') throw fail('exists', `queue ${queue} holds ${x} job${x === '1' ? '' : 's'} unpartitioned: drain it first (not set to ${n} partitions)`);
  throw fail('redis', `queue ${queue}: stored partition count "${x.slice(0, 20)}" is not a number 1..${K.PARTITIONS_MAX}`);
};

// serverTime() -> Redis TIME in Unix ms.
P.serverTime = async function serverTime() {
  const r = await this.conn.command('TIME', []);
  return int(r[0]) * 1000 + Math.floor(int(r[1]) / 1000);
};
