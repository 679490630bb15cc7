'use strict';
// Recurring schedules' expressions and their first tick, as
// src/util/cron.c computes them (five-field cron in the wall time of an
// IANA zone, Vixie cron's day rule, each wall time once across
// daylight-saving changes; "@every" in real time).  Zones come from the
// ICU data of Node (Intl), where cron.c reads the system's tzdata.

const { parseDuration } = require('./when');

const SEARCH_DAYS = 8 * 366;
const MINUTE = 60000;
const FIELDS = [
  { name: 'minute', lo: 0, hi: 59 },
  { name: 'hour', lo: 0, hi: 23 },
  { name: 'day-of-month', lo: 1, hi: 31 },
  { name: 'month', lo: 1, hi: 12, names: ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'] },
  { name: 'day-of-week', lo: 0, hi: 7, names: ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] },
];
const MACROS = {
  '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0', '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
};

function readValue(s, f) {
  const m = /^[0-9]+/.exec(s);
  if (m) {
    const n = Number(m[0]);
    if (m[0].length > 4 || n < f.lo || n > f.hi) throw new Error(`${m[0]} is not in ${f.lo}..${f.hi}`);
    return [n, s.slice(m[0].length)];
  }
  for (let i = 0; f.names && i < f.names.length; i++) {
    if (s.slice(0, 3).toLowerCase() === f.names[i] && !/^[a-zA-Z]/.test(s.slice(3))) return [f.lo + i, s.slice(3)];
  }
  throw new Error(`expected ${f.names ? 'a number or a name' : 'a number'}`);
}

function parseItem(item, f, bits) {
  let lo = f.lo;
  let hi = f.hi;
  let step = 1;
  let single = false;
  let s = item;
  if (s[0] === '*') {
    s = s.slice(1);
  } else {
    single = true;
    [lo, s] = readValue(s, f);
    hi = lo;
    if (s[0] === '-') {
      single = false;
      [hi, s] = readValue(s.slice(1), f);
      if (hi < lo) throw new Error(`range ${lo}-${hi} runs backwards`);
    }
  }
  if (s[0] === '/') {
    if (single) hi = f.hi;
    const t = s.slice(1);
    const m = /^-?[0-9]+/.exec(t);
    const n = m ? Number(m[0]) : NaN;
    if (!m || m[0].length !== t.length || n < 1 || n > f.hi) {
      throw new Error(`step "${t}" is not a whole number in 1..${f.hi}`);
    }
    step = n;
    s = '';
  }
  if (s !== '') throw new Error(`unexpected "${s}"`);
  for (let v = lo; v <= hi; v += step) bits.add(v);
}

// Parse `expr`: { everyMs } or { sets, mdayStar, wdayStar }.  Throws an
// Error naming the field and the reason.
function parse(expr) {
  if (typeof expr !== 'string' || Buffer.byteLength(expr) > 256) {
    throw new Error('expression is missing or longer than 256 bytes');
  }
  const s = expr.replace(/^[ \t]+/, '');
  if (s[0] === '@') {
    if (/^@every[ \t]/.test(s)) {
      const d = s.slice(6).replace(/^[ \t]+/, '');
      let ms;
      try {
        ms = parseDuration(d);
      } catch (e) {
        throw new Error(`@every "${d}": ${e.message}`);
      }
      if (ms < 1000 || ms % 1000) throw new Error(`@every "${d}": the interval must be whole seconds, at least 1s`);
      return { everyMs: ms };
    }
    if (MACROS[s]) return parse(MACROS[s]);
    throw new Error(`"${s}" is not one of @every DURATION, @hourly, @daily, @weekly, @monthly, @yearly`);
  }
  const parts = s.split(/[ \t]+/).filter((p) => p !== '');
  if (parts.length !== 5) {
    throw new Error('expected 5 fields (minute hour day-of-month month day-of-week), got ' +
      `${parts.length > 5 ? 'more than 5' : parts.length}`);
  }
  const sets = parts.map((p, i) => {
    const bits = new Set();
    try {
      for (const item of p.split(',')) {
        if (item === '') throw new Error('empty list item');
        parseItem(item, FIELDS[i], bits);
      }
    } catch (e) {
      throw new Error(`field ${i + 1} (${FIELDS[i].name}) "${p}": ${e.message}`);
    }
    return bits;
  });
  if (sets[4].has(7)) sets[4].add(0);
  return { sets, mdayStar: parts[2][0] === '*', wdayStar: parts[4][0] === '*' };
}

