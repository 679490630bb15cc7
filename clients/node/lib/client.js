'use strict';
// The Client: connection settings, the partition count cache, and the
// producer's calls (enqueue, enqueueMany, cancel, runNow).  The operator's
// calls are in admin.js, schedules in schedules.js.

const { Conn } = require('./conn');
const { fail, uniqueError } = require('./errors');
const K = require('./keys');
const W = require('./when');
const { bodyHead } = require('./msgpack');

const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
const ENQUEUE_CHUNK = 1000;      // jobs per enqueue_many call
const NORMAL = 5;

function str(b) {
  return Buffer.isBuffer(b) ? b.toString('utf8') : String(b);
}

function int(b) {
  return typeof b === 'number' ? b : Number(str(b));
}

// Options as given (fromUrl, fromConfig or new Client) -> the settings
// every module reads, with libdelayq's defaults.
function normalize(opts) {
  const o = {
    host: opts.host || '127.0.0.1',
    port: opts.port || 6379,
    path: opts.path || opts.unixSocket || undefined,
    db: opts.db || 0,
    user: opts.user || undefined,
    password: opts.password || undefined,
    tls: opts.tls || undefined,
    sentinel: opts.sentinel || undefined,
    cluster: !!opts.cluster,
    nodes: opts.nodes || undefined,
    prefix: opts.prefix === undefined ? 'dq' : opts.prefix,
    maxPayload: opts.maxPayload || DEFAULT_MAX_PAYLOAD,
    connectTimeout: opts.connectTimeout || 5000,
    commandTimeout: opts.commandTimeout === undefined ? 5000 : opts.commandTimeout,
    keepalive: opts.keepalive === undefined ? true : !!opts.keepalive,
    durability: opts.durability || 'local',
    replicationTimeout: opts.replicationTimeout || 1000,
  };
  const why = K.checkPrefix(o.prefix);
  if (why) throw fail('invalid', why);
  if (o.durability !== 'local' && o.durability !== 'replicated') {
    throw fail('invalid', `durability "${o.durability}" is not "local" or "replicated"`);
  }
  if (o.cluster) {
    if (o.sentinel) throw fail('invalid', 'cluster and sentinel are both set (keep one)');
    if (o.path) throw fail('invalid', 'a cluster needs TCP nodes, not a unix socket');
    if (o.db !== 0) throw fail('invalid', 'db must be 0 with a cluster (a cluster has only database 0)');
    if (!o.nodes || !o.nodes.length) o.nodes = [{ host: o.host, port: o.port }];
  }
  if (!Number.isInteger(o.db) || o.db < 0) throw fail('invalid', `db ${o.db} is not a number 0 or more`);
  return o;
}

// A job's expiry (expireAt, or ttl after its due time, and onExpire),
// dedupe window (uniqueFor, uniqueOk) and debounce (debounce, maxWait),
// checked as libdelayq's check_expiry does, in its order.  `when` holds
// what is already checked: at (the due time when one was given, else 0),
// delay, replace, and id ('' for a generated one).  Throws DelayqError
// "invalid".
function expiryOf(opts, when) {
  const given = (v) => v !== undefined && v !== null;
  if (given(opts.expireAt) && given(opts.ttl)) throw fail('invalid', 'expireAt and ttl are both set (keep one)');
  const onExpire = given(opts.onExpire) ? opts.onExpire : 'dead';
  if (onExpire !== 'dead' && onExpire !== 'drop') {
    throw fail('invalid', `onExpire ${JSON.stringify(opts.onExpire)} is not "dead" or "drop"`);
  }
  const ttl = W.ttlMs(opts.ttl);
  if (typeof ttl === 'string') throw fail('invalid', ttl);
  const expireAt = W.expireAtMs(opts.expireAt);
  if (typeof expireAt === 'string') throw fail('invalid', expireAt);
  const uniqueFor = W.windowMs(opts.uniqueFor);
  if (typeof uniqueFor === 'string') throw fail('invalid', uniqueFor);
  if (uniqueFor > 0 && !when.id) throw fail('invalid', 'a dedupe window needs the job\'s id');
  const { debounce, maxWait } = debounceOf(opts, { ...when, expireAt, ttl, uniqueFor });
  const uniqueOk = !!opts.uniqueOk;
  if (uniqueOk && uniqueFor === 0) throw fail('invalid', 'uniqueOk needs a dedupe window (uniqueFor)');
  // The due time on this host's clock: the script checks it again on the
  // server's, but a refusal there fails a whole enqueue_many call.
  const due = when.at > 0 ? when.at : Date.now() + when.delay;
  if (expireAt > 0 && expireAt <= due) {
    throw fail('invalid', `expiry ${expireAt} (Unix ms) is not after the due time ${due}`);
  }
  return { expireAt, ttl, onExpire, uniqueFor, uniqueOk, debounce, maxWait };
}

