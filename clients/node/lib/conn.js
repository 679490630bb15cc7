'use strict';
// One connection to Redis (a server, a Sentinel-watched master, or a
// Cluster) through ioredis, with libdelayq's rules: a call that cannot
// reach Redis fails at once (no queue of commands waiting for a server),
// the next call connects again; scripts run by SHA1 and are loaded again
// on NOSCRIPT; a server that answers READONLY, MASTERDOWN or LOADING ran
// nothing, and the call is sent again on a new connection for up to the
// connect timeout; under durability "replicated" every script that
// writes is followed by WAIT in the same round trip.

const Redis = require('ioredis');
const { DelayqError, fail } = require('./errors');
const { script } = require('./scripts');
const { keySlot } = require('./keys');

const FAILOVER = /^(READONLY|MASTERDOWN|LOADING)/;
const MAX_LOADS = 3;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function describe(o) {
  if (o.cluster) return `cluster ${(o.nodes || []).map((n) => `${n.host}:${n.port}`).join(',')}`;
  if (o.sentinel) return `sentinel master ${o.sentinel.master}`;
  if (o.path) return o.path;
  return `${o.host}:${o.port}`;
}

function isReplyError(e) {
  return e && e.name === 'ReplyError';
}

// `p`, or a rejection "not ready within MS ms" once `ms` have passed.
function bounded(p, ms) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not ready within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

class Conn {
  // `o`: the normalized options of client.js (host, port, path, db, user,
  // password, tls, sentinel, cluster, nodes, connectTimeout,
  // commandTimeout, durability, replicationTimeout).
  constructor(o) {
    this.o = o;
    this.addr = describe(o);
    this.gen = 0;          // counts the connections made: caches key on it
    this.closed = false;
    this.lastError = null;
    this.redis = this.make();
  }

