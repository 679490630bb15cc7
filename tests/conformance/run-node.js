#!/usr/bin/env node
'use strict';
// The conformance cases (cases.json, described in README.md here) run
// through the Node client.
//
//   node run-node.js [--cases FILE] [--package DIR] [--redis-server PATH] [-v]
//
// Starts two private redis-servers (unix sockets in a temporary directory:
// one plain, one with requirepass for the wrong-password cases), runs each
// case for each of its partition counts with a fresh client and a fresh
// queue, and prints "N passed, N failed" last; exits 0 only when none
// failed.  --package (or DELAYQ_NODE_PKG) is the built package directory,
// with ioredis installed in it.

const { spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');

const PASSWORD = 'conformance-secret';
const PIN = 'delayq pin: keeps this key in its hash-table encoding (never a job)';

function args() {
  const a = { cases: path.join(__dirname, 'cases.json'), pkg: process.env.DELAYQ_NODE_PKG,
    server: process.env.REDIS_SERVER || 'redis-server', verbose: false };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '--cases') a.cases = v[++i];
    else if (v[i] === '--package') a.pkg = v[++i];
    else if (v[i] === '--redis-server') a.server = v[++i];
    else if (v[i] === '-v' || v[i] === '--verbose') a.verbose = true;
    else throw new Error(`usage: run-node.js [--cases FILE] [--package DIR] [--redis-server PATH] [-v] (not "${v[i]}")`);
  }
  if (!a.pkg) throw new Error('run-node.js: no package: --package DIR or DELAYQ_NODE_PKG');
  return a;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A private redis-server on a unix socket in `dir`, stopped by pid.
async function startServer(binary, dir, Redis, password) {
  fs.mkdirSync(dir);
  const sock = path.join(dir, 'redis.sock');
  const argv = ['--port', '0', '--unixsocket', sock, '--save', '', '--appendonly', 'no', '--dir', dir];
  if (password) argv.push('--requirepass', password);
  const child = spawn(binary, argv, { stdio: 'ignore' });
  const exited = new Promise((r) => child.on('exit', r));
  for (let i = 0; i < 200 && !fs.existsSync(sock); i++) await sleep(20);
  const raw = new Redis({ path: sock, password, lazyConnect: true, maxRetriesPerRequest: 0 });
  await raw.connect();
  await raw.ping();
  return {
    sock, raw, pid: child.pid,
    async stop() {
      raw.disconnect();
      child.kill('SIGTERM');
      await exited;
    },
  };
}

// A case's payload: a string is UTF-8, {hex} bytes, {repeat, times}.
function payloadOf(p) {
  if (p === undefined) return Buffer.alloc(0);
  if (typeof p === 'string') return Buffer.from(p, 'utf8');
  if (p.hex !== undefined) return Buffer.from(p.hex, 'hex');
  return Buffer.from(p.repeat.repeat(p.times), 'utf8');
}