// A debounced add's debounce and maxWait (ms, 0: none; 1 ms..100 years):
// it needs an id and goes alone, its due time being the debounce's.  `r`
// holds the rest of the request, checked.  Throws DelayqError "invalid".
function debounceOf(opts, r) {
  const debounce = W.spanMs(opts.debounce, 'debounce');
  if (typeof debounce === 'string') throw fail('invalid', debounce);
  const maxWait = W.spanMs(opts.maxWait, 'max wait');
  if (typeof maxWait === 'string') throw fail('invalid', maxWait);
  if (maxWait > 0 && debounce === 0) throw fail('invalid', 'a max wait needs a debounce');
  if (debounce > 0 && !r.id) throw fail('invalid', 'a debounce needs the job\'s id');
  if (debounce > 0 && (r.delay || r.at || r.replace || r.expireAt || r.ttl || r.uniqueFor)) {
    throw fail('invalid', 'a debounce goes alone: no delay, time, replace, expiry or dedupe window');
  }
  return { debounce, maxWait };
}

// The scripts' expiry of a checked request: a Unix time in ms, "+" and ms
// after the due time, or null when the job never expires.
function expiryArg(req) {
  if (req.expireAt > 0) return String(req.expireAt);
  if (req.ttl > 0) return `+${req.ttl}`;
  return null;
}

// enqueue's ARGV for checked request `req` in partition `part` of `n`
// (wake channel `wake`).  As libdelayq: the optional arguments only when
// needed (a plain call is as before priorities, expiries, windows and
// debounce); each needs the ones before it (the priority, the partition
// pair, 1 and 0 when unpartitioned, '' and 'dead' for no expiry, '' and
// '0' for no window).  A debounced job is due debounce ms from now, which
// the script checks against the delay.
function enqueueArgs(req, wake, n, part) {
  const args = [wake, req.id, req.type, req.body, req.at > 0 ? 'at' : 'delay',
    req.debounce || (req.at > 0 ? req.at : req.delay), req.max, req.replace ? '1' : '0'];
  const expiry = expiryArg(req);
  const tail = expiry !== null || req.uniqueFor > 0 || req.debounce > 0;
  if (req.level !== NORMAL || n > 1 || tail) args.push(req.level);
  if (n > 1 || tail) args.push(n, part);
  if (tail) args.push(expiry === null ? '' : expiry, req.onExpire);
  if (req.uniqueFor > 0 || req.debounce > 0) {
    args.push(req.uniqueFor > 0 ? req.uniqueFor : '', req.uniqueOk ? '1' : '0');
  }
  if (req.debounce > 0) {
    args.push(req.debounce);
    if (req.maxWait > 0) args.push(req.maxWait);
  }
  return args;
}

// The error of a job refused twice because its queue's partition count
// changed while it was added (libdelayq's DQ_ERR_STALE): nothing added.
function countMoved(queue) {
  return fail('stale', `queue ${queue}: its partition count changed twice while adding: not added`);
}

// Whether `r` is the scripts' refusal of the caller's partition count
// (the count's epoch: enqueue's {'partitions', stored, 0, now_ms},
// enqueue_many's {'partitions', stored}): nothing was written.
function countRefused(r) {
  return Array.isArray(r) && r.length >= 2 && str(r[0]) === 'partitions';
}

