'use strict';
// Client.fromConfig: the `redis` group of a delayqd.conf, read with the
// checks and messages of src/config/redis_conf.c ("FILE:LINE: ..."), so
// that a service and its daemon share one file.

const fs = require('fs');
const path = require('path');
const { parseFile, member, ConfigSyntaxError } = require('./libconfig');
const { fail } = require('./errors');
const { parseDuration } = require('./when');
const K = require('./keys');

const PAYLOAD_MAX = 64 * 1024 * 1024;
const KEYS = ['host', 'port', 'unix_socket', 'user', 'password', 'password_file', 'db', 'prefix',
  'connect_timeout', 'command_timeout', 'keepalive', 'max_payload', 'durability',
  'replication_timeout', 'sentinel', 'cluster', 'nodes', 'tls'];

class Reader {
  constructor(file) {
    this.file = file;
  }

  fail(v, msg) {
    const where = v && v.line ? `${v.file || this.file}:${v.line}` : this.file;
    return fail('invalid', `${where}: ${msg}`.replace(/[\x00-\x1f\x7f]/g, '?'));
  }

  string(v, name) {
    if (v.type !== 'string') throw this.fail(v, `${name}: expected a string`);
    if (v.value === '') throw this.fail(v, `${name} is empty`);
    return v.value;
  }

  int(v, name, min, max) {
    if (v.type !== 'int') throw this.fail(v, `${name}: expected an integer`);
    if (v.value < min || v.value > max) throw this.fail(v, `${name}: ${v.value} is out of range (${min} to ${max})`);
    return v.value;
  }

  bool(v, name) {
    if (v.type !== 'bool') throw this.fail(v, `${name}: expected true or false`);
    return v.value;
  }

  duration(v, name, min) {
    if (v.type === 'string' && /^[0-9]+$/.test(v.value)) {
      throw this.fail(v, `${name}: "${v.value}" has no unit (write "${v.value}s" or "${v.value}ms")`);
    }
    if (v.type !== 'string') throw this.fail(v, `${name}: expected a duration string with a unit, like "30s"`);
    let ms;
    try {
      ms = parseDuration(v.value);
    } catch (e) {
      throw this.fail(v, `${name}: bad duration "${v.value}": ${e.message}`);
    }
    if (ms < min) throw this.fail(v, `${name}: must be at least ${min}ms`);
    if (ms > 2147483647) throw this.fail(v, `${name}: "${v.value}" is too long`);
    return ms;
  }

  // A path relative to the configuration file's directory.
  resolve(p) {
    return path.isAbsolute(p) ? p : path.join(path.dirname(this.file), p);
  }

