"""delayq.Client: enqueue, cancel and inspect delayed jobs from Python.

The same operations, arguments, checks and messages as libdelayq (the C
client); the same scripts (see scripts.py); docs/protocol.md is the
contract.
"""
import random
from typing import Union
from urllib.parse import parse_qs, unquote, urlparse

from . import errors, keys, msgpack
from .conn import Conn, Options, translate
from .errors import (DeadError, ExistsError, InvalidError, NotFoundError, RedisError,
                     RunningError, StaleError, UniqueError)
from .jobs import DeadJob, DeadPage, Enqueued, Job, Stats
from .request import Request
from .schedules import Schedules

# The protocol version this client writes and the newest it can read: the
# meta field `protocol` of a queue (docs/protocol.md, "Versioning").
PROTOCOL_VERSION = 1
ENQUEUE_CHUNK = 1000   # jobs per enqueue_many call, as libdelayq
ADMIN_BATCH = 500      # dead jobs moved per script call
DEAD_PAGE_MAX = 10000


def _count_moved(queue):
    return StaleError("queue %s: its partition count changed twice while adding: not added"
                      % queue)

def _text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else str(b)


def _whole(b):
    """A score as ZSCORE gives it, truncated to a whole number (as Redis
    truncates a script's number in a reply)."""
    try:
        return int(b)
    except ValueError:
        pass
    try:
        return int(float(b))
    except (ValueError, OverflowError):    # inf, set by hand
        return 0