// enqueue's reply as what the add did (see enqueue).  A refusal throws:
// "unique" with its times, any other the error `refused(status)` makes.
function enqueued(r, req, refused) {
  const status = str(r[0]);
  if ((status === 'unique' || status === 'done') && r.length >= 5) {
    // {status, id, finished_ms, now_ms, until_ms, what}: nothing was
    // written; what kept the id, 'cancelled' (a job cancelled while it
    // ran) or 'done', is not there from a script older than cancelling a
    // running job.
    const cancelled = r.length >= 6 && str(r[5]) === 'cancelled';
    if (status === 'unique') throw uniqueError(req, int(r[2]), int(r[4]), cancelled);
    const out = { id: str(r[1]), dueMs: 0, finished: true, finishedMs: int(r[2]), untilMs: int(r[4]) };
    if (cancelled) out.cancelled = true;
    return out;
  }
  const out = { id: str(r[1]), dueMs: int(r[2]) };
  if (status === 'replaced') out.replaced = true;
  else if (status === 'debounced') out.debounced = true;
  else if (status === 'queued') out.nextRun = true;
  else if (status !== 'ok') throw refused(status);
  return out;
}

class Client {
  // new Client(options): see index.d.ts (ClientOptions).  Nothing is
  // sent before the first call.
  constructor(opts = {}) {
    this.o = normalize(opts);
    this.prefix = this.o.prefix;
    this.conn = new Conn(this.o);
    this.parts = new Map();        // queue -> { n, gen, next }
    this.registered = new Map();   // queue -> gen it was registered on
  }

  static fromUrl(url, opts = {}) {
    return new Client({ ...require('./url').parseUrl(url), ...opts });
  }

  static fromConfig(path, opts = {}) {
    return new Client({ ...require('./config').loadRedisConfig(path), ...opts });
  }

  async close() {
    await this.conn.close();
  }

  // ---- queues and partitions ------------------------------------------

  checkQueue(queue) {
    const why = K.checkQueue(queue);
    if (why) throw fail('invalid', why);
  }

  // The stored partition count of `queue` (1 when absent), read with
  // the queue's protocol marker, which must not be newer than this
  // client's (docs/protocol.md, "Versioning").
  async readCount(queue) {
    const meta = K.queueKeys(this.prefix, queue, 0, 1).keys[4];
    const r = await this.conn.command('HMGET', [meta, 'partitions', K.PROTOCOL_FIELD]);
    if (!Array.isArray(r) || r.length !== 2) throw fail('redis', `unexpected reply to HMGET ${meta}`);
    if (r[1] !== null) {
      const v = str(r[1]);
      if (!/^[0-9]{1,9}$/.test(v) || Number(v) > K.PROTOCOL_VERSION) {
        throw fail('redis', `queue ${queue} holds data of protocol version "${v.slice(0, 20)}"; ` +
          `this client knows versions up to ${K.PROTOCOL_VERSION}: upgrade it`);
      }
    }
    if (r[0] === null) return 1;
    const s = str(r[0]);
    const n = Number(s);
    if (!/^[0-9]+$/.test(s) || n < 1 || n > K.PARTITIONS_MAX) {
      throw fail('redis', `${meta} field partitions is "${s.slice(0, 20)}", not a partition count (1..${K.PARTITIONS_MAX})`);
    }
    return n;
  }

  // The cache entry of `queue`, its count read once per connection.
  async partEntry(queue) {
    this.checkQueue(queue);
    await this.conn.ready();
    let e = this.parts.get(queue);
    if (e && e.gen === this.conn.gen) return e;
    const n = await this.readCount(queue);
    if (!e) {
      e = { next: Math.floor(Math.random() * 0x7fffffff) };
      this.parts.set(queue, e);
    }
    e.n = n;
    e.gen = this.conn.gen;
    return e;
  }

  // Read the count of `queue` again at its next use (the round robin
  // goes on where it was): gen 0 matches no connection.
  forgetCount(queue) {
    const e = this.parts.get(queue);
    if (e) e.gen = 0;
  }

  async partCount(queue) {
    return (await this.partEntry(queue)).n;
  }

  keysOf(queue, part, n) {
    return K.queueKeys(this.prefix, queue, part, n);
  }

  // The keys of the partition that holds job `id`.
  async keysOfId(queue, id) {
    const n = await this.partCount(queue);
    return { ...this.keysOf(queue, K.partitionOf(id, n), n), n };
  }