  // The first line of a file (a password), its trailing newline cut.
  firstLine(v, name) {
    const file = this.resolve(this.string(v, name));
    let text;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      throw this.fail(v, `${name}: cannot read ${file}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`);
    }
    const line = text.split('\n')[0].replace(/\r$/, '');
    if (line === '') throw this.fail(v, `${name}: cannot read ${file}: the file is empty`);
    return line;
  }

  // "HOST:PORT" strings: [{host, port}].
  nodes(v, name, what) {
    if (v.type !== 'array' && v.type !== 'list') throw this.fail(v, `${name}: expected a list of "HOST:PORT" strings`);
    if (!v.items.length) throw this.fail(v, `${name} is empty: list at least one ${what}`);
    return v.items.map((e, i) => {
      const s = e.type === 'string' ? e.value : null;
      const m = s && /^(\[[^\]]+\]|[^:]+):([0-9]+)$/.exec(s);
      if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
        throw this.fail(e, `${name}[${i}]: '${s === null ? e.type : s}': expected HOST:PORT`);
      }
      return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
    });
  }

  tls(v) {
    if (v.type !== 'group') throw this.fail(v, 'redis.tls: expected a group { ... }');
    const known = ['enable', 'ca_file', 'ca_dir', 'cert_file', 'key_file', 'server_name', 'verify'];
    for (const m of v.members) if (!known.includes(m.name)) throw this.fail(m.value, `unknown setting 'redis.tls.${m.name}'`);
    const get = (n) => member(v, n);
    if (get('enable') && !this.bool(get('enable'), 'redis.tls.enable')) return undefined;
    const t = {};
    const read = (n, dir) => {
      const f = get(n);
      if (!f) return undefined;
      if (f.type !== 'string') throw this.fail(f, `redis.tls.${n}: expected a string`);
      if (f.value === '') throw this.fail(f, `redis.tls.${n} is empty`);
      const file = this.resolve(f.value);
      let st;
      try {
        st = fs.statSync(file);
        if (dir !== st.isDirectory()) throw Object.assign(new Error(dir ? 'Not a directory' : 'Is a directory'), {});
        fs.accessSync(file, fs.constants.R_OK);
      } catch (e) {
        throw this.fail(f, `redis.tls.${n}: cannot read ${file}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`);
      }
      return file;
    };
    const ca = read('ca_file', false);
    const caDir = read('ca_dir', true);
    const cert = read('cert_file', false);
    const key = read('key_file', false);
    if (!!cert !== !!key) throw this.fail(get('key_file') || get('cert_file'), 'redis.tls.cert_file and redis.tls.key_file go together (set both)');
    const cas = [];
    if (ca) cas.push(fs.readFileSync(ca));
    if (caDir) for (const f of fs.readdirSync(caDir)) if (/\.(pem|crt|[0-9]+)$/.test(f)) cas.push(fs.readFileSync(path.join(caDir, f)));
    if (cas.length) t.ca = cas;
    if (cert) { t.cert = fs.readFileSync(cert); t.key = fs.readFileSync(key); }
    if (get('server_name')) t.servername = this.string(get('server_name'), 'redis.tls.server_name');
    if (get('verify') && !this.bool(get('verify'), 'redis.tls.verify')) t.rejectUnauthorized = false;
    return t;
  }

  sentinel(v) {
    if (v.type !== 'group') throw this.fail(v, 'redis.sentinel: expected a group { ... }');
    const known = ['master', 'nodes', 'user', 'password', 'password_file'];
    for (const m of v.members) if (!known.includes(m.name)) throw this.fail(m.value, `unknown setting 'redis.sentinel.${m.name}'`);
    const get = (n) => member(v, n);
    if (!get('master')) throw this.fail(v, 'redis.sentinel.master is missing: the name the sentinels monitor');
    if (!get('nodes')) throw this.fail(v, 'redis.sentinel.nodes is missing: list the sentinels');
    if (get('password') && get('password_file')) throw this.fail(get('password_file'), 'redis.sentinel.password and redis.sentinel.password_file are both set (keep one)');
    const s = {
      master: this.string(get('master'), 'redis.sentinel.master'),
      nodes: this.nodes(get('nodes'), 'redis.sentinel.nodes', 'sentinel'),
    };
    if (get('user')) s.user = this.string(get('user'), 'redis.sentinel.user');
    if (get('password')) s.password = this.string(get('password'), 'redis.sentinel.password');
    if (get('password_file')) s.password = this.firstLine(get('password_file'), 'redis.sentinel.password_file');
    if (s.user && !s.password) throw this.fail(v, 'redis.sentinel.user needs redis.sentinel.password or redis.sentinel.password_file');
    return s;
  }
}

// Settings that exclude each other: the later one is named.
function checkPair(r, g, a, b) {
  const x = g.members.find((m) => m.name === a);
  const y = g.members.find((m) => m.name === b);
  if (!x || !y) return;
  const later = y.line >= x.line ? y : x;
  throw r.fail(later.value, `redis.${a} and redis.${b} are both set (keep one)`);
}

