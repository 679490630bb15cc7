'use strict';
// index.d.ts against the calls the README shows (types-check.ts), with
// the registry's typescript and @types/node (installed by
// tests/node-client.sh into tests/node-dev); and a wrong call must not
// type-check, so that the check can fail.

const test = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const DEV = process.env.DELAYQ_NODE_DEV || '';
const TSC = path.join(DEV, 'node_modules', 'typescript', 'bin', 'tsc');
const HAVE = DEV && fs.existsSync(TSC) && fs.existsSync(path.join(DEV, 'node_modules', '@types', 'node'));

function tsc(source) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dq-node-ts-'));
  fs.writeFileSync(path.join(dir, 'check.ts'), source);
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, module: 'commonjs', target: 'es2020', lib: ['es2020'],
      types: ['node'], typeRoots: [path.join(DEV, 'node_modules', '@types')],
      paths: { delayq: [path.join(process.env.DELAYQ_NODE_PKG, 'index.d.ts')] },
    },
    files: ['check.ts'],
  }));
  const r = spawnSync(process.execPath, [TSC, '-p', dir], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return r;
}

test('index.d.ts type-checks the README calls under --strict', { skip: !HAVE && 'typescript not installed' }, () => {
  const r = tsc(fs.readFileSync(path.join(__dirname, 'types-check.ts'), 'utf8'));
  assert.strictEqual(r.status, 0, r.stdout + r.stderr);
});

test('a wrong call does not type-check', { skip: !HAVE && 'typescript not installed' }, () => {
  const r = tsc("import { Client } from 'delayq';\n" +
    "void Client.fromUrl('x').enqueue('q', 't', 'p', { priority: 'urgent' });\n");
  assert.notStrictEqual(r.status, 0);
  assert.match(r.stdout, /urgent/);
  const e = tsc("import { Client } from 'delayq';\n" +
    "void Client.fromUrl('x').enqueue('q', 't', 'p', { ttl: 5, onExpire: 'delete' });\n");
  assert.notStrictEqual(e.status, 0);
  assert.match(e.stdout, /delete/);
  const d = tsc("import { Client } from 'delayq';\n" +
    "async function f(): Promise<string> { return Client.fromUrl('x').enqueue('q', 't', 'p', { id: 'i', debounce: 5, detail: true }); }\nvoid f;\n");
  assert.notStrictEqual(d.status, 0);
  assert.match(d.stdout, /Enqueued/);
});
