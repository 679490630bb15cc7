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


def _span_ms(v, what):
    """A span of 1 ms..100 years named `what` (a timedelta or ms) as ms,
    0 when not given (None or 0)."""
    ms = _ms_of_delay(v, what) if v is not None else 0
    if ms < 0 or ms > keys.MAX_AHEAD_MS:
        raise InvalidError("%s %d ms is not in 1..%d (100 years)"
                           % (what, ms, keys.MAX_AHEAD_MS))
    return ms


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
                 unique_ok=False, debounce=None, max_wait=None):
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
        # libdelayq's check_expiry, in its order.
        self._expiry(expire_at, ttl, on_expire)
        self._window(unique_for)
        self._debounce(debounce, max_wait)
        self.unique_ok = bool(unique_ok)
        if self.unique_ok and self.unique_for == 0:
            raise InvalidError("unique_ok needs a dedupe window (unique_for)")
        # The due time on this host's clock: the script checks it again on
        # the server's, but a refusal there fails a whole enqueue_many call.
        due = self.at if self.at is not None else _local_now_ms() + self.delay
        if self.expire_at > 0 and self.expire_at <= due:
            raise InvalidError("expiry %d (Unix ms) is not after the due time %d"
                               % (self.expire_at, due))

    def _expiry(self, expire_at, ttl, on_expire):
        """The job's expiry: self.expire_at (Unix ms) or self.ttl (ms after
        the due time), 0 when not given, and self.on_expire."""
        if expire_at is not None and ttl is not None:
            raise InvalidError("give an expiry time (expire_at) or a ttl, not both")
        if on_expire not in ("dead", "drop"):
            raise InvalidError('on_expire %r is not "dead" or "drop"' % (on_expire,))
        self.on_expire = on_expire
        self.ttl = _span_ms(ttl, "ttl")
        self.expire_at = _ms_of_time(expire_at, "expiry") if expire_at is not None else 0
        if self.expire_at < 0 or self.expire_at > _local_now_ms() + 2 * keys.MAX_AHEAD_MS:
            raise InvalidError("expiry %d (Unix ms) is negative or more than 200 years "
                               "from now" % self.expire_at)

    def _window(self, unique_for):
        """The dedupe window: self.unique_for (ms, 0: none), with an id."""
        self.unique_for = _span_ms(unique_for, "dedupe window")
        if self.unique_for > 0 and not self.id:
            raise InvalidError("a dedupe window needs the job's id")

    def _debounce(self, debounce, max_wait):
        """A debounced add: self.debounce and self.max_wait (ms, 0: none).
        It needs an id and goes alone (its due time is the debounce's)."""
        self.debounce = _span_ms(debounce, "debounce")
        self.max_wait = _span_ms(max_wait, "max wait")
        if self.max_wait > 0 and self.debounce == 0:
            raise InvalidError("a max wait needs a debounce")
        if self.debounce > 0 and not self.id:
            raise InvalidError("a debounce needs the job's id")
        if self.debounce > 0 and (self.delay or self.at is not None or self.replace
                                  or self.expire_at or self.ttl or self.unique_for):
            raise InvalidError("a debounce goes alone: no delay, time, replace, expiry or "
                               "dedupe window")

    def expiry(self):
        """The scripts' expiry: a Unix time in ms, "+" and ms after the due
        time, or None for a job that never expires."""
        if self.expire_at > 0:
            return "%d" % self.expire_at
        if self.ttl > 0:
            return "+%d" % self.ttl
        return None

    def args(self, wake, n, part):
        """enqueue's ARGV for partition `part` of `n`.  As libdelayq: the
        optional arguments only when needed, so that a plain call is as
        before priorities, expiries, windows and debounce; each needs the
        ones before it (the priority, the partition pair, 1 and 0 when
        unpartitioned, "" and "dead" for no expiry, "" and "0" for no
        window).  A debounced job is due debounce ms from now, which the
        script checks against the delay."""
        a = [wake, self.id, self.type, self.payload, "at" if self.at is not None else "delay",
             self.debounce or (self.at if self.at is not None else self.delay),
             self.max_attempts, "1" if self.replace else "0"]
        expiry = self.expiry()
        tail = expiry is not None or self.unique_for > 0 or self.debounce > 0
        if self.priority != 5 or n > 1 or tail:
            a.append(self.priority)
        if n > 1 or tail:
            a += [n, part]
        if tail:
            a += [expiry or "", self.on_expire]
        if self.unique_for > 0 or self.debounce > 0:
            a += [self.unique_for or "", "1" if self.unique_ok else "0"]
        if self.debounce > 0:
            a.append(self.debounce)
            if self.max_wait > 0:
                a.append(self.max_wait)
        return a

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
