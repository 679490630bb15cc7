"""Recurring schedules: add, list, remove, pause, resume, run now (as
libdelayq's ops_sched.c).  A mixin of Client: it uses the client's
plumbing."""
from datetime import datetime, timezone

from . import cron, keys
from .errors import (Error, ExistsError, InvalidError, NotFoundError, RedisError,
                     TooLargeError)
from .jobs import Schedule
from .request import payload_bytes

CATCH_UP = ("one", "all", "none")
RESUME_TRIES = 5   # reads of a definition replaced under a resume, as libdelayq


def _text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)


class Schedules:
    """Client's schedule calls."""

    def _sched_keys(self, queue):
        n = self._nparts(queue)
        queue = keys.check_queue(queue)
        ks, wake = self._keys(queue, 0, n)
        return ks + keys.sched_keys(self.prefix, queue, n), wake

    def schedule_add(self, queue, name, type, expr, payload=b"", *, tz=None,
                     max_attempts=0, catch_up="one", replace=False) -> int:
        """Store a recurring schedule; returns its first tick (Unix ms),
        or -1 when it stays paused (a paused schedule replaced keeps its
        pause: schedule_resume gives its next tick).  expr: five-field
        cron, "@every 90s", "@daily", ...; tz: an IANA zone (None: UTC).
        ExistsError when the name is taken and replace is false."""
        queue = keys.check_queue(queue)
        keys.check_schedule_name(name)
        keys.check_type(type)
        e = cron.parse(expr)
        cron.check_zone(tz)
        data = payload_bytes(payload)
        if len(data) > self.max_payload:
            raise TooLargeError("payload is %d bytes, over the limit of %d"
                                % (len(data), self.max_payload))
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) \
                or max_attempts < 0:
            raise InvalidError("max attempts is negative")
        if catch_up not in CATCH_UP:
            raise InvalidError("catch-up policy %r is not one, all or none" % (catch_up,))
        ks, _ = self._sched_keys(queue)
        now = self.server_time_ms()
        nxt = cron.first_tick(e, tz, now)
        if nxt < 0:
            raise InvalidError('expression "%s" fires at no time in the next eight years'
                               % expr)
        self._register(queue)
        r = self._run("sched_add", ks, [name, expr, tz or "", type, data, max_attempts,
                                        catch_up, nxt, 1 if replace else 0])
        if _text(r[0]) == "exists":
            raise ExistsError("schedule %s already exists in queue %s (use replace)"
                              % (name, queue))
        if _text(r[0]) not in ("ok", "replaced", "same"):
            raise RedisError("unexpected reply from the sched_add script")
        return int(r[1])

    def schedule_list(self, queue):
        """The queue's schedules, soonest next tick first (paused ones
        last)."""
        ks, _ = self._sched_keys(queue)
        return _schedules(self._run("sched_list", ks, [-1, 10000]))

    def schedule_remove(self, queue, name) -> None:
        """Delete a schedule; NotFoundError when there is none."""
        keys.check_schedule_name(name)
        ks, _ = self._sched_keys(queue)
        if int(self._run("sched_remove", ks, [name])) != 1:
            raise NotFoundError("no schedule %s in queue %s" % (name, queue))

    def schedule_pause(self, queue, name) -> int:
        """Stop a schedule without removing it: no tick fires after this
        returns, and the jobs it made ahead of ticks not yet due are
        deleted; its definition stays (schedule_add with replace keeps it
        paused).  Returns when it was paused (server Unix ms; the earlier
        time when it was paused already).  NotFoundError when there is no
        such schedule."""
        keys.check_schedule_name(name)
        ks, _ = self._sched_keys(queue)
        status, ms = self._sched_pause(ks, [name, "pause"])
        if status == "missing":
            raise NotFoundError("no schedule %s in queue %s" % (name, queue))
        if status not in ("paused", "already"):
            raise RedisError("unexpected reply from the sched_pause script")
        return ms

    def schedule_resume(self, queue, name) -> int:
        """Resume a paused schedule from its first tick after now (the
        ticks missed while paused are not made up); returns that tick
        (Unix ms).  A schedule that is not paused is left as it is (its
        next tick is returned).  NotFoundError when there is none;
        InvalidError when its stored definition cannot be read."""
        keys.check_schedule_name(name)
        ks, _ = self._sched_keys(queue)
        # A definition replaced between the read and the write is read
        # again (a few times: someone replacing it without end wins).
        status, ms = "changed", 0
        for _ in range(RESUME_TRIES):
            status, ms = self._resume_once(queue, name, ks)
            if status != "changed":
                break
        if status == "missing":
            raise NotFoundError("no schedule %s in queue %s" % (name, queue))
        if status not in ("resumed", "running"):
            raise RedisError("schedule %s: resume failed (%s)" % (name, status))
        return ms

    def _resume_once(self, queue, name, ks):
        """One resume: read the definition, find its first tick after now
        on the Redis clock, and store it unless the definition changed
        meanwhile ("changed": read it again).  Returns (status, ms)."""
        r = self._run("sched_list", ks, [-1, 1, name])
        found = _schedules(r)
        if len(found) != 1:
            raise NotFoundError("no schedule %s in queue %s" % (name, queue))
        s = found[0]
        if s.paused_since_ms < 0:
            return "running", s.next_ms
        e = None
        if s.readable:
            try:
                e = cron.parse(s.expr)
            except Error:
                pass
        if e is None:
            raise InvalidError("schedule %s has an unreadable definition: remove it and add "
                               "it again" % name)
        cron.check_zone(s.tz)   # (the zone's file may have gone since the add)
        nxt = cron.first_tick(e, s.tz or None, int(r[0]))
        if nxt < 0:
            raise InvalidError('expression "%s" fires at no time in the next eight years'
                               % s.expr)
        # expr and tz exactly as read: the script compares them.
        return self._sched_pause(ks, [name, "resume", nxt, r[2], r[3]])

    def _sched_pause(self, ks, args):
        r = self._run("sched_pause", ks, args)
        if not isinstance(r, list) or len(r) != 2:
            raise RedisError("unexpected reply from the sched_pause script")
        return _text(r[0]), int(r[1])

    def schedule_run_now(self, queue, name) -> str:
        """Make one job of the schedule now; returns its id
        (NAME@now-2026-11-23T10:05:00.123Z)."""
        keys.check_schedule_name(name)
        ks, wake = self._sched_keys(queue)
        now = self.server_time_ms()
        job_id = "%s@now-%s" % (name, iso_ms(now))
        r = self._run("sched_fire", ks, [wake, name, "-", now, job_id, 0])
        st = _text(r[0])
        if st == "missing":
            raise NotFoundError("no schedule %s in queue %s" % (name, queue))
        if st == "exists":
            raise ExistsError("job %s exists already" % job_id)
        if st != "fired":
            raise RedisError("unexpected reply from the sched_fire script")
        return job_id




def _schedules(r):
    """The schedules of a sched_list reply (now_ms, then ten elements
    each)."""
    out = []
    for i in range(1, len(r), 10):
        out.append(Schedule(name=_text(r[i]), expr=_text(r[i + 1]), tz=_text(r[i + 2]),
                            type=_text(r[i + 3]), payload=bytes(r[i + 4]),
                            max_attempts=int(r[i + 5]),
                            catch_up=_text(r[i + 6]) if _text(r[i + 6]) in CATCH_UP
                            else "one",
                            next_ms=int(r[i + 7]), readable=int(r[i + 8]) == 1,
                            paused_since_ms=int(r[i + 9])))
    return out


def iso_ms(ms):
    """2026-11-23T10:05:00.123Z, as libdelayq's timefmt_iso."""
    t = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return "%s.%03dZ" % (t.strftime("%Y-%m-%dT%H:%M:%S"), ms % 1000)
