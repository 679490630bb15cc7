'use strict';
// The error every call rejects with: `code` is the C library's dq_status
// name without DQ_ERR_, lowercased ("invalid", "notfound", ...), and the
// message is libdelayq's one line for the same failure.

const CODES = ['invalid', 'notfound', 'exists', 'unique', 'running', 'dead', 'stale',
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

// An enqueue refused because the job of that id finished within its
// dedupe window: code "unique", with when it finished and when the window
// ends (Unix ms, server clock), null when the reply does not say
// (enqueue_many's); cancelled when what keeps the id is a job of that id
// cancelled while it ran (finishedMs the cancel, untilMs the end of that
// run's lease, or of its window if later).
function uniqueError(req, finishedMs = null, untilMs = null, cancelled = false) {
  const e = fail('unique', `job ${req.id} in queue ${req.queue} finished within its dedupe window`);
  e.finishedMs = finishedMs;
  e.untilMs = untilMs;
  e.cancelled = cancelled;
  return e;
}

module.exports = { DelayqError, CODES, fail, uniqueError };