// loadRedisConfig(file) -> the Client options of its `redis` group (the
// defaults when there is none).  DelayqError "invalid" with FILE:LINE.
function loadRedisConfig(file) {
  let root;
  try {
    root = parseFile(file);
  } catch (e) {
    if (e instanceof ConfigSyntaxError) throw fail('invalid', e.message);
    throw e;
  }
  const r = new Reader(file);
  const g = member(root, 'redis');
  const o = {};
  if (!g) return o;
  if (g.type !== 'group') throw r.fail(g, 'redis: expected a group (redis = { ... };)');
  for (const m of g.members) if (!KEYS.includes(m.name)) throw r.fail(m.value, `unknown setting redis.${m.name}`);
  checkPair(r, g, 'password', 'password_file');
  checkPair(r, g, 'host', 'unix_socket');
  checkPair(r, g, 'host', 'sentinel');
  checkPair(r, g, 'unix_socket', 'sentinel');
  const get = (n) => member(g, n);
  let v;
  if ((v = get('host'))) o.host = r.string(v, 'redis.host');
  if ((v = get('port'))) o.port = r.int(v, 'redis.port', 1, 65535);
  if ((v = get('unix_socket'))) {
    o.path = r.string(v, 'redis.unix_socket');
    if (Buffer.byteLength(o.path) > 107) throw r.fail(v, 'redis.unix_socket: the path is longer than 107 bytes');
  }
  if ((v = get('user'))) o.user = r.string(v, 'redis.user');
  if ((v = get('password'))) o.password = r.string(v, 'redis.password');
  if ((v = get('password_file'))) o.password = r.firstLine(v, 'redis.password_file');
  if ((v = get('db'))) o.db = r.int(v, 'redis.db', 0, 2147483647);
  if ((v = get('prefix'))) {
    if (v.type === 'string' && K.checkPrefix(v.value)) throw r.fail(v, `redis.prefix: ${K.checkPrefix(v.value)}`);
    o.prefix = r.string(v, 'redis.prefix');
  }
  if ((v = get('connect_timeout'))) o.connectTimeout = r.duration(v, 'redis.connect_timeout', 1);
  if ((v = get('command_timeout'))) o.commandTimeout = r.duration(v, 'redis.command_timeout', 0);
  if ((v = get('keepalive'))) o.keepalive = r.bool(v, 'redis.keepalive');
  if ((v = get('max_payload'))) o.maxPayload = r.int(v, 'redis.max_payload', 1, PAYLOAD_MAX);
  if ((v = get('durability'))) {
    if (v.type !== 'string') throw r.fail(v, 'redis.durability: expected a string');
    if (v.value !== 'local' && v.value !== 'replicated') throw r.fail(v, `redis.durability: "${v.value}" is not "local" or "replicated"`);
    o.durability = v.value;
  }
  if ((v = get('replication_timeout'))) o.replicationTimeout = r.duration(v, 'redis.replication_timeout', 1);
  if ((v = get('sentinel'))) o.sentinel = r.sentinel(v);
  if ((v = get('cluster'))) o.cluster = r.bool(v, 'redis.cluster');
  if ((v = get('nodes'))) o.nodes = r.nodes(v, 'redis.nodes', 'cluster node');
  if ((v = get('tls'))) o.tls = r.tls(v);
  if ((v = get('user')) && !o.password) throw r.fail(v, 'redis.user needs redis.password or redis.password_file');
  if (!o.cluster && get('nodes')) throw r.fail(get('nodes'), 'redis.nodes lists cluster nodes: it needs redis.cluster = true');
  if (o.cluster) {
    if (get('sentinel')) throw r.fail(get('cluster'), 'redis.cluster and redis.sentinel are both set (a cluster does its own failover: keep one)');
    if (get('unix_socket')) throw r.fail(get('cluster'), 'redis.cluster needs TCP nodes, not redis.unix_socket');
    if (o.db) throw r.fail(get('db'), 'redis.db must be 0 with redis.cluster (a cluster has only database 0)');
  }
  if (o.tls && o.host && !o.tls.servername) o.tls.servername = o.host;
  return o;
}

module.exports = { loadRedisConfig };