  // Register `queue` once per connection: SADD to the registry and the
  // protocol marker (HSETNX on its meta hash: an older version written
  // there stays), in one round trip.
  async register(queue) {
    await this.conn.ready();
    if (this.registered.get(queue) === this.conn.gen) return;
    const meta = K.queueKeys(this.prefix, queue, 0, 1).keys[4];
    await this.conn.commands([['SADD', [K.registryKey(this.prefix), queue]],
      ['HSETNX', [meta, K.PROTOCOL_FIELD, String(K.PROTOCOL_VERSION)]]]);
    this.registered.set(queue, this.conn.gen);
  }

  // partitions(queue): the stored count, read now.
  async partitions(queue) {
    const e = await this.partEntry(queue);
    e.n = await this.readCount(queue);
    return e.n;
  }

  // ---- producing ------------------------------------------------------

  // Check one job as libdelayq's check_request does, and make it the
  // request the calls below send.  Throws DelayqError "invalid" or
  // "too_large".
  request(queue, type, payload, opts = {}) {
    this.checkQueue(queue);
    let why = K.checkType(type);
    if (!why && opts.id !== undefined && opts.id !== null && opts.id !== '') why = K.checkId(opts.id);
    if (why) throw fail('invalid', why);
    let body;
    if (Buffer.isBuffer(payload)) body = payload;
    else if (payload instanceof Uint8Array) body = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
    else if (typeof payload === 'string') body = Buffer.from(payload, 'utf8');
    else if (payload === undefined || payload === null) body = Buffer.alloc(0);
    else throw fail('invalid', 'payload is not a Buffer, a Uint8Array or a string');
    if (body.length > this.o.maxPayload) {
      throw fail('too_large', `payload is ${body.length} bytes, over the limit of ${this.o.maxPayload}`);
    }
    const max = opts.maxAttempts === undefined || opts.maxAttempts === null ? 0 : opts.maxAttempts;
    if (!Number.isInteger(max) || max < 0) throw fail('invalid', 'max attempts is negative');
    if (max > 2147483647) throw fail('invalid', `max attempts ${max} is over 2147483647`);
    const level = W.priorityLevel(opts.priority);
    if (level < 0) throw fail('invalid', `priority ${JSON.stringify(opts.priority)} is not 0..9, "high", "normal" or "low"`);
    if (opts.delay !== undefined && opts.at !== undefined && opts.at !== null) {
      throw fail('invalid', 'delay and at are both set (keep one)');
    }
    let at = 0;
    let delay = 0;
    if (opts.at !== undefined && opts.at !== null) {
      at = W.atMs(opts.at);
      if (typeof at === 'string') throw fail('invalid', at);
    } else {
      delay = W.delayMs(opts.delay);
      if (typeof delay === 'string') throw fail('invalid', delay);
    }
    const replace = !!opts.replace;
    const id = opts.id || '';
    return { queue, type, body, id, delay, at, max, level, replace,
      ...expiryOf(opts, { at, delay, replace, id }) };
  }

  refused(status, req) {
    if (status === 'unique') return uniqueError(req);
    if (status === 'exists') return fail('exists', `job ${req.id} already exists in queue ${req.queue} (use replace)`);
    if (status === 'running') return fail('running', `job ${req.id} in queue ${req.queue} is running and cannot be replaced`);
    return fail('redis', 'unexpected reply from the enqueue script');
  }

  // enqueue(queue, type, payload, {delay, at, id, replace, priority,
  // maxAttempts, expireAt, ttl, onExpire, uniqueFor, uniqueOk, debounce,
  // maxWait, detail}) -> the job's id; also with uniqueOk when nothing was
  // added because the job of that id finished within its dedupe window
  // (without uniqueOk that is a DelayqError "unique" with finishedMs and
  // untilMs), and for a debounced add that took a job's place.  With
  // detail: true, what the add did (libdelayq's dq_enqueued): { id, dueMs },
  // with replaced, debounced (a waiting job of that id took the add),
  // nextRun (the job of that id runs: the add is its next run) or
  // finished (nothing added; dueMs 0, finishedMs, untilMs) set when true.
  async enqueue(queue, type, payload, opts = {}) {
    const req = this.request(queue, type, payload, opts);
    await this.register(queue);
    // The queue's partition count changed since this client read it (the
    // script wrote nothing): read it again, and go where it says now.
    for (let tries = 0; tries < 2; tries++) {
      const r = await this.enqueueOnce(req);
      if (!countRefused(r)) {
        const got = enqueued(r, req, (status) => this.refused(status, req));
        return opts.detail ? got : got.id;
      }
      this.forgetCount(queue);
    }
    throw countMoved(queue);
  }