// Each element's MessagePack format name and value, of a record body.
function mpDescribe(b) {
  let pos = 0;
  const sized = { 0xcc: ['uint8', 1], 0xcd: ['uint16', 2], 0xce: ['uint32', 4], 0xcf: ['uint64', 8],
    0xd0: ['int8', 1], 0xd1: ['int16', 2], 0xd2: ['int32', 4], 0xd3: ['int64', 8],
    0xd9: ['str8', 1], 0xda: ['str16', 2], 0xdb: ['str32', 4],
    0xc4: ['bin8', 1], 0xc5: ['bin16', 2], 0xc6: ['bin32', 4], 0xdc: ['array16', 2], 0xdd: ['array32', 4] };
  function one() {
    const t = b[pos++];
    if (t <= 0x7f) return ['fixint', t];
    if (t >= 0xe0) return ['negfixint', t - 256];
    if (t >= 0x80 && t <= 0x8f) return ['fixmap', t & 0x0f];
    if (t >= 0x90 && t <= 0x9f) return ['fixarray', t & 0x0f];
    if (t >= 0xa0 && t <= 0xbf) {
      const n = t & 0x1f;
      pos += n;
      return ['fixstr', b.subarray(pos - n, pos)];
    }
    if (t === 0xc0) return ['nil', null];
    const s = sized[t];
    if (!s) throw new Error(`MessagePack type 0x${t.toString(16)} unknown here`);
    const [name, size] = s;
    let v = 0n;
    for (let i = 0; i < size; i++) v = (v << 8n) | BigInt(b[pos + i]);
    if (name.startsWith('int') && (b[pos] & 0x80)) v -= 1n << BigInt(8 * size);
    pos += size;
    if (name.startsWith('str') || name.startsWith('bin')) {
      pos += Number(v);
      return [name, b.subarray(pos - Number(v), pos)];
    }
    return [name, Number(v)];
  }
  const [fmt, count] = one();
  const formats = [fmt];
  const values = [];
  for (let i = 0; i < count; i++) {
    const [f, v] = one();
    formats.push(f);
    values.push(v);
  }
  return { formats, values };
}

// Equal; with exact false, objects compare only the keys `want` has
// (recursively).  A Buffer equals a string's UTF-8 or a {hex}/{repeat}.
function same(got, want, exact) {
  if (Buffer.isBuffer(got)) {
    if (typeof want === 'string') return got.equals(Buffer.from(want, 'utf8'));
    if (want && typeof want === 'object' && (want.hex !== undefined || want.repeat !== undefined)) return got.equals(payloadOf(want));
    return false;
  }
  if (Array.isArray(want)) {
    return Array.isArray(got) && got.length === want.length && want.every((w, i) => same(got[i], w, exact));
  }
  if (want !== null && typeof want === 'object') {
    if (got === null || typeof got !== 'object' || Array.isArray(got)) return false;
    if (exact && Object.keys(got).length !== Object.keys(want).length) return false;
    return Object.keys(want).every((k) => k in got && same(got[k], want[k], exact));
  }
  if (typeof want === 'boolean' || typeof got === 'boolean') return typeof want === typeof got && want === got;
  if (want === null) return got === null || got === undefined;
  return got === want;
}

function ofType(got, t, keys) {
  if (t === 'generated_id') return typeof got === 'string' && /^[0-9]+$/.test(got);
  if (t === 'time_ms') return typeof got === 'number' && Number.isInteger(got) && got > 0;
  if (t === 'schedule_run_id') return typeof got === 'string' && keys.isScheduleId(got) && got.includes('@now-');
  return false;
}

function show(v) {
  return JSON.stringify(v, (k, x) => (x && x.type === 'Buffer' && Array.isArray(x.data) ? { hex: Buffer.from(x.data).toString('hex') } : x));
}

class Run {
  constructor(a, delayq, keys, servers, missing) {
    this.a = a;
    this.delayq = delayq;
    this.keys = keys;
    this.server = servers.plain;
    this.auth = servers.auth;
    this.missing = missing;
    this.prefix = 'dq';
  }

  tags() {
    return Array.from({ length: this.n }, (_, p) => (this.n > 1 ? `${this.queue}:${p}` : this.queue));
  }

