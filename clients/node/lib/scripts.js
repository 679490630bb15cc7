'use strict';
// The scripts, as the build generated them from src/scripts (prelude
// included) and placed them in this package's scripts/ directory: the
// same bytes libdelayq embeds, never a copy kept by hand.  Each is run by
// its SHA1 (EVALSHA) and loaded again on NOSCRIPT.

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const DIR = path.join(__dirname, '..', 'scripts');
const READ_ONLY = '#!lua flags=no-writes';

// name -> { name, text (Buffer), sha, writes }.  Read once, at first use.
let table = null;

function load() {
  if (table) return table;
  let names;
  try {
    names = fs.readdirSync(DIR).filter((f) => f.endsWith('.lua'));
  } catch (e) {
    throw new Error(`delayq: the package has no scripts (${DIR}: ${e.code}); ` +
      'build it with "make node-pack"');
  }
  table = new Map();
  for (const f of names) {
    const text = fs.readFileSync(path.join(DIR, f));
    const name = f.slice(0, -4);
    table.set(name, {
      name,
      text,
      sha: crypto.createHash('sha1').update(text).digest('hex'),
      writes: !text.subarray(0, READ_ONLY.length).equals(Buffer.from(READ_ONLY)),
    });
  }
  return table;
}

function script(name) {
  const s = load().get(name);
  if (!s) throw new Error(`delayq: the package has no ${name} script (${DIR})`);
  return s;
}

module.exports = { script, scripts: () => load(), DIR };
