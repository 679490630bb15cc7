"""One enqueue request, checked before anything is sent exactly as
libdelayq's check_request does (the same order, the same messages)."""
import time
from datetime import datetime, timedelta

from . import keys
from .errors import InvalidError, TooLargeError

PRIORITIES = {"high": 0, "normal": 5, "low": 9}


def payload_bytes(payload):
    if payload is None:
        return b""
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise InvalidError("payload is a %s, not bytes or str" % type(payload).__name__)


def _ms_of_delay(delay, what="delay"):
    if isinstance(delay, timedelta):
        return delay // timedelta(milliseconds=1)
    if isinstance(delay, bool) or not isinstance(delay, int):
        raise InvalidError("%s %r is not a timedelta or whole milliseconds" % (what, delay))
    return delay


def _ms_of_time(at, what="time"):
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise InvalidError("%s %s has no time zone (give tzinfo, e.g. timezone.utc)"
                               % (what, at.isoformat()))
        return int(at.timestamp() * 1000)
    if isinstance(at, bool) or not isinstance(at, int):
        raise InvalidError("%s %r is not a datetime or Unix milliseconds" % (what, at))
    return at


def _priority(p):
    if p is None:
        return 5
    if isinstance(p, str) and p in PRIORITIES:
        return PRIORITIES[p]
    if isinstance(p, str) and len(p) == 1 and p.isdigit():
        return int(p)
    if isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 9:
        return p
    raise InvalidError('priority %r is not 0..9, "high", "normal" or "low"' % (p,))


def _local_now_ms():
    return int(time.time() * 1000)


class Request:
    """One enqueue request, checked as libdelayq's check_request does."""

    def __init__(self, c, queue, type, payload, delay, at, id, replace, priority,
                 max_attempts, expire_at=None, ttl=None, on_expire="dead", unique_for=None,
                 unique_ok=False):
        keys.check_type(type)
        self.type = keys.to_bytes(type)
        self.id = keys.check_id(id) if id not in (None, "", b"") else ""
        self.payload = payload_bytes(payload)
        if len(self.payload) > c.max_payload:
            raise TooLargeError("payload is %d bytes, over the limit of %d"
                                % (len(self.payload), c.max_payload))
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise InvalidError("max attempts %r is not a whole number" % (max_attempts,))
        if max_attempts < 0:
            raise InvalidError("max attempts is negative")
        if max_attempts > keys.MAX_ATTEMPTS:
            raise InvalidError("max attempts %d is over %d" % (max_attempts, keys.MAX_ATTEMPTS))
        self.max_attempts = max_attempts
        self.priority = _priority(priority)
        self.replace = bool(replace)
        if delay is not None and at is not None:
            raise InvalidError("give a delay or a time (at), not both")
        self.at = None
        self.delay = 0
        if at is not None:
            self.at = _ms_of_time(at)
            if self.at < 0 or self.at > _local_now_ms() + keys.MAX_AHEAD_MS:
                raise InvalidError("time %d (Unix ms) is negative or more than 100 years "
                                   "from now" % self.at)
        elif delay is not None:
            self.delay = _ms_of_delay(delay)
            if self.delay < 0 or self.delay > keys.MAX_AHEAD_MS:
                raise InvalidError("delay %d ms is not in 0..%d (100 years)"
                                   % (self.delay, keys.MAX_AHEAD_MS))
        self._expiry(expire_at, ttl, on_expire, unique_for, unique_ok)

    def _expiry(self, expire_at, ttl, on_expire, unique_for, unique_ok):
        """The job's expiry and dedupe window, checked as libdelayq's
        check_expiry does (the script checks the expiry again against the
        due time on the server's clock): self.expire_at (Unix ms) or
        self.ttl (ms after the due time), 0 when not given, and
        self.on_expire; self.unique_for (ms, 0: none) and self.unique_ok."""
        if expire_at is not None and ttl is not None:
            raise InvalidError("give an expiry time (expire_at) or a ttl, not both")
        if on_expire not in ("dead", "drop"):
            raise InvalidError('on_expire %r is not "dead" or "drop"' % (on_expire,))
        self.on_expire = on_expire
        self.ttl = _ms_of_delay(ttl, "ttl") if ttl is not None else 0
        if self.ttl < 0 or self.ttl > keys.MAX_AHEAD_MS:
            raise InvalidError("ttl %d ms is not in 1..%d (100 years)"
                               % (self.ttl, keys.MAX_AHEAD_MS))
        self.expire_at = _ms_of_time(expire_at, "expiry") if expire_at is not None else 0
        if self.expire_at < 0 or self.expire_at > _local_now_ms() + 2 * keys.MAX_AHEAD_MS:
            raise InvalidError("expiry %d (Unix ms) is negative or more than 200 years "
                               "from now" % self.expire_at)
        self.unique_for = (_ms_of_delay(unique_for, "dedupe window")
                           if unique_for is not None else 0)
        if self.unique_for < 0 or self.unique_for > keys.MAX_AHEAD_MS:
            raise InvalidError("dedupe window %d ms is not in 1..%d (100 years)"
                               % (self.unique_for, keys.MAX_AHEAD_MS))
        if self.unique_for > 0 and not self.id:
            raise InvalidError("a dedupe window needs the job's id")
        self.unique_ok = bool(unique_ok)
        if self.unique_ok and self.unique_for == 0:
            raise InvalidError("unique_ok needs a dedupe window (unique_for)")
        if self.expire_at > 0 and self.at is not None and self.expire_at <= self.at:
            raise InvalidError("expiry %d (Unix ms) is not after the due time %d"
                               % (self.expire_at, self.at))

    def expiry(self):
        """The scripts' expiry: a Unix time in ms, "+" and ms after the due
        time, or None for a job that never expires."""
        if self.expire_at > 0:
            return "%d" % self.expire_at
        if self.ttl > 0:
            return "+%d" % self.ttl
        return None

    def when(self):
        """enqueue_many's when: r to replace, @ for a time, /L for a level,
        > and the expiry (! after it to drop the job then), ~ and the
        dedupe window (? after it for unique_ok)."""
        s = ("r" if self.replace else "") + ("@%d" % self.at if self.at is not None
                                              else "%d" % self.delay)
        s += "/%d" % self.priority if self.priority != 5 else ""
        x = self.expiry()
        if x is not None:
            s += ">" + x + ("!" if self.on_expire == "drop" else "")
        if self.unique_for > 0:
            s += "~%d" % self.unique_for + ("?" if self.unique_ok else "")
        return s

    def body_head(self):
        """The record body's start: array of 6, type, payload, max_attempts."""
        from .msgpack import array_head, str_head, uint
        return (array_head(6) + str_head(len(self.type)) + self.type
                + str_head(len(self.payload)) + self.payload + uint(self.max_attempts))