  // What Redis holds, read directly: every partition's delayed sets of
  // all levels, processing less the pin, dead, the count of records.
  async redisState() {
    const r = this.server.raw;
    const st = { delayed: [], processing: [], dead: [], records: 0, where: {} };
    for (const [p, t] of this.tags().entries()) {
      const base = `${this.prefix}:{${t}}:`;
      const sets = {
        delayed: [`${base}delayed`, ...[0, 1, 2, 3, 4, 6, 7, 8, 9].map((l) => `${base}delayed:${l}`)],
        processing: [`${base}processing`], dead: [`${base}dead`],
      };
      for (const [name, ks] of Object.entries(sets)) {
        for (const k of ks) {
          for (const m of await r.zrangeBuffer(k, 0, -1)) {
            const id = m.toString('latin1');
            if (id === PIN) continue;
            st[name].push(id);
            st.where[id] = p;
          }
        }
      }
      st.records += await r.hlen(`${base}jobs`);
      const pattern = `${base.replace(/[{}*?[\]\\]/g, '\\$&')}jobs:*`;
      let cursor = '0';
      do {
        const [next, found] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        for (const k of found) {
          const suffix = k.slice(`${base}jobs:`.length);
          if (/^[0-9]*$/.test(suffix)) st.records += await r.hlen(k);
        }
      } while (cursor !== '0');
    }
    for (const name of ['delayed', 'processing', 'dead']) st[name].sort();
    st.registered = (await r.sismember(`${this.prefix}:queues`, this.queue)) === 1;
    st.protocol = await r.hget(`${this.prefix}:{${this.queue}}:meta`, 'protocol');
    return st;
  }

  // The raw record of a job: its head, each element's MessagePack format,
  // and the decoded values.
  async record(id) {
    const t = this.tags()[this.keys.partitionOf(id, this.n)];
    let key = `${this.prefix}:{${t}}:jobs`;
    if (/^[0-9]+$/.test(id)) key += `:${id.slice(0, -2)}`;
    const raw = await this.server.raw.hgetBuffer(key, id);
    if (raw === null) return null;
    const colon = raw.indexOf(0x3a, raw.indexOf(0x3a) + 1) + 1;
    const { formats, values } = mpDescribe(raw.subarray(colon));
    const names = ['type', 'payload', 'max_attempts', 'created_ms', 'due_offset_ms', 'last_error', 'priority'];
    const out = { head: raw.subarray(0, colon).toString(), formats };
    names.forEach((n, i) => { if (i < values.length) out[n] = values[i]; });
    return out;
  }

  jobOpts(a) {
    const o = {};
    if ('delay_ms' in a) o.delay = a.delay_ms;
    if ('at_ms' in a) o.at = a.at_ms;
    if ('id' in a) o.id = a.id;
    if ('replace' in a) o.replace = a.replace;
    if ('priority' in a) o.priority = a.priority;
    if ('max_attempts' in a) o.maxAttempts = a.max_attempts;
    return o;
  }

