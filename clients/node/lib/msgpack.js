'use strict';
// The little MessagePack enqueue_many needs: the head of a record body
// (an array of 6, type and payload as str, max_attempts as uint), as
// libdelayq's push_body_head writes it.

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

module.exports = { bodyHead };
