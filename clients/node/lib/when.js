'use strict';
// Durations and due times as libdelayq and the command line take them:
// a delay in ms or a duration text ("30m", "1h30m", "500ms"), an absolute
// time as a Date or Unix ms, both bounded by 100 years of 365 days; a
// job's expiry, a ttl or a time taken the same ways, its dedupe window,
// and a debounce and its max wait.

const MAX_AHEAD_MS = 3153600000000;
const UNITS = [['ms', 1], ['s', 1000], ['m', 60000], ['h', 3600000], ['d', 86400000]];

// Parse "30m", "1h30m", "90" (seconds) as src/util/timefmt.c does:
// returns ms, or throws an Error with the reason.
function parseDuration(text) {
  if (typeof text !== 'string' || text === '') throw new Error('empty duration');
  let total = 0;
  let parts = 0;
  let s = text;
  while (s.length) {
    const m = /^[0-9]+/.exec(s);
    if (!m) throw new Error('expected a number (durations look like 500ms, 30s, 15m, 2h, 1d)');
    const n = Number(m[0]);
    if (n > MAX_AHEAD_MS) throw new Error('duration is too long (over 100 years)');
    s = s.slice(m[0].length);
    let unit = 0;
    if (!s.length) {
      unit = parts === 0 ? 1000 : 0;
    } else {
      for (const [name, ms] of UNITS) {
        if (s.startsWith(name)) {
          unit = ms;
          s = s.slice(name.length);
          break;
        }
      }
    }
    if (!unit) throw new Error('unknown unit (use ms, s, m, h or d)');
    if (n > (MAX_AHEAD_MS - total) / unit) throw new Error('duration is too long (over 100 years)');
    total += n * unit;
    parts++;
  }
  return total;
}

function isWholeNumber(v) {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

// A delay option as ms, or a string saying why not.
function delayMs(delay) {
  if (delay === undefined || delay === null) return 0;
  if (typeof delay === 'string') {
    try {
      return parseDuration(delay);
    } catch (e) {
      return `delay "${delay}": ${e.message}`;
    }
  }
  if (typeof delay === 'bigint') delay = Number(delay);
  if (!isWholeNumber(delay) || delay < 0 || delay > MAX_AHEAD_MS) {
    return `delay ${delay} ms is not in 0..${MAX_AHEAD_MS} (100 years)`;
  }
  return delay;
}

// An `at` option (Date or Unix ms) as ms, or a string saying why not.
function atMs(at) {
  let ms = at instanceof Date ? at.getTime() : (typeof at === 'bigint' ? Number(at) : at);
  if (!isWholeNumber(ms) || ms < 0 || ms > Date.now() + MAX_AHEAD_MS) {
    return `time ${ms} (Unix ms) is negative or more than 100 years from now`;
  }
  return ms;
}

// A span of 1 ms..100 years named `what` (ms, or a duration text) as ms,
// 0 for none, or a string saying why not.
function spanMs(v, what) {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'string') {
    try {
      return parseDuration(v);
    } catch (e) {
      return `${what} "${v}": ${e.message}`;
    }
  }
  if (typeof v === 'bigint') v = Number(v);
  if (!isWholeNumber(v) || v < 0 || v > MAX_AHEAD_MS) {
    return `${what} ${v} ms is not in 1..${MAX_AHEAD_MS} (100 years)`;
  }
  return v;
}

// A ttl option (after the due time) as ms, 0 for none, or a string
// saying why not.
function ttlMs(ttl) {
  return spanMs(ttl, 'ttl');
}

// A uniqueFor option (the dedupe window) as ms, 0 for none, or a string
// saying why not.
function windowMs(w) {
  return spanMs(w, 'dedupe window');
}

// An expireAt option (Date or Unix ms) as ms, 0 for none, or a string
// saying why not.  (The expiry is after the due time, itself at most 100
// years ahead: 200 years bound it.)
function expireAtMs(at) {
  if (at === undefined || at === null) return 0;
  const ms = at instanceof Date ? at.getTime() : (typeof at === 'bigint' ? Number(at) : at);
  if (!isWholeNumber(ms) || ms < 0 || ms > Date.now() + 2 * MAX_AHEAD_MS) {
    return `expiry ${ms} (Unix ms) is negative or more than 200 years from now`;
  }
  return ms;
}

// A priority option as a level 0..9 (5 normal), or -1.
function priorityLevel(p) {
  if (p === undefined || p === null) return 5;
  if (p === 'high') return 0;
  if (p === 'normal') return 5;
  if (p === 'low') return 9;
  if (typeof p === 'number' && Number.isInteger(p) && p >= 0 && p <= 9) return p;
  if (typeof p === 'string' && /^[0-9]$/.test(p)) return Number(p);
  return -1;
}

module.exports = { MAX_AHEAD_MS, parseDuration, delayMs, atMs, spanMs, ttlMs, windowMs,
  expireAtMs, priorityLevel };