class Client(Schedules):
    """A connection to the Redis that holds the jobs.  Not thread-safe:
    one Client per thread (or share one behind a lock)."""

    def __init__(self, options=None, **settings):
        o = options or Options()
        for k, v in settings.items():
            if not hasattr(o, k):
                raise InvalidError("unknown setting %s" % k)
            setattr(o, k, v)
        self.options = o
        self.prefix = keys.check_prefix(o.prefix)
        if o.durability not in ("local", "replicated"):
            raise InvalidError('durability "%s" is not "local" or "replicated"' % o.durability)
        if o.user and not o.password:
            raise InvalidError("an ACL user needs a password")
        self.max_payload = o.max_payload or keys.DEFAULT_MAX_PAYLOAD
        self.conn = Conn(o)
        self._parts = {}        # queue -> partition count, read once
        self._registered = set()
        self._rr = random.randrange(1 << 30)  # round robin of id-less jobs

    # ---- making one -------------------------------------------------------

    @classmethod
    def from_url(cls, url, **settings):
        """redis://[user:password@]host[:port][/db], rediss://... (TLS),
        unix:///path/to/socket[?db=N]; query settings: prefix, db,
        durability, max_payload, connect_timeout_ms, command_timeout_ms,
        replication_timeout_ms, password_file."""
        u = urlparse(url)
        o = Options()
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        if u.scheme in ("redis", "rediss"):
            o.host = u.hostname or o.host
            o.port = u.port or o.port
            path = u.path.strip("/")
            if path:
                if not path.isdigit():
                    raise InvalidError('URL "%s": database "%s" is not a number' % (url, path))
                o.db = int(path)
            o.tls = u.scheme == "rediss"
        elif u.scheme == "unix":
            o.unix_socket = unquote(u.path)
            if not o.unix_socket:
                raise InvalidError('URL "%s" names no socket' % url)
        else:
            raise InvalidError('URL "%s": scheme is not redis, rediss or unix' % url)
        if u.username:
            o.user = unquote(u.username)
        if u.password is not None:
            o.password = unquote(u.password)
        elif u.username and "password_file" not in q:
            o.password, o.user = o.user, None   # redis://secret@host: a password
        for k, v in q.items():
            if k == "password_file":
                from .config import read_secret
                o.password = read_secret(v, "URL password_file")
            elif k in ("prefix", "durability"):
                setattr(o, k, v)
            elif k in ("db", "max_payload", "connect_timeout_ms", "command_timeout_ms",
                       "replication_timeout_ms"):
                if not v.isdigit():
                    raise InvalidError('URL setting %s "%s" is not a whole number' % (k, v))
                setattr(o, k, int(v))
            else:
                raise InvalidError('URL setting "%s" is unknown' % k)
        return cls(o, **settings)

    @classmethod
    def from_config(cls, path, **settings):
        """The `redis` group of a delayqd.conf: the daemon's own settings."""
        from .config import load_redis_options
        return cls(load_redis_options(path), **settings)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- plumbing ----------------------------------------------------------

    def _forget(self):
        self._parts.clear()
        self._registered.clear()

    def _run(self, name, keys_, args):
        try:
            return self.conn.run(name, keys_, args)
        except errors.ConnectError:
            self._forget()
            raise

    def _run_all(self, name, calls):
        """Calls [(keys, args)] of script `name` in one pipeline (one round
        trip per master); the replies in order, the first error raised."""
        try:
            replies = self.conn.run_many(name, calls)
        except errors.ConnectError:
            self._forget()
            raise
        for r in replies:
            if isinstance(r, Exception):
                e = translate(self.conn.o, r, name)
                if isinstance(e, errors.ConnectError):
                    self._forget()
                raise e
        return replies

    def _cmd(self, *args):
        try:
            return self.conn.command(*args)
        except errors.ConnectError:
            self._forget()
            raise

    def _nparts(self, queue):
        """The queue's partition count, read once per connection (with the
        protocol marker, which is checked here)."""
        queue = keys.check_queue(queue)
        n = self._parts.get(queue)
        if n is not None:
            return n
        meta = keys.meta_key(self.prefix, queue)
        count, proto = self._cmd("HMGET", meta, "partitions", "protocol")
        check_protocol(queue, proto)
        n = 1
        if count is not None:
            s = _text(count)
            if not s.isdigit() or not 1 <= int(s) <= keys.PARTITIONS_MAX:
                raise RedisError('%s field partitions is "%.20s", not a partition count '
                                 '(1..%d)' % (meta, s, keys.PARTITIONS_MAX))
            n = int(s)
        self._parts[queue] = n
        return n

    def _register(self, queue):
        """List the queue in P:queues and mark its protocol version, once
        per connection and queue (not on every enqueue)."""
        if queue in self._registered:
            return
        try:
            p = self.conn.r.pipeline(transaction=False)
            p.sadd(keys.registry_key(self.prefix), queue)
            p.hsetnx(keys.meta_key(self.prefix, queue), "protocol", PROTOCOL_VERSION)
            p.execute()
        except Exception as e:  # redis-py's, as a delayq.Error
            err = translate(self.options, e, "SADD")
            if isinstance(err, errors.ConnectError):
                self._forget()
            raise err from None
        self._registered.add(queue)

    def _keys(self, queue, part, n):
        return keys.queue_keys(self.prefix, queue, part, n)

    def _keys_of_id(self, queue, job_id):
        n = self._nparts(queue)
        return self._keys(queue, keys.partition_of(job_id, n), n)

    # ---- producing ---------------------------------------------------------

    def enqueue(self, queue, type, payload=b"", *, delay=None, at=None, id=None,
                replace=False, priority=None, max_attempts=0, expire_at=None, ttl=None,
                on_expire="dead", unique_for=None, unique_ok=False, debounce=None,
                max_wait=None, detail=False) -> Union[str, Enqueued]:
        """Schedule one job; returns its id (the one given, or a generated
        decimal one), or with detail=True an Enqueued saying what the add
        did.  delay: a timedelta or ms; at: an aware datetime or Unix ms
        (neither: due now).  expire_at (an aware datetime or Unix ms, after
        the due time, which for a delay is taken on this host's clock) or
        ttl (a timedelta or ms after the due time): a job not started by
        then is not run, but moved to dead with the error "expired"
        (on_expire "dead") or deleted ("drop").  unique_for (a timedelta or
        ms, with an id): a dedupe window, for which the id stays taken
        after the job is done; an add within it raises UniqueError, or with
        unique_ok adds nothing and returns the id (Enqueued.finished).
        debounce (a timedelta or ms, with an id; no delay, at, replace,
        expiry or window) and max_wait: while the job of that id waits,
        this add takes its place (this payload, type, limit and priority),
        due debounce from now but never later than max_wait after its
        first add (Enqueued.debounced); while it runs, the add is kept as
        its next run, which takes its place when that attempt ends
        (Enqueued.next_run); with no job, a new one due debounce from now.
        ExistsError when the id is taken (a dead job, for a debounced add)
        and replace is false; RunningError when replace meets a job being
        processed."""
        queue = keys.check_queue(queue)
        j = Request(self, queue, type, payload, delay, at, id, replace, priority, max_attempts,
                    expire_at, ttl, on_expire, unique_for, unique_ok, debounce, max_wait)
        self._register(queue)
        # The queue's partition count changed since it was read (the
        # script wrote nothing): read it again and go where it says now.
        for _ in range(2):
            n = self._nparts(queue)
            if j.id:
                part = keys.partition_of(j.id, n)
            else:
                part = self._rr % n
                self._rr += 1
            ks, wake = self._keys(queue, part, n)
            r = self._run("enqueue", ks, j.args(wake, n, part))
            if _text(r[0]) != "partitions":
                got = self._enqueued(queue, j, r)
                return got if detail else got.id
            self._parts.pop(queue, None)
        raise _count_moved(queue)

    def _enqueued(self, queue, j, r):
        """The enqueue script's reply as an Enqueued, or the error it
        means (raised)."""
        status, got = _text(r[0]), _text(r[1])
        if status in ("unique", "done") and len(r) >= 5:
            # A sixth element says what keeps the id: "cancelled" (a run
            # cancelled while it ran) or "done" (a window); none from a
            # script older than cancelling a running job.
            cancelled = len(r) >= 6 and _text(r[5]) == "cancelled"
            if status == "unique":
                raise UniqueError("job %s in queue %s finished within its dedupe window"
                                  % (j.id, queue), int(r[2]), int(r[4]), cancelled)
            return Enqueued(got, finished=True, finished_ms=int(r[2]),
                            unique_until_ms=int(r[4]), cancelled=cancelled)
        if status in ("ok", "replaced", "debounced", "queued"):
            return Enqueued(got, int(r[2]), replaced=status == "replaced",
                            debounced=status == "debounced", next_run=status == "queued")
        if status == "exists":
            raise ExistsError("job %s already exists in queue %s (use replace)" % (j.id, queue))
        if status == "running":
            raise RunningError("job %s in queue %s is running and cannot be replaced"
                               % (j.id, queue))
        raise RedisError("unexpected reply from the enqueue script")

    def enqueue_many(self, queue, jobs):
        """Schedule many jobs of one queue in one round trip (per master):
        `jobs` are dicts of enqueue's arguments (type, payload, delay, at,
        id, replace, priority, max_attempts, expire_at, ttl, on_expire,
        unique_for, unique_ok; not debounce: a debounced add goes one at a
        time, with enqueue).  Returns one Enqueued per job, in order: .id
        and .due_ms (.replaced; .finished: nothing was added, the job of
        that id finished within its dedupe window and unique_ok was asked),
        or .error (a delayq.Error: jobs are independent, a refused one does
        not stop the rest).  Each job is checked before anything is sent
        (an expiry against its due time on this host's clock too), and
        only the good ones are sent, as in libdelayq.  On a cluster each
        master answers for its own jobs: with one out of reach, the jobs
        bound for it get a ConnectError (TimeoutError when it stopped
        answering; with either, a job sent before its connection broke may
        have been written: give jobs ids to retry them safely) and the
        others are scheduled."""
        queue = keys.check_queue(queue)
        out, good = [], []
        for spec in jobs:
            try:
                spec = dict(spec)
                j = Request(self, queue, spec.pop("type", None), spec.pop("payload", b""),
                         spec.pop("delay", None), spec.pop("at", None), spec.pop("id", None),
                         spec.pop("replace", False), spec.pop("priority", None),
                         spec.pop("max_attempts", 0), spec.pop("expire_at", None),
                         spec.pop("ttl", None), spec.pop("on_expire", "dead"),
                         spec.pop("unique_for", None), spec.pop("unique_ok", False),
                         spec.pop("debounce", None), spec.pop("max_wait", None))
                if spec:
                    raise InvalidError("unknown job field %s" % sorted(spec)[0])
                if j.debounce > 0:
                    raise InvalidError("a debounced add goes one at a time (enqueue)")
                out.append(Enqueued(j.id or None))
                good.append((len(out) - 1, j))
            except errors.Error as e:
                out.append(Enqueued(spec.get("id") if isinstance(spec, dict) else None,
                                    error=e))
        if not good:
            return out
        self._register(queue)
        again = self._enqueue_many_pass(queue, good, out)
        if again:
            # Their queue's partition count changed (nothing of their calls
            # was written): read it again and send them where it says now.
            self._parts.pop(queue, None)
            for i, _ in self._enqueue_many_pass(queue, again, out):
                out[i].error = _count_moved(queue)
        return out

    def _enqueue_many_pass(self, queue, good, out):
        """Send the checked jobs `good` ((index, Request) pairs) at the
        partition count known, filling `out`; returns the pairs whose call
        was refused because that count is no longer the stored one."""
        n = self._nparts(queue)
        byp = {}
        for i, j in good:
            if j.id:
                p = keys.partition_of(j.id, n)
            else:
                p = self._rr % n
                self._rr += 1
            byp.setdefault(p, []).append((i, j))
        chunks, calls = [], []
        for p in sorted(byp):
            lst = byp[p]
            for s in range(0, len(lst), ENQUEUE_CHUNK):
                part = lst[s:s + ENQUEUE_CHUNK]
                ks, wake = self._keys(queue, p, n)
                args = [wake]
                for _, j in part:
                    args += [j.id, j.when(), j.body_head()]
                if n > 1:
                    args += [n, p]
                chunks.append((p, part))
                calls.append((ks, args))
        try:
            replies = self.conn.run_many("enqueue_many", calls)
        except errors.Error as e:
            if isinstance(e, errors.ConnectError):
                self._forget()
            for i, _ in good:
                out[i].error = e
            return []
        again = []
        for (p, part), r in zip(chunks, replies):
            if not isinstance(r, Exception) and _text(r[0]) == "partitions":
                again += part
            else:
                self._enqueue_many_reply(queue, n, p, part, r, out)
        return again

    def _enqueue_many_reply(self, queue, n, p, part, r, out):
        if isinstance(r, Exception):
            # On a cluster, a master out of reach fails only its own jobs
            # (written only if its connection broke after they were sent).
            e = r if isinstance(r, errors.Error) else RedisError(
                "redis error in enqueue_many: %s" % r)
            if isinstance(e, errors.ConnectError):
                self._forget()
            for i, _ in part:
                out[i].error = e
            return
        now, seq = int(r[0]), int(r[1])
        for i, j in part:
            if not j.id:
                seq += 1
                out[i].id = str(seq * n + p)
            out[i].due_ms = j.at if j.at is not None else now + j.delay
        for e in range(2, len(r), 3):
            i, j = part[int(r[e]) - 1]
            status, got = _text(r[e + 1]), _text(r[e + 2])
            out[i].id = got
            if status in ("unique", "done"):
                out[i].due_ms, out[i].finished = 0, True
            out[i].replaced = status == "replaced"
            if status == "unique":
                out[i].error = UniqueError("job %s in queue %s finished within its dedupe "
                                           "window" % (j.id, queue))
            elif status == "exists":
                out[i].error = ExistsError("job %s already exists in queue %s (use replace)"
                                           % (j.id, queue))
            elif status == "running":
                out[i].error = RunningError("job %s in queue %s is running and cannot be "
                                            "replaced" % (j.id, queue))
            elif status not in ("ok", "replaced", "done"):
                out[i].error = RedisError("unexpected reply from the enqueue_many script")

    def _delayed_call(self, name, queue, job_id, running, dead):
        queue = keys.check_queue(queue)
        job_id = keys.check_named_id(job_id)
        ks, wake = self._keys_of_id(queue, job_id)
        args = [job_id] if name == "cancel" else [wake, job_id]
        st = _text(self._run(name, ks, args))
        if st in ("cancelled", "ran"):
            return True
        if st == "running":
            raise RunningError("job %s in queue %s is running; %s" % (job_id, queue, running))
        if st == "dead":
            raise DeadError("job %s in queue %s is dead; %s" % (job_id, queue, dead))
        if st == "notfound":
            if name == "cancel":
                return False
            raise NotFoundError("no job %s in queue %s" % (job_id, queue))
        raise RedisError("unexpected reply from the %s script" % name)

    def cancel(self, queue, id) -> bool:
        """Cancel a job that has not finished: True.  One still waiting is
        deleted; one running ends at once, cancelled (never retried, never
        dead), and the daemon running it stops its handler within about a
        second; its id stays taken until that run's lease would have ended
        (show: state "cancelled").  False when there is no such job: it
        finished first, or was never added (of a cancel and the job's own
        end, exactly one wins).  DeadError (purge it instead);
        RunningError only from a server whose scripts predate cancelling a
        running job."""
        return self._delayed_call("cancel", queue, id, "it can no longer be cancelled",
                                  "purge it instead")

    def run_now(self, queue, id) -> None:
        """Make a delayed job due now (priority and attempts kept)."""
        self._delayed_call("run_now", queue, id, "it is no longer waiting",
                           "requeue it instead")

    # ---- operating ---------------------------------------------------------

    def show(self, queue, id):
        """The job, or None when there is no such job (one done within its
        dedupe window is state "done", until the window ends; one cancelled
        while it ran is state "cancelled", with the fence of the run that
        was stopped, until its id is free: unique_until_ms)."""
        queue = keys.check_queue(queue)
        job_id = keys.check_named_id(id)
        ks, _ = self._keys_of_id(queue, job_id)
        # A waiting job's record undecoded first (the script's work is then
        # its commands); in full when it does not read here as the scripts
        # would read it, and the script says why (docs/protocol.md, show).
        r = self._run("show", ks, [job_id, "raw"])
        if len(r) == 4 and _text(r[0]) == "record":
            rec = msgpack.read_record(bytes(r[1]))
            if rec is not None:
                return Job(id=job_id, state="delayed", type=_text(rec["type"]),
                           payload=rec["payload"], attempts=rec["attempts"],
                           max_attempts=rec["max"], created_ms=rec["created"],
                           due_ms=rec["due"], fence=0, last_error=_text(rec["err"]),
                           state_ms=_whole(r[2]), now_ms=int(r[3]), unreadable="",
                           where="delayed", priority=rec["prio"], expire_at_ms=0,
                           on_expire="", unique_ms=0, unique_until_ms=0)
            r = self._run("show", ks, [job_id])
        if _text(r[0]) == "notfound":
            return None
        if len(r) < 14:
            raise RedisError("unexpected reply from the show script")
        # A script older than expiries says nothing of them (14 elements),
        # one older than dedupe windows nothing of those (16).
        expires, windows = len(r) >= 16, len(r) >= 18
        return Job(id=job_id, state=_text(r[0]), type=_text(r[1]), payload=bytes(r[2]),
                   attempts=int(r[3]), max_attempts=int(r[4]), created_ms=int(r[5]),
                   due_ms=int(r[6]), fence=int(r[7]), last_error=_text(r[8]),
                   state_ms=int(r[9]), now_ms=int(r[10]), unreadable=_text(r[11]),
                   where=_text(r[12]), priority=int(r[13]),
                   expire_at_ms=int(r[14]) if expires else 0,
                   on_expire=_text(r[15]) if expires else "",
                   unique_ms=int(r[16]) if windows else 0,
                   unique_until_ms=int(r[17]) if windows else 0)

    def stats(self, queue) -> Stats:
        """The queue's figures, summed over its partitions."""
        n = self._nparts(queue)
        queue = keys.check_queue(queue)
        total = Stats(0, 0, 0, 0, 0, -1, 0)
        replies = self._run_all("stats", [(self._keys(queue, p, n)[0], []) for p in range(n)])
        for p, r in enumerate(replies):
            total.delayed += int(r[1])
            total.due += int(r[2])
            total.processing += int(r[3])
            total.dead += int(r[4])
            nd = int(r[5])
            if nd >= 0 and (total.next_due_in_ms < 0 or nd < total.next_due_in_ms):
                total.next_due_in_ms = nd
            total.expired += int(r[6])
            if p == 0:
                total.paused_since_ms = int(r[7])
            for lvl in range(10):
                total.due_by_priority[lvl] += int(r[8 + lvl])
            if len(r) > 19:     # none from a script older than expiries
                total.jobs_expired += int(r[19])
            if len(r) > 20:     # none from one older than cancelling a running job
                total.jobs_cancelled += int(r[20])
            total.now_ms = int(r[0])
        return total

    def _pause_script(self, name, queue):
        n = self._nparts(queue)
        queue = keys.check_queue(queue)
        calls = []
        for p in range(1 if name == "pause_state" else n):
            ks, wake = self._keys(queue, p, n)
            calls.append((ks, [] if name == "pause_state" else [wake]))
        return int(self._run_all(name, calls)[0][1])

    def pause(self, queue) -> int:
        """Stop claims of the queue on every host; returns when the pause
        began (server Unix ms; an earlier time when it was paused already)."""
        return self._pause_script("pause", queue)

    def resume(self, queue) -> int:
        """Undo pause; returns when the pause had begun, -1 when it was not."""
        return self._pause_script("resume", queue)

    def paused(self, queue):
        """When the queue's pause began (server Unix ms), or None."""
        since = self._pause_script("pause_state", queue)
        return since if since >= 0 else None

    def dead_list(self, queue, offset=0, count=100) -> DeadPage:
        """Dead jobs from `offset`, oldest death first, at most `count`
        (1..10000); the partitions' lists merged by time of death."""
        if offset < 0 or count < 1 or count > DEAD_PAGE_MAX:
            raise InvalidError("bad page: offset %d, count %d (1..%d)"
                               % (offset, count, DEAD_PAGE_MAX))
        n = self._nparts(queue)
        queue = keys.check_queue(queue)
        total, found = 0, []
        start, want = (offset, count) if n == 1 else (0, min(offset + count, DEAD_PAGE_MAX))
        for r in self._run_all("dead_list",
                               [(self._keys(queue, p, n)[0], [start, want]) for p in range(n)]):
            total += int(r[0])
            for i in range(1, len(r), 7):
                found.append(DeadJob(id=_text(r[i]), died_ms=int(r[i + 1]),
                                     type=_text(r[i + 2]), attempts=int(r[i + 3]),
                                     last_error=_text(r[i + 4]), payload_bytes=int(r[i + 5]),
                                     unreadable=_text(r[i + 6])))
        if n > 1:
            found.sort(key=lambda d: (d.died_ms, d.id))
            found = found[offset:offset + count]
        return DeadPage(total, found)

    def _dead_batches(self, name, queue, job_id):
        """Requeue or purge one dead job (in its partition), or all of them:
        rounds of one batch in each partition that has more, each round one
        pipeline."""
        n = self._nparts(queue)
        queue = keys.check_queue(queue)
        total = 0
        parts = [keys.partition_of(job_id, n)] if job_id is not None else list(range(n))
        while parts:
            calls = []
            for p in parts:
                ks, wake = self._keys(queue, p, n)
                calls.append((ks, ([wake] if name == "requeue" else []) + [job_id or "", ADMIN_BATCH]))
            more = []
            for p, r in zip(parts, self._run_all(name, calls)):
                moved, remaining = int(r[0]), int(r[1])
                total += moved
                if job_id is None and remaining > 0 and moved > 0:
                    more.append(p)
            parts = more
        if job_id is not None and total == 0:
            raise NotFoundError("no dead job %s in queue %s" % (job_id, queue))
        return total

    def requeue(self, queue, id) -> None:
        """Requeue one dead job (due now, attempts reset)."""
        self._dead_batches("requeue", queue, keys.check_named_id(id))

    def requeue_all(self, queue) -> int:
        return self._dead_batches("requeue", queue, None)

    def purge(self, queue, id) -> None:
        """Delete one dead job."""
        self._dead_batches("purge", queue, keys.check_named_id(id))

    def purge_all(self, queue) -> int:
        return self._dead_batches("purge", queue, None)

    # ---- partitions --------------------------------------------------------

    def partitions(self, queue) -> int:
        """The stored partition count of the queue, read now."""
        self._parts.pop(keys.check_queue(queue), None)
        return self._nparts(queue)

    def set_partitions(self, queue, n) -> None:
        """Store n (1..256) as the queue's partition count, as
        dq_queue_set_partitions: refused (ExistsError) while it holds jobs."""
        from .partitions import set_partitions
        set_partitions(self, queue, n)

    def server_time_ms(self) -> int:
        sec, usec = self._cmd("TIME")
        return int(sec) * 1000 + int(usec) // 1000

def check_protocol(queue, proto):
    """Refuse a queue whose data was written with a newer protocol."""
    if proto is None:
        return
    s = _text(proto)
    if not s.isdigit() or int(s) > PROTOCOL_VERSION:
        raise errors.ProtocolVersionError(
            'queue %s holds data of protocol version "%.20s"; this client knows versions '
            'up to %d: upgrade it' % (queue, s, PROTOCOL_VERSION))
