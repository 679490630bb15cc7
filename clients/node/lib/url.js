'use strict';
// Client.fromUrl: redis://[user:password@]host[:port][/db],
// rediss://... (TLS), unix:///path/to/socket[?db=N]; "password" and "db"
// may also come as query parameters.

const { fail } = require('./errors');

function parseUrl(text) {
  let u;
  try {
    u = new URL(text);
  } catch (_) {
    throw fail('invalid', `"${text}" is not a URL (redis://HOST:PORT/DB, rediss://..., unix:///PATH)`);
  }
  const o = {};
  const q = u.searchParams;
  if (u.username) o.user = decodeURIComponent(u.username);
  if (u.password) o.password = decodeURIComponent(u.password);
  if (q.get('password')) o.password = q.get('password');
  if (q.get('user')) o.user = q.get('user');
  let db = q.get('db');
  if (u.protocol === 'unix:') {
    o.path = decodeURIComponent(u.pathname || u.host);
    if (!o.path) throw fail('invalid', `"${text}": no socket path (unix:///PATH)`);
  } else if (u.protocol === 'redis:' || u.protocol === 'rediss:') {
    o.host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
    o.port = u.port ? Number(u.port) : 6379;
    if (u.pathname && u.pathname !== '/') db = u.pathname.slice(1);
    if (u.protocol === 'rediss:') o.tls = { servername: o.host };
  } else {
    throw fail('invalid', `"${text}": scheme ${u.protocol} is not redis:, rediss: or unix:`);
  }
  if (db !== null && db !== undefined && db !== '') {
    if (!/^[0-9]+$/.test(db)) throw fail('invalid', `"${text}": database "${db}" is not a number`);
    o.db = Number(db);
  }
  if (o.user && !o.password) throw fail('invalid', `"${text}": a user needs a password`);
  return o;
}

module.exports = { parseUrl };
