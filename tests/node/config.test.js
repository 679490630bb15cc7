'use strict';
// Client.fromConfig reads the redis group of a delayqd.conf as delayqd
// does, with FILE:LINE in every message; Client.fromUrl the URL forms.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { startRedis, delayq, queueName } = require('./redis');

const { Client, loadRedisConfig } = delayq();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-node-conf-'));

function conf(text, name = 'delayqd.conf') {
  const f = path.join(dir, name);
  fs.writeFileSync(f, text);
  return f;
}

test.after(() => fs.rmSync(dir, { recursive: true, force: true }));

test('the shipped example configuration reads', () => {
  const o = loadRedisConfig(path.join(process.env.DELAYQ_SRCDIR, 'etc', 'delayqd.conf'));
  assert.deepStrictEqual(o, { host: '127.0.0.1', port: 6379, db: 0, prefix: 'dq', connectTimeout: 5000,
    commandTimeout: 5000, keepalive: true, maxPayload: 1048576 });
});

test('every setting of the group', () => {
  fs.writeFileSync(path.join(dir, 'pw'), 'secret\r\nignored\n');
  fs.writeFileSync(path.join(dir, 'spw'), 'sentinel-secret\n');
  const f = conf(`# comment
log = { level = "info"; };
redis = {
  sentinel = {
    master = "jobs";
    nodes = [ "10.0.0.5:26379", "10.0.0.6:26379" ];
    password_file = "spw";
  };
  user = "svc"; password_file = "pw";   // the first line only
  db = 3
  prefix = "app" "dq";                  /* adjacent strings join */
  connect_timeout = "1s500ms";
  command_timeout = "0s";
  keepalive = false;
  max_payload = 0x1000;
  durability = "replicated";
  replication_timeout = "250ms";
};
queues = ( { name = "a"; } );
`);
  assert.deepStrictEqual(loadRedisConfig(f), {
    sentinel: { master: 'jobs', nodes: [{ host: '10.0.0.5', port: 26379 }, { host: '10.0.0.6', port: 26379 }], password: 'sentinel-secret' },
    user: 'svc', password: 'secret', db: 3, prefix: 'appdq', connectTimeout: 1500, commandTimeout: 0,
    keepalive: false, maxPayload: 4096, durability: 'replicated', replicationTimeout: 250,
  });
  const c = loadRedisConfig(conf('redis = { cluster = true; nodes = [ "127.0.0.1:7000", "[::1]:7001" ]; };\n', 'c.conf'));
  assert.deepStrictEqual(c, { cluster: true, nodes: [{ host: '127.0.0.1', port: 7000 }, { host: '::1', port: 7001 }] });
});

test('mistakes are named at FILE:LINE', () => {
  const bad = [
    ['redis = {\n  hots = "x";\n};\n', ':2: unknown setting redis.hots'],
    ['redis = {\n  port = 70000;\n};\n', ':2: redis.port: 70000 is out of range (1 to 65535)'],
    ['redis = {\n  port = "6379";\n};\n', ':2: redis.port: expected an integer'],
    ['redis = {\n\n  durability = "sync";\n};\n', ':3: redis.durability: "sync" is not "local" or "replicated"'],
    ['redis = {\n  command_timeout = "5";\n};\n', ':2: redis.command_timeout: "5" has no unit (write "5s" or "5ms")'],
    ['redis = {\n  host = "a";\n  unix_socket = "/x";\n};\n', ':3: redis.host and redis.unix_socket are both set (keep one)'],
    ['redis = {\n  user = "u";\n};\n', ':2: redis.user needs redis.password or redis.password_file'],
    ['redis = {\n  password_file = "missing.pass";\n};\n', ':2: redis.password_file: cannot read '],
    ['redis = {\n  nodes = [ "a:1" ];\n};\n', ':2: redis.nodes lists cluster nodes: it needs redis.cluster = true'],
    ['redis = {\n  cluster = true;\n  db = 2;\n};\n', ':3: redis.db must be 0 with redis.cluster (a cluster has only database 0)'],
    ['redis = {\n  prefix = "a b";\n};\n', ':2: redis.prefix: key prefix has a space, a brace or a non-printable character'],
    ['redis = {\n  sentinel = { nodes = [ "a:1" ]; };\n};\n', ':2: redis.sentinel.master is missing: the name the sentinels monitor'],
    ['redis = {\n  port = 1;\n  port = 2;\n};\n', ':3: duplicate setting name \'port\''],
    ['redis = {\n  host = "x"\n  port = ;\n};\n', ':3: syntax error'],
    ['redis = {\n  host = "unterminated;\n};\n', ':2: unterminated string'],
    ['redis = 5;\n', ':1: redis: expected a group (redis = { ... };)'],
  ];
  for (const [text, where] of bad) {
    const f = conf(text, 'bad.conf');
    assert.throws(() => loadRedisConfig(f), (e) => {
      assert.strictEqual(e.code, 'invalid');
      assert.ok(e.message.startsWith(`${f}${where}`), `${JSON.stringify(text)}: ${e.message}`);
      assert.ok(!e.message.includes('\n'));
      return true;
    });
  }
  assert.throws(() => Client.fromConfig(path.join(dir, 'none.conf')), { code: 'invalid', message: `cannot read ${path.join(dir, 'none.conf')}: No such file or directory` });
  assert.throws(() => Client.fromConfig(conf('', 'empty.conf')), { code: 'invalid', message: `${path.join(dir, 'empty.conf')}: the file is empty` });
});

test('a client from a configuration file and from URLs reaches the server', async () => {
  const redis = await startRedis();
  const q = queueName('conf');
  const f = conf(`redis = {\n  unix_socket = "${redis.sock}";\n  db = 2;\n  prefix = "svc";\n};\n`, 'live.conf');
  const a = Client.fromConfig(f);
  await a.enqueue(q, 't', 'x', { id: 'c:1' });
  await a.close();
  const b = Client.fromUrl(`unix://${redis.sock}?db=2`, { prefix: 'svc' });
  assert.strictEqual((await b.show(q, 'c:1')).state, 'delayed');
  await b.close();
  const other = Client.fromUrl(`unix://${redis.sock}`);
  assert.strictEqual(await other.show(q, 'c:1'), null);
  await other.close();
  await redis.stop();
});

test('URL forms', () => {
  const { parseUrl } = require(path.join(process.env.DELAYQ_NODE_PKG, 'lib', 'url.js'));
  assert.deepStrictEqual(parseUrl('redis://localhost:6380/3'), { host: 'localhost', port: 6380, db: 3 });
  assert.deepStrictEqual(parseUrl('redis://u:p%40ss@h'), { user: 'u', password: 'p@ss', host: 'h', port: 6379 });
  assert.deepStrictEqual(parseUrl('rediss://cache.example:6390'), { host: 'cache.example', port: 6390, tls: { servername: 'cache.example' } });
  assert.deepStrictEqual(parseUrl('unix:///run/redis.sock?db=1'), { path: '/run/redis.sock', db: 1 });
  assert.throws(() => parseUrl('http://x'), { code: 'invalid', message: '"http://x": scheme http: is not redis:, rediss: or unix:' });
  assert.throws(() => parseUrl('redis://h/x'), { code: 'invalid' });
  assert.throws(() => parseUrl('nonsense'), { code: 'invalid' });
});
