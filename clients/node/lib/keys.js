'use strict';
// Key names, names' checks and the partition of a job id, as libdelayq's
// src/lib/keys.c has them (docs/protocol.md, "Keys" and "Partitioned
// queues").

const QUEUE_MAX = 128;
const TYPE_MAX = 128;
const ID_MAX = 256;
const PARTITIONS_MAX = 256;
// The protocol version this client writes and reads: the meta field
// `protocol` of P:{Q}:meta, set when a producer first registers the queue.
const PROTOCOL_FIELD = 'protocol';
const PROTOCOL_VERSION = 1;
const SUFFIXES = ['jobs', 'delayed', 'processing', 'dead', 'meta', 'lease'];

// The six keys of a queue's partition, and its wake channel.
function queueKeys(prefix, queue, part, nparts) {
  const tag = nparts > 1 ? `${queue}:${part}` : queue;
  return {
    keys: SUFFIXES.map((s) => `${prefix}:{${tag}}:${s}`),
    wake: `${prefix}:{${tag}}:wake`,
  };
}

// The schedule keys: partition 0's when the queue is partitioned.
function schedKeys(prefix, queue, nparts) {
  const tag = nparts > 1 ? `${queue}:0` : queue;
  return [`${prefix}:{${tag}}:schedules`, `${prefix}:{${tag}}:schedule_due`];
}

function registryKey(prefix) {
  return `${prefix}:queues`;
}

// Printable ASCII without spaces: names appear in keys, logs and tables.
function isPlain(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x20 || c > 0x7e) return false;
  }
  return true;
}

function byteLength(s) {
  return Buffer.byteLength(s, 'utf8');
}

// Each check returns null, or why the name is refused (libdelayq's words).
function checkQueue(queue) {
  if (typeof queue !== 'string' || queue === '') return 'queue name is empty';
  if (byteLength(queue) > QUEUE_MAX) return 'queue name is longer than 128 bytes';
  if (!isPlain(queue)) return 'queue name has a space or a non-printable character';
  if (/[{}]/.test(queue)) return "queue name contains '{' or '}'";
  return null;
}

function checkPrefix(prefix) {
  if (typeof prefix !== 'string' || prefix === '') return 'key prefix is empty';
  if (byteLength(prefix) > 64) return 'key prefix is longer than 64 bytes';
  if (!isPlain(prefix) || /[{}]/.test(prefix)) {
    return 'key prefix has a space, a brace or a non-printable character';
  }
  return null;
}

function checkType(type) {
  if (typeof type !== 'string' || type === '') return 'job type is empty';
  if (byteLength(type) > TYPE_MAX) return 'job type is longer than 128 bytes';
  if (!isPlain(type)) return 'job type has a space or a non-printable character';
  if (type === '*') return "job type '*' is kept for the handler table's fallback";
  return null;
}

function checkId(id) {
  if (typeof id !== 'string' || id === '') return 'job id is empty';
  if (byteLength(id) > ID_MAX) return 'job id is longer than 256 bytes';
  if (!isPlain(id)) return 'job id has a space or a non-printable character';
  if (/^[0-9]+$/.test(id)) return 'job id is all digits (that form is kept for generated ids)';
  // Routed to partition 0 as a schedule's job would be: refused, so that a
  // producer's id always routes by its CRC16.
  if (isScheduleId(id)) {
    return 'job id has the form NAME@2026-01-06T00:00:00Z, kept for the jobs of recurring schedules';
  }
  return null;
}

function checkScheduleName(name) {
  if (typeof name !== 'string' || name === '') return 'schedule name is empty';
  if (byteLength(name) > 128) return 'schedule name is longer than 128 bytes';
  if (!isPlain(name)) return 'schedule name has a space or a non-printable character';
  if (name.includes('@')) {
    return "schedule name contains '@' (it separates the name from the tick in job ids)";
  }
  return null;
}

// NAME@YYYY-MM-DDTHH:MM:SS[.fff]Z or NAME@now-...: a job a schedule made,
// which lives in partition 0 where the schedules fire.
const SCHEDULE_ID = /^[^@]+@(now-)?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$/;

function isScheduleId(id) {
  // keys.c looks at the first '@': the name before it has none.
  const at = id.indexOf('@');
  if (at <= 0) return false;
  return SCHEDULE_ID.test(id);
}

// CRC16 (XMODEM, the Redis Cluster hash) of the bytes of `s`.
const CRC_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let b = 0; b < 8; b++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[i] = crc;
  }
  return t;
})();

function crc16(bytes) {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC_TABLE[((crc >> 8) ^ b) & 0xff];
  return crc;
}

// The partition of a job id in a queue of `nparts` partitions: a
// generated id (digits) is its number mod N, a schedule's job id is 0,
// any other id crc16 of the whole id mod N.
function partitionOf(id, nparts) {
  if (nparts <= 1 || isScheduleId(id)) return 0;
  if (/^[0-9]+$/.test(id)) {
    let r = 0;
    for (let i = 0; i < id.length; i++) r = (r * 10 + (id.charCodeAt(i) - 48)) % nparts;
    return r;
  }
  return crc16(Buffer.from(id, 'utf8')) % nparts;
}

module.exports = {
  QUEUE_MAX, TYPE_MAX, ID_MAX, PARTITIONS_MAX, PROTOCOL_FIELD, PROTOCOL_VERSION, queueKeys, schedKeys, registryKey,
  checkQueue, checkPrefix, checkType, checkId, checkScheduleName, isScheduleId,
  crc16, partitionOf,
};

// The Redis Cluster slot of a key: crc16 of its {hash tag} mod 16384.
function keySlot(key) {
  const b = Buffer.from(key, 'utf8');
  const open = b.indexOf(0x7b);
  if (open >= 0) {
    const close = b.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(b.subarray(open + 1, close)) % 16384;
  }
  return crc16(b) % 16384;
}

module.exports.keySlot = keySlot;
