'use strict';
// A strict reader of libconfig syntax (the format of delayqd.conf), enough
// for the whole file: settings `name = value;` (or `:`, and `,` or no
// terminator), groups { }, arrays [ ], lists ( ), strings with escapes
// (adjacent strings joined), integers (decimal, hex, L suffix), floats,
// booleans, comments (#, //, /* */) and @include "file".  Every value
// keeps the FILE:LINE it was written at, for messages.

const fs = require('fs');
const path = require('path');

class ConfigSyntaxError extends Error {}

function tokenize(text, file) {
  const toks = [];
  let i = 0;
  let line = 1;
  const err = (msg) => new ConfigSyntaxError(`${file}:${line}: ${msg}`);
  while (i < text.length) {
    const c = text[i];
    if (c === '\n') { line++; i++; continue; }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\f') { i++; continue; }
    if (c === '#' || (c === '/' && text[i + 1] === '/')) {
      while (i < text.length && text[i] !== '\n') i++;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) throw err('unterminated comment');
      for (let k = i; k < end; k++) if (text[k] === '\n') line++;
      i = end + 2;
      continue;
    }
    if (c === '"') {
      let s = '';
      i++;
      for (;;) {
        if (i >= text.length || text[i] === '\n') throw err('unterminated string');
        const d = text[i];
        if (d === '"') { i++; break; }
        if (d === '\\') {
          const e = text[i + 1];
          const map = { '\\': '\\', '"': '"', n: '\n', r: '\r', t: '\t', f: '\f' };
          if (e in map) { s += map[e]; i += 2; continue; }
          if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(text.slice(i + 2, i + 4))) {
            s += String.fromCharCode(parseInt(text.slice(i + 2, i + 4), 16));
            i += 4;
            continue;
          }
          throw err(`bad escape \\${e} in a string`);
        }
        s += d;
        i++;
      }
      const prev = toks[toks.length - 1];
      if (prev && prev.t === 'str' && prev.joinable) prev.v += s;
      else toks.push({ t: 'str', v: s, line, joinable: true });
      continue;
    }
    if ('={}[](),;:'.includes(c)) { toks.push({ t: c, line }); i++; continue; }
    const m = /^(@include|[A-Za-z*][-A-Za-z0-9_*]*|[-+]?(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)L{0,2})/.exec(text.slice(i));
    if (!m) throw err(`syntax error near '${text.slice(i, i + 10).split('\n')[0]}'`);
    toks.push({ t: 'word', v: m[0], line });
    i += m[0].length;
  }
  for (const t of toks) delete t.joinable;
  return toks;
}

// Parse `file` into a group: { type: 'group', line, file, members: [{name,
// value}] } where a value is { type, value | members | items, line, file }.
function parseFile(file, depth = 0) {
  if (depth > 10) throw new ConfigSyntaxError(`${file}: @include nested too deep`);
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigSyntaxError(`cannot read ${file}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`);
  }
  if (text.length === 0) throw new ConfigSyntaxError(`${file}: the file is empty`);
  const toks = tokenize(text, file);
  let p = 0;
  const err = (msg, t) => new ConfigSyntaxError(`${file}:${t ? t.line : (toks.length ? toks[toks.length - 1].line : 1)}: ${msg}`);
  const peek = () => toks[p];

  function scalar(t) {
    if (t.t === 'str') return { type: 'string', value: t.v, line: t.line, file };
    if (t.t !== 'word') throw err(`syntax error: unexpected '${t.t}'`, t);
    const w = t.v;
    if (/^(true|false)$/i.test(w)) return { type: 'bool', value: /^true$/i.test(w), line: t.line, file };
    const num = w.replace(/L+$/, '');
    if (/^[-+]?0[xX][0-9a-fA-F]+$/.test(num)) return { type: 'int', value: Number(BigInt(num.replace(/^\+/, ''))), line: t.line, file };
    if (/^[-+]?[0-9]+$/.test(num)) return { type: 'int', value: Number(num), line: t.line, file };
    if (/^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/.test(num)) return { type: 'float', value: Number(num), line: t.line, file };
    throw err(`syntax error near '${w}'`, t);
  }

  function value() {
    const t = toks[p++];
    if (!t) throw err('syntax error: a value is missing');
    if (t.t === '{') return group(t, '}');
    if (t.t === '[' || t.t === '(') {
      const close = t.t === '[' ? ']' : ')';
      const items = [];
      while (peek() && peek().t !== close) {
        items.push(value());
        if (peek() && peek().t === ',') p++;
        else break;
      }
      const e = toks[p++];
      if (!e || e.t !== close) throw err(`syntax error: expected '${close}'`, e || t);
      return { type: close === ']' ? 'array' : 'list', items, line: t.line, file };
    }
    return scalar(t);
  }

  function group(open, close) {
    const g = { type: 'group', members: [], line: open ? open.line : 1, file };
    while (peek() && peek().t !== close) {
      const t = toks[p++];
      if (t.t === 'word' && t.v === '@include') {
        const f = toks[p++];
        if (!f || f.t !== 'str') throw err('@include needs a file name in quotes', t);
        const inc = parseFile(path.resolve(path.dirname(file), f.v), depth + 1);
        g.members.push(...inc.members);
        continue;
      }
      if (t.t !== 'word' || !/^[A-Za-z*]/.test(t.v)) throw err(`syntax error: expected a setting name, not '${t.v || t.t}'`, t);
      const eq = toks[p++];
      if (!eq || (eq.t !== '=' && eq.t !== ':')) throw err(`syntax error: expected '=' after ${t.v}`, eq || t);
      if (g.members.some((m) => m.name === t.v)) throw err(`duplicate setting name '${t.v}'`, t);
      const v = value();
      g.members.push({ name: t.v, value: v, line: t.line });
      if (peek() && (peek().t === ';' || peek().t === ',')) p++;
    }
    if (close) {
      const e = toks[p++];
      if (!e) throw err(`syntax error: expected '${close}' before the end of the file`);
    }
    return g;
  }

  const root = group(null, undefined);
  if (p < toks.length) throw err(`syntax error near '${toks[p].v || toks[p].t}'`, toks[p]);
  return root;
}

function member(group, name) {
  const m = group.members.find((x) => x.name === name);
  return m ? m.value : undefined;
}

module.exports = { parseFile, member, ConfigSyntaxError };
