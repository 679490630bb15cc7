'use strict';
// The little MessagePack enqueue_many needs: the head of a record body
// (an array of 6, type and payload as str, max_attempts as uint), as
// libdelayq's push_body_head writes it; and the reading of a stored record
// that show's raw form gives.

function strHead(n) {
  if (n < 32) return Buffer.from([0xa0 | n]);
  if (n < 0x100) return Buffer.from([0xd9, n]);
  if (n < 0x10000) return Buffer.from([0xda, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xdb;
  b.writeUInt32BE(n, 1);
  return b;
}

function uint(v) {
  if (v < 128) return Buffer.from([v]);
  if (v < 0x100) return Buffer.from([0xcc, v]);
  if (v < 0x10000) return Buffer.from([0xcd, v >> 8, v & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = 0xce;
  b.writeUInt32BE(v, 1);
  return b;
}

// [type, payload, max_attempts] under an array header of 6: the script
// appends created_ms, due_offset_ms and last_error.
function bodyHead(type, payload, maxAttempts) {
  const t = Buffer.from(type, 'utf8');
  return Buffer.concat([Buffer.from([0x96]), strHead(t.length), t,
    strHead(payload.length), payload, uint(maxAttempts)]);
}

const MAX_EXACT = 2 ** 53 - 1;   // what the scripts' numbers (doubles) hold exactly
const MAX_ATTEMPTS = 2 ** 31 - 1;

// Reads values from a Buffer; any value not as asked throws.
class Reader {
  constructor(buf) { this.buf = buf; this.at = 0; }

  take(n) {
    if (n > this.buf.length - this.at) throw new Error('truncated');
    const b = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }

  tag() { return this.take(1)[0]; }

  // A str (never a bin: the scripts cannot read one).
  str() {
    const t = this.tag();
    let n;
    if ((t & 0xe0) === 0xa0) n = t & 0x1f;
    else if (t === 0xd9) n = this.take(1)[0];
    else if (t === 0xda) n = this.take(2).readUInt16BE(0);
    else if (t === 0xdb) n = this.take(4).readUInt32BE(0);
    else throw new Error('not a str');
    return this.take(n);
  }

  // An integer the scripts hold exactly (a whole double too).
  int() {
    const t = this.tag();
    let v;
    if (t <= 0x7f) return t;
    if (t >= 0xe0) return t - 256;
    switch (t) {
      case 0xcc: v = this.take(1)[0]; break;
      case 0xcd: v = this.take(2).readUInt16BE(0); break;
      case 0xce: v = this.take(4).readUInt32BE(0); break;
      case 0xcf: v = this.take(8).readBigUInt64BE(0); break;
      case 0xd0: v = this.take(1).readInt8(0); break;
      case 0xd1: v = this.take(2).readInt16BE(0); break;
      case 0xd2: v = this.take(4).readInt32BE(0); break;
      case 0xd3: v = this.take(8).readBigInt64BE(0); break;
      case 0xca: v = this.take(4).readFloatBE(0); break;
      case 0xcb: v = this.take(8).readDoubleBE(0); break;
      default: throw new Error('not an integer');
    }
    if (typeof v === 'bigint') {
      if (v > BigInt(MAX_EXACT) || v < -BigInt(MAX_EXACT)) throw new Error('out of range');
      return Number(v);
    }
    if (!Number.isInteger(v) || Math.abs(v) > MAX_EXACT) throw new Error('not a whole number');
    return v;
  }
}

// A stored record ("3:<attempts>:" and its MessagePack body, a Buffer) by
// the scripts' rules (read_record in lib.lua) or stricter:
// {attempts, type, payload, max, created, due, err, prio}, or null when it
// does not read so, and then the script's own answer is to be asked for.
function readRecord(raw) {
  const end = raw.indexOf(0x3a, 2);     // the ':' after the attempts
  if (raw.length < 4 || raw[0] !== 0x33 || raw[1] !== 0x3a || end < 3 || end > 12) return null;
  const digits = raw.toString('latin1', 2, end);
  if (!/^[0-9]+$/.test(digits) || Number(digits) > MAX_ATTEMPTS) return null;
  try {
    const r = new Reader(raw.subarray(end + 1));
    const n = r.tag();
    if (n !== 0x96 && n !== 0x97) return null;
    const type = r.str(), payload = r.str(), max = r.int(), created = r.int(), offset = r.int();
    if (max < 0 || max > MAX_ATTEMPTS || Math.abs(created + offset) > MAX_EXACT) return null;
    let err = Buffer.alloc(0);
    if (r.buf[r.at] === 0xc0) r.at += 1;
    else err = r.str();
    let prio = 5;
    if (n === 0x97) {
      prio = r.int();
      if (prio < 0 || prio > 9) return null;
    }
    if (r.at !== r.buf.length) return null;
    return { attempts: Number(digits), type, payload: Buffer.from(payload), max, created,
      due: created + offset, err, prio };
  } catch (e) {
    return null;
  }
}

module.exports = { bodyHead, readRecord };