  make() {
    const o = this.o;
    const common = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: o.connectTimeout,
      // A write under replicated durability waits for WAIT too (libdelayq:
      // command_timeout_ms plus replication_timeout_ms).
      commandTimeout: o.commandTimeout > 0
        ? o.commandTimeout + (o.durability === 'replicated' ? o.replicationTimeout : 0) : undefined,
      keepAlive: o.keepalive ? 30000 : undefined,
      username: o.user || undefined,
      password: o.password || undefined,
      tls: o.tls || undefined,
    };
    let r;
    if (o.cluster) {
      // The cluster keeps its offline queue: it rejects a command for a
      // node still connecting otherwise, its own ready check included.
      // No retry strategy: a cluster that cannot be reached fails the call.
      // No ready check: ioredis asks a node at random for CLUSTER INFO and,
      // when that node is a master down, connects again and never settles
      // the connect; the calls find out about each master themselves.
      r = new Redis.Cluster(o.nodes, {
        lazyConnect: true,
        enableReadyCheck: false,
        clusterRetryStrategy: () => null,
        redisOptions: { ...common, lazyConnect: false, enableOfflineQueue: true, db: 0 },
        maxRedirections: 16,
      });
    } else if (o.sentinel) {
      r = new Redis({
        ...common,
        db: o.db,
        sentinels: o.sentinel.nodes,
        name: o.sentinel.master,
        sentinelUsername: o.sentinel.user || undefined,
        sentinelPassword: o.sentinel.password || undefined,
        enableTLSForSentinelMode: !!o.tls,
        sentinelTLS: o.tls || undefined,
        retryStrategy: () => null,
        sentinelRetryStrategy: () => null,
      });
    } else {
      r = new Redis({ ...common, host: o.host, port: o.port, path: o.path, db: o.db,
        retryStrategy: () => null });
    }
    r.on('error', (e) => { this.lastError = e; });
    r.on('ready', () => { this.gen++; });
    return r;
  }

  // The DelayqError for an error of ioredis met while doing `what`.
  error(e, what) {
    const msg = e && e.message ? e.message : String(e);
    if (isReplyError(e)) {
      if (/^(NOAUTH|WRONGPASS)/.test(msg)) return fail('auth', `redis: ${msg}`);
      return fail('redis', `redis error in ${what}: ${msg}`);
    }
    if (/timed out/i.test(msg)) return fail('timeout', `redis ${this.addr}: ${what} timed out`);
    return fail('connect', `redis ${this.addr}: ${msg}`);
  }

  // Connect when there is no usable connection: DelayqError "connect" or
  // "auth" when that fails.
  async ready() {
    if (this.closed) throw fail('connect', `redis ${this.addr}: the client is closed`);
    const status = this.redis.status;
    if (status === 'ready') return;
    // ioredis can leave a connect unsettled for good (a cluster's ready
    // check that meets a master down, then reconnects): the wait is
    // bounded by the connect timeout, and a second more.
    const limit = this.o.connectTimeout + 1000;
    if (status === 'connecting' || status === 'connect' || status === 'reconnecting') {
      let done;
      await bounded(new Promise((resolve) => {
        done = () => { this.redis.off('ready', done); this.redis.off('end', done); resolve(); };
        this.redis.on('ready', done);
        this.redis.on('end', done);
      }), limit).catch((e) => {
        this.redis.off('ready', done);
        this.redis.off('end', done);
        this.lastError = e;
      });
      if (this.redis.status === 'ready') return;
    } else {
      this.lastError = null;
      try {
        await bounded(this.redis.connect(), limit);
      } catch (e) {
        this.lastError = this.lastError || e;
      }
    }
    if (this.redis.status === 'ready') return;
    const e = this.lastError;
    this.redis.disconnect();
    if (e && (isReplyError(e) || /WRONGPASS|NOAUTH|AUTH/.test(e.message || ''))) {
      throw fail('auth', `redis refused AUTH: ${e.message.replace(/^.*?(WRONGPASS|NOAUTH|ERR)/, '$1')}`);
    }
    throw fail('connect', `cannot connect to redis at ${this.addr}: ${e ? e.message : 'connection closed'}`);
  }

  // Drop the connection (the next call makes a new one).
  drop() {
    try { this.redis.disconnect(); } catch (_) { /* closed already */ }
  }

  // Run `fn` (which sends on this.redis) with the failover rule; `what`
  // names the call in messages.
  async withFailover(what, fn) {
    const deadline = Date.now() + this.o.connectTimeout;
    let backoff = 100;
    for (;;) {
      await this.ready();
      try {
        return await fn();
      } catch (e) {
        if (e instanceof DelayqError) throw e;
        const m = e && e.message ? e.message : '';
        if (!isReplyError(e) || !FAILOVER.test(m)) throw this.error(e, what);
        if (Date.now() + backoff > deadline) {
          throw fail('connect', `redis ${this.addr}: ${m} (no master within ${this.o.connectTimeout} ms)`);
        }
        this.drop();
        await sleep(backoff / 2 + Math.random() * backoff / 2);
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  // A plain command, replies as Buffers.
  command(name, args) {
    return this.withFailover(name, () => this.redis.callBuffer(name, ...args));
  }

  // Several plain commands ([name, args] each) in one round trip (on a
  // cluster, each routed by its key); their replies.
  commands(list) {
    return this.withFailover(list[0][0], async () => {
      if (this.o.cluster) return Promise.all(list.map(([n, a]) => this.redis.callBuffer(n, ...a)));
      const p = this.redis.pipeline();
      for (const [n, a] of list) p.callBuffer(n, ...a);
      const res = await p.exec();
      for (const [err] of res) if (err) throw err;
      return res.map(([, v]) => v);
    });
  }

  // Load `s` where it is missing: the one server, or every master.
  async loadScript(s) {
    const nodes = this.o.cluster ? this.redis.nodes('master') : [this.redis];
    await Promise.all(nodes.map((n) => n.callBuffer('SCRIPT', 'LOAD', s.text)));
  }

  waits(s) {
    return this.o.durability === 'replicated' && s.writes;
  }

  checkWait(reply) {
    if (reply instanceof Error) throw this.error(reply, 'WAIT');
    if (typeof reply === 'number' && reply >= 1) return;
    throw fail('timeout', `not replicated within ${this.o.replicationTimeout} ms ` +
      '(the write is on the master only)');
  }

  // Run script `name` on `keys` with `args`; the reply with Buffers for
  // strings.  A script error is DelayqError "redis" ("redis error in
  // NAME: ...").
  async evalScript(name, keys, args) {
    const s = script(name);
    const argv = [s.sha, keys.length, ...keys, ...args];
    for (let loads = 0; ; loads++) {
      try {
        return await this.withFailover(name, async () => {
          if (!this.waits(s)) return this.redis.callBuffer('EVALSHA', ...argv);
          const p = this.pipelineFor(keys[0]);
          p.callBuffer('EVALSHA', ...argv);
          p.callBuffer('WAIT', 1, this.o.replicationTimeout);
          const res = await p.exec();
          if (res[0][0]) throw res[0][0];
          this.checkWait(res[1][0] || res[1][1]);
          return res[0][1];
        });
      } catch (e) {
        if (!(e.code === 'redis' && / NOSCRIPT/.test(e.message)) || loads >= MAX_LOADS) {
          if (e.code === 'redis' && / NOSCRIPT/.test(e.message)) {
            throw fail('redis', `redis keeps losing the ${name} script`);
          }
          throw e;
        }
        await this.withFailover('SCRIPT LOAD', () => this.loadScript(s));
      }
    }
  }

  // A pipeline that reaches the server holding `key`: on a cluster, that
  // master's own connection (so that one pipeline is one round trip).
  pipelineFor(key) {
    if (!this.o.cluster) return this.redis.pipeline();
    return this.nodeOf(key).pipeline();
  }

  // The connection to the master that holds `key`'s slot: the pool's, or
  // a new one to the address the map names (a connection the pool dropped
  // is made again, and one to a master down then fails with connect, not
  // with a MOVED from another master); any master when the map has none.
  nodeOf(key) {
    const live = this.liveNodeOf(key);
    if (live) return live;
    const addr = this.ownerOf(key);
    if (!addr) return this.redis.nodes('master')[0];
    const at = addr.lastIndexOf(':');
    return this.redis.connectionPool.findOrCreate({ host: addr.slice(0, at), port: Number(addr.slice(at + 1)) });
  }

  // The address ("host:port") of the master that holds `key`'s slot by
  // the client's map, or '' when the map has none.
  ownerOf(key) {
    const slots = this.redis.slots[keySlot(key)];
    return (slots && slots[0]) || '';
  }

  // The connection to the master that holds `key`'s slot, or null when the
  // client has none (its master's connection closed: out of reach).
  liveNodeOf(key) {
    const addr = this.ownerOf(key);
    return (addr && this.redis.connectionPool.getInstanceByKey(addr)) || null;
  }

  // Run many calls of script `name` ({keys, args} each), one pipeline per
  // master (one round trip each, the masters in parallel), with WAIT at
  // the end of each under replicated durability.  Returns one entry per
  // call: the reply, or a DelayqError.  A master that lost the script
  // (NOSCRIPT) has it loaded and its calls sent again in one pipeline; on
  // a cluster, calls whose slot moved, or whose master the client has no
  // connection to, are sent again one by one (resendAlone).
  async pipelineScripts(name, calls) {
    const s = script(name);
    await this.ready();
    const groups = new Map();
    const again = [];
    calls.forEach((c, i) => {
      const node = this.o.cluster ? this.liveNodeOf(c.keys[0]) : this.redis;
      if (!node) {
        again.push(i);
        return;
      }
      if (!groups.has(node)) groups.set(node, []);
      groups.get(node).push(i);
    });
    const out = new Array(calls.length);
    await Promise.all([...groups].map(async ([node, idx]) => {
      for (let loads = 0; idx.length; loads++) {
        const noscript = await this.pipelineOn(node, s, calls, idx, out, again);
        if (!noscript.length) return;
        if (loads >= MAX_LOADS) {
          for (const i of noscript) out[i] = fail('redis', `redis keeps losing the ${name} script`);
          return;
        }
        try {
          await node.callBuffer('SCRIPT', 'LOAD', s.text);
        } catch (e) {
          for (const i of noscript) out[i] = this.error(e, 'SCRIPT LOAD');
          return;
        }
        idx = noscript;
      }
    }));
    await this.resendAlone(name, calls, again, out);
    return out;
  }

  // Sends the calls `idx` one at a time as evalScript does: routed by the
  // cluster client (which follows MOVED and ASK), or, when a WAIT follows
  // (durability "replicated"), on the connection to the slot's master by
  // the map (nodeOf).  A master that fails one with connect
  // or timeout is out of reach: the rest of its calls get that error,
  // naming it, unsent, as libdelayq and the Python client answer per
  // master (sending each would wait out the redirections, about 200 ms a
  // call, for a master that is down).
  async resendAlone(name, calls, idx, out) {
    const down = new Map();   // a master's address -> its calls' error
    for (const i of idx) {
      const addr = this.o.cluster ? this.ownerOf(calls[i].keys[0]) : '';
      if (down.has(addr)) {
        out[i] = down.get(addr);
        continue;
      }
      try {
        out[i] = await this.evalScript(name, calls[i].keys, calls[i].args);
      } catch (e) {
        out[i] = addr ? this.masterError(addr, e) : e;
        // Unless the call was sent elsewhere meanwhile (the map changed).
        if (out[i] !== e && this.ownerOf(calls[i].keys[0]) === addr) down.set(addr, out[i]);
      }
    }
  }

  // A cluster call's error `e` (a DelayqError) when it says that the
  // master at `addr` is out of reach (connect or timeout): the same code,
  // the message naming that master (the client's own address names the
  // seeds it was given).  Any other error as it is.
  masterError(addr, e) {
    if (!(e instanceof DelayqError) || (e.code !== 'connect' && e.code !== 'timeout')) return e;
    return fail(e.code, `redis master ${addr} out of reach (${e.message})`);
  }

  // One pipeline of the calls `idx` on `node`: fills out[] and again[]
  // (calls to send alone), and returns the calls refused with NOSCRIPT.
  async pipelineOn(node, s, calls, idx, out, again) {
    const p = node.pipeline();
    for (const i of idx) p.callBuffer('EVALSHA', s.sha, calls[i].keys.length, ...calls[i].keys, ...calls[i].args);
    if (this.waits(s)) p.callBuffer('WAIT', 1, this.o.replicationTimeout);
    // A connection's failure names this master on a cluster.
    const here = this.o.cluster ? `${node.options.host}:${node.options.port}` : '';
    const failed = (e) => (here ? this.masterError(here, this.error(e, s.name)) : this.error(e, s.name));
    let res;
    try {
      res = await p.exec();
    } catch (e) {
      const err = failed(e);
      for (const i of idx) out[i] = err;
      return [];
    }
    let waitErr = null;
    if (this.waits(s)) {
      const w = res[idx.length];
      try { this.checkWait(w[0] || w[1]); } catch (e) { waitErr = e; }
    }
    const noscript = [];
    idx.forEach((i, k) => {
      const [err, val] = res[k];
      const m = err ? err.message : '';
      if (/^NOSCRIPT/.test(m)) noscript.push(i);
      else if (/^(MOVED|ASK|TRYAGAIN|READONLY|MASTERDOWN|LOADING)/.test(m)) again.push(i);
      else if (err) out[i] = failed(err);
      else out[i] = waitErr || val;
    });
    return noscript;
  }

  async close() {
    this.closed = true;
    try {
      await this.redis.quit();
    } catch (_) {
      this.redis.disconnect();
    }
  }
}

module.exports = { Conn };
