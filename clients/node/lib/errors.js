'use strict';
// The error every call rejects with: `code` is the C library's dq_status
// name without DQ_ERR_, lowercased ("invalid", "notfound", ...), and the
// message is libdelayq's one line for the same failure.

const CODES = ['invalid', 'notfound', 'exists', 'running', 'dead', 'stale',
  'too_large', 'connect', 'auth', 'timeout', 'redis'];

class DelayqError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'DelayqError';
    this.code = code;
  }
}

function fail(code, message) {
  return new DelayqError(code, message);
}

module.exports = { DelayqError, CODES, fail };