  async serverNow() {
    const [s, us] = await this.server.raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  async fillAt(a) {
    const o = this.jobOpts(a);
    if ('at_ms_from_now' in a) o.at = (await this.serverNow()) + a.at_ms_from_now;
    return o;
  }

  // Claim the due jobs of every partition through the claim script (a
  // lease of 60 s) and, with `error`, fail each dead: how many.
  async claim(c, error) {
    let count = 0;
    for (let p = 0; p < this.n; p++) {
      const k = c.keysOf(this.queue, p, this.n);
      const r = await c.conn.evalScript('claim', k.keys, [1000, 60000]);
      const got = Number(r[2]);
      for (let i = 0; error !== undefined && i < got; i++) {
        await c.conn.evalScript('fail', k.keys, [k.wake, r[3 + 4 * i], r[5 + 4 * i], error, 'dead', -1, 1000, 3600000, 0, 1, 5]);
      }
      count += got;
    }
    return count;
  }

  async wakeMessages() {
    await sleep(300);
    const got = this.messages.splice(0);
    return { count: got.length, due_times: got.every((m) => /^[0-9]+$/.test(m)) };
  }

  async call(c, step) {
    const name = step.call;
    const a = step.args || {};
    const q = this.queue;
    switch (name) {
      case 'enqueue':
        return c.enqueue(q, a.type, payloadOf(a.payload), await this.fillAt(a));
      case 'enqueue_many': {
        const jobs = [];
        for (const j of a.jobs) jobs.push({ queue: q, type: j.type, payload: payloadOf(j.payload), ...(await this.fillAt(j)) });
        return (await c.enqueueMany(jobs)).map((r) => ({
          id: r.id === undefined ? null : r.id, error: r.error ? r.error.code : null,
          generated: !!(r.id && /^[0-9]+$/.test(r.id)),
        }));
      }
      case 'cancel': return c.cancel(q, a.id);
      case 'show': {
        const j = await c.show(q, a.id);
        return j === null ? null : {
          state: j.state, type: j.type, payload: j.payload, attempts: j.attempts, max_attempts: j.maxAttempts,
          priority: j.priority, created_ms: j.createdMs, due_ms: j.dueMs, last_error: j.lastError,
          fence: j.fence,
        };
      }
      case 'run_now': await c.runNow(q, a.id); return null;
      case 'stats': {
        const s = await c.stats(q);
        return { delayed: s.delayed, due: s.due, processing: s.processing, dead: s.dead, expired: s.expired,
          next_due_in_ms: s.nextDueInMs, due_by_priority: s.dueByPriority, jobs_cancelled: s.jobsCancelled };
      }
      case 'pause': await c.pause(q); return null;
      case 'resume': await c.resume(q); return null;
      case 'paused': return (await c.paused(q)) !== -1;
      case 'dead_list': {
        const pg = await c.deadList(q, { offset: a.offset === undefined ? 0 : a.offset, count: a.count === undefined ? 100 : a.count });
        return { total: pg.total, jobs: pg.jobs.map((d) => ({ id: d.id, type: d.type, attempts: d.attempts, last_error: d.lastError, payload_bytes: d.payloadBytes })) };
      }
      case 'requeue': await c.requeue(q, a.id); return null;
      case 'purge': await c.purge(q, a.id); return null;
      case 'requeue_all': return c.requeueAll(q);
      case 'purge_all': return c.purgeAll(q);
      case 'schedule_add':
        return c.scheduleAdd(q, a.name, a.expr, a.type, payloadOf(a.payload), {
          tz: a.tz, maxAttempts: a.max_attempts || 0, catchUp: a.catch_up || 'one', replace: !!a.replace,
        });
      case 'schedule_list':
        return (await c.scheduleList(q)).map((s) => ({ name: s.name, expr: s.expr, tz: s.tz, type: s.type,
          payload: s.payload, max_attempts: s.maxAttempts, catch_up: s.catchUp }));
      case 'schedule_remove': await c.scheduleRemove(q, a.name); return null;
      case 'schedule_run_now': return c.scheduleRunNow(q, a.name);
      case 'claim': return this.claim(c);
      case 'claim_and_fail': return this.claim(c, a.error === undefined ? 'failed' : a.error);
      case 'redis_state': return this.redisState();
      case 'record': return this.record(a.id);
      case 'redis': {
        const argv = a.argv.map((x) => {
          if (typeof x !== 'object') return x.replace(/\$P/g, this.prefix).replace(/\$Q/g, this.queue);
          // Buffer.from stops at a bad digit: a mistake in the file must not plant other bytes.
          if (typeof x.hex !== 'string' || !/^([0-9a-fA-F]{2})*$/.test(x.hex)) {
            throw new Error('a redis argument that is an object must be {"hex": hex digit pairs}');
          }
          return Buffer.from(x.hex, 'hex');
        });
        const r = await this.server.raw.call(...argv);
        return Buffer.isBuffer(r) ? r.toString() : r;
      }
      case 'wake_messages': return this.wakeMessages();
      default: throw new Error(`unknown call ${name}`);
    }
  }

  // "$name" (a value or an object's key) is what the step with save_as
  // "name" returned.
  substitute(v) {
    if (typeof v === 'string' && v.startsWith('$') && v.slice(1) in this.saved) return this.saved[v.slice(1)];
    if (Array.isArray(v)) return v.map((x) => this.substitute(x));
    if (v !== null && typeof v === 'object') {
      const o = {};
      for (const [k, x] of Object.entries(v)) o[this.substitute(k)] = this.substitute(x);
      return o;
    }
    return v;
  }

  // null when the step did what it should, else why not.
  async runStep(c, raw) {
    const step = this.substitute(raw);
    let got;
    try {
      got = await this.call(c, step);
      if (step.save_as) this.saved[step.save_as] = got;
    } catch (e) {
      if (!(e instanceof this.delayq.DelayqError)) return `threw ${e.stack || e}`;
      if (step.raises) return e.code === step.raises ? null : `raised ${e.code} (${e.message}), expected ${step.raises}`;
      return `raised ${e.code}: ${e.message}`;
    }
    if (step.raises) return `returned ${show(got)}, expected to raise ${step.raises}`;
    if ('returns' in step && !same(got, step.returns, true)) return `returned ${show(got)}, expected ${JSON.stringify(step.returns)}`;
    if ('returns_fields' in step && !same(got, step.returns_fields, false)) {
      return `returned ${show(got)}, expected fields ${JSON.stringify(step.returns_fields)}`;
    }
    if ('returns_type' in step && !ofType(got, step.returns_type, this.keys)) return `returned ${show(got)}, expected a ${step.returns_type}`;
    return null;
  }

  async runCase(kase, n, idx) {
    this.n = n;
    this.queue = `cfn${process.pid % 10000}-${idx}-${n}`;
    this.saved = {};
    this.messages = [];
    await this.server.raw.flushall();
    const { Client } = this.delayq;
    const mode = kase.connect || 'normal';
    let c;
    if (mode === 'missing_socket') c = Client.fromUrl(`unix://${this.missing}`, { connectTimeout: 500 });
    else if (mode === 'wrong_password') c = Client.fromUrl(`unix://${this.auth.sock}`, { password: 'wrong' });
    else c = Client.fromUrl(`unix://${this.server.sock}`);
    let sub = null;
    try {
      if (kase.subscribe_wake) {
        sub = this.server.raw.duplicate();
        sub.on('message', (ch, m) => this.messages.push(m));
        await sub.subscribe(...this.tags().map((t) => `${this.prefix}:{${t}}:wake`));
      }
      if (n !== 1) await c.setPartitions(this.queue, n);
      for (const [k, step] of kase.steps.entries()) {
        const why = await this.runStep(c, step);
        if (why) return `step ${k + 1} (${step.call}): ${why}`;
      }
      return null;
    } finally {
      if (sub) sub.disconnect();
      await c.close();
    }
  }
}

async function main() {
  const a = args();
  const delayq = require(a.pkg);
  const keys = require(path.join(a.pkg, 'lib', 'keys.js'));
  const Redis = require(require.resolve('ioredis', { paths: [a.pkg] }));
  const cases = JSON.parse(fs.readFileSync(a.cases, 'utf8'));
  if (cases.version !== 1) {
    console.log(`conformance: ${a.cases}: version ${JSON.stringify(cases.version)} is not 1`);
    return 1;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-node.'));
  const servers = {};
  let passed = 0;
  let failed = 0;
  try {
    servers.plain = await startServer(a.server, path.join(tmp, 'plain'), Redis);
    servers.auth = await startServer(a.server, path.join(tmp, 'auth'), Redis, PASSWORD);
    const run = new Run(a, delayq, keys, servers, path.join(tmp, 'missing.sock'));
    for (const [idx, kase] of cases.cases.entries()) {
      for (const n of kase.partitions || [1]) {
        let why;
        try {
          why = await run.runCase(kase, n, idx);
        } catch (e) {
          why = `threw ${e.stack || e}`;
        }
        if (why) {
          failed++;
          console.log(`FAIL ${kase.name} [partitions ${n}]: ${why}`);
        } else {
          passed++;
          if (a.verbose) console.log(`ok   ${kase.name} [partitions ${n}]`);
        }
      }
    }
  } finally {
    for (const s of Object.values(servers)) await s.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then((rc) => process.exit(rc), (e) => {
  console.log(`conformance: ${e.message}`);
  process.exit(2);
});