  // One enqueue call of checked request `req` at the partition count this
  // client knows: the script's reply (an array of 4 or more).
  async enqueueOnce(req) {
    const e = await this.partEntry(req.queue);
    const n = e.n;
    const part = n <= 1 ? 0 : (req.id ? K.partitionOf(req.id, n) : (e.next++ % n));
    const k = this.keysOf(req.queue, part, n);
    const r = await this.conn.evalScript('enqueue', k.keys, enqueueArgs(req, k.wake, n, part));
    if (!Array.isArray(r) || r.length < 4) throw fail('redis', 'unexpected reply from the enqueue script');
    return r;
  }

  // enqueueMany([{queue, type, payload, ...options}]) -> one result per
  // job, in order: { id } or { error: DelayqError }; { id, replaced: true }
  // when it rescheduled a job; { id, finished: true } when nothing was
  // added as the job of that id finished within its dedupe window (with
  // uniqueOk; without, the error "unique").  Jobs are grouped by queue and
  // partition into calls of up to 1000, all sent at once (one round trip
  // per master); each job is checked first (an expiry against its due
  // time on this host's clock too), and a bad one is refused alone, as is
  // a debounced add (it goes one at a time, with enqueue).
  async enqueueMany(jobs) {
    if (!Array.isArray(jobs)) throw fail('invalid', 'enqueueMany takes an array of jobs');
    const results = new Array(jobs.length);
    const reqs = [];
    jobs.forEach((j, i) => {
      try {
        const req = this.request(j.queue, j.type, j.payload, j);
        if (req.debounce > 0) throw fail('invalid', 'a debounced add goes one at a time (enqueue)');
        reqs.push({ i, req });
      } catch (e) {
        if (!e.code) throw e;
        results[i] = { error: e };
      }
    });
    const again = await this.manyPass(reqs, results);
    if (again.length) {
      // Their queue's partition count changed (nothing of their calls was
      // written): read it again and send only them, where it says now.
      for (const { req } of again) this.forgetCount(req.queue);
      for (const { i, req } of await this.manyPass(again, results)) results[i] = { error: countMoved(req.queue) };
    }
    return results;
  }

  // One pass of enqueueMany over the checked jobs `reqs` ({i, req} each)
  // at the partition counts this client knows, filling `results`: the
  // jobs whose call was refused because their queue's count is no longer
  // the stored one (their results are left for the caller).
  async manyPass(reqs, results) {
    const chunks = await this.chunksOf(reqs);
    const calls = chunks.map((c) => this.manyCall(c));
    const replies = calls.length ? await this.conn.pipelineScripts('enqueue_many', calls) : [];
    const again = [];
    chunks.forEach((c, ci) => {
      if (countRefused(replies[ci])) again.push(...c.items);
      else this.manyReply(c, replies[ci], results);
    });
    return again;
  }

  // The checked jobs in enqueue_many calls: grouped by queue (each queue
  // registered, its partition count read), then by partition (a job with
  // an id goes to its own, one without takes the partitions in turn), in
  // runs of up to ENQUEUE_CHUNK.
  async chunksOf(reqs) {
    const chunks = [];
    const byQueue = new Map();
    for (const r of reqs) {
      if (!byQueue.has(r.req.queue)) byQueue.set(r.req.queue, []);
      byQueue.get(r.req.queue).push(r);
    }
    for (const [queue, list] of byQueue) {
      await this.register(queue);
      const e = await this.partEntry(queue);
      const byPart = new Map();
      for (const r of list) {
        const p = e.n <= 1 ? 0 : (r.req.id ? K.partitionOf(r.req.id, e.n) : (e.next++ % e.n));
        if (!byPart.has(p)) byPart.set(p, []);
        byPart.get(p).push(r);
      }
      for (const [part, items] of byPart) {
        for (let s = 0; s < items.length; s += ENQUEUE_CHUNK) {
          chunks.push({ queue, part, n: e.n, items: items.slice(s, s + ENQUEUE_CHUNK) });
        }
      }
    }
    return chunks;
  }