const formats = new Map();

// Throws when `tz` is not a zone Intl knows.
function checkZone(tz) {
  if (!tz || tz === 'UTC') return;
  if (Buffer.byteLength(tz) > 64 || tz[0] === '/' || tz.includes('..') || /[ \t:,]/.test(tz)) {
    throw new Error(`time zone "${tz.slice(0, 64)}" is not an IANA zone name (as Europe/Berlin)`);
  }
  try {
    formatOf(tz);
  } catch (_) {
    throw new Error(`time zone "${tz}" is not in this Node's time zone data`);
  }
}

function formatOf(tz) {
  if (!formats.has(tz)) {
    formats.set(tz, new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric',
      hour: 'numeric', minute: 'numeric',
    }));
  }
  return formats.get(tz);
}

// The wall minute of instant `t` (ms) in `tz`, as minutes since the epoch
// of the wall clock.
function wallKey(t, tz) {
  if (!tz || tz === 'UTC') return Math.floor(t / MINUTE);
  const p = {};
  for (const x of formatOf(tz).formatToParts(new Date(t))) p[x.type] = x.value;
  return Math.floor(Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute)) / MINUTE);
}

// The instant of wall minute `want` in `tz`: its first occurrence, or
// when the clocks skip it the first minute after the jump.
function wallToTime(want, tz) {
  const w = want * MINUTE;
  if (!tz || tz === 'UTC') return w;
  let best = -1;
  for (const probe of [w - 86400000, w, w + 86400000]) {
    const off = wallKey(probe, tz) * MINUTE - Math.floor(probe / MINUTE) * MINUTE;
    const t = w - off;
    if (wallKey(t, tz) === want && (best < 0 || t < best)) best = t;
  }
  if (best >= 0) return best;
  let t = w - (wallKey(w - 86400000, tz) * MINUTE - Math.floor((w - 86400000) / MINUTE) * MINUTE);
  for (let i = 0; i < 2880 && wallKey(t, tz) < want; i++) t += MINUTE;
  for (let i = 0; i < 2880 && wallKey(t - MINUTE, tz) > want; i++) t -= MINUTE;
  return t;
}

function dayMatches(e, d) {
  const date = new Date(d * 86400000);
  if (!e.sets[3].has(date.getUTCMonth() + 1)) return false;
  const dom = e.sets[2].has(date.getUTCDate());
  const dow = e.sets[4].has(date.getUTCDay());
  if (!e.mdayStar && !e.wdayStar) return dom || dow;
  return dom && dow;
}

// The first fire time strictly after `afterMs` in `tz`; -1 when nothing
// fires in the next eight years.
function next(e, tz, afterMs) {
  if (e.everyMs) return afterMs + e.everyMs;
  const start = Math.floor(afterMs / MINUTE) * MINUTE + MINUTE;
  const from = wallKey(start, tz);
  const day0 = Math.floor(from / 1440);
  for (let d = day0; d < day0 + SEARCH_DAYS; d++) {
    if (!dayMatches(e, d)) continue;
    for (let h = d === day0 ? Math.floor((from % 1440) / 60) : 0; h < 24; h++) {
      if (!e.sets[1].has(h)) continue;
      const first = d === day0 && h === Math.floor((from % 1440) / 60) ? from % 60 : 0;
      for (let mi = first; mi < 60; mi++) {
        if (!e.sets[0].has(mi)) continue;
        const t = wallToTime(d * 1440 + h * 60 + mi, tz);
        if (t >= start) return t;
      }
    }
  }
  return -1;
}

// The first tick of a new schedule at server time `nowMs`.
function firstTick(e, tz, nowMs) {
  if (e.everyMs) return nowMs - (nowMs % 1000) + e.everyMs;
  return next(e, tz, nowMs);
}

module.exports = { parse, checkZone, next, firstTick };