  // Chunk `c`'s enqueue_many call: per job its id, its "when" (a delay,
  // or @ and a time; r first to replace, /L after for a level other than
  // normal, then > and the expiry, ! after it to drop, then ~ and the
  // dedupe window, ? after it for uniqueOk) and the head of its record
  // body (docs/protocol.md).
  manyCall(c) {
    const k = this.keysOf(c.queue, c.part, c.n);
    const args = [k.wake];
    for (const { req } of c.items) {
      const ms = req.at > 0 ? req.at : req.delay;
      const expiry = expiryArg(req);
      const when = `${req.replace ? 'r' : ''}${req.at > 0 ? '@' : ''}${ms}${req.level !== NORMAL ? `/${req.level}` : ''}` +
        (expiry === null ? '' : `>${expiry}${req.onExpire === 'drop' ? '!' : ''}`) +
        (req.uniqueFor > 0 ? `~${req.uniqueFor}${req.uniqueOk ? '?' : ''}` : '');
      args.push(req.id, when, bodyHead(req.type, req.body, req.max));
    }
    if (c.n > 1) args.push(c.n, c.part);
    return { keys: k.keys, args };
  }

  // Fill `results` for chunk `c` from its enqueue_many reply.
  manyReply(c, r, results) {
    if (r instanceof Error) {
      for (const { i } of c.items) results[i] = { error: r };
      return;
    }
    if (!Array.isArray(r) || r.length < 2 || (r.length - 2) % 3 !== 0) {
      const e = fail('redis', 'unexpected reply from the enqueue_many script');
      for (const { i } of c.items) results[i] = { error: e };
      return;
    }
    let seq = int(r[1]);
    c.items.forEach(({ i, req }) => {
      results[i] = { id: req.id ? req.id : String(++seq * c.n + c.part) };
    });
    for (let e = 2; e < r.length; e += 3) {
      const item = c.items[int(r[e]) - 1];
      const status = str(r[e + 1]);
      if (!item) continue;
      if (status === 'ok') results[item.i] = { id: str(r[e + 2]) };
      else if (status === 'replaced') results[item.i] = { id: str(r[e + 2]), replaced: true };
      else if (status === 'done') results[item.i] = { id: str(r[e + 2]), finished: true };
      else results[item.i] = { error: this.refused(status, { ...item.req, id: str(r[e + 2]) }) };
    }
  }

  // cancel or run_now of the delayed job `id` (by `name`).
  async delayedJobCall(name, queue, id, done, running, dead) {
    this.checkQueue(queue);
    if (typeof id !== 'string' || id === '') throw fail('invalid', 'job id is empty');
    const k = await this.keysOfId(queue, id);
    const args = name === 'cancel' ? [id] : [k.wake, id];
    const r = str(await this.conn.evalScript(name, k.keys, args));
    if (r === done) return true;
    if (r === 'running') throw fail('running', `job ${id} in queue ${queue} is running; ${running}`);
    if (r === 'dead') throw fail('dead', `job ${id} in queue ${queue} is dead; ${dead}`);
    if (r === 'notfound') return false;
    throw fail('redis', `unexpected reply from the ${name} script`);
  }

  // cancel(queue, id) -> true when it was cancelled: a waiting job is
  // deleted; a running one ends at once, cancelled, and its daemon stops
  // the run (its id stays taken until that run's lease would have ended:
  // show's state 'cancelled').  false when there is no such job: it
  // finished first, or was never added.  'dead' (purge it instead);
  // 'running' only from a server whose scripts predate cancelling a
  // running job.
  cancel(queue, id) {
    return this.delayedJobCall('cancel', queue, id, 'cancelled', 'it can no longer be cancelled', 'purge it instead');
  }

  // runNow(queue, id): a delayed job becomes due now.
  async runNow(queue, id) {
    if (!(await this.delayedJobCall('run_now', queue, id, 'ran', 'it is no longer waiting', 'requeue it instead'))) {
      throw fail('notfound', `no job ${id} in queue ${queue}`);
    }
  }
}

module.exports = { Client, normalize, str, int };
require('./admin');
require('./schedules');
