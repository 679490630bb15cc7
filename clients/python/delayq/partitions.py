"""Setting a queue's partition count, as libdelayq's dq_queue_set_partitions."""
from . import keys
from .errors import ExistsError, InvalidError, RedisError, StaleError


def set_partitions(c, queue, n):
    queue = keys.check_queue(queue)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= keys.PARTITIONS_MAX:
        raise InvalidError("partitions %s is not in 1..%d" % (n, keys.PARTITIONS_MAX))
    frm = c.partitions(queue)
    if frm == n:
        _mark(c, queue, n, n)       # a queue partitioned before the epoch gets it
        return
    if frm > 1:
        jobs = sum(s.delayed + s.due + s.processing + s.dead
                   for s in (_stats_of(c, queue, p, frm) for p in range(frm)))
        if jobs > 0:
            raise ExistsError("queue %s holds %d job%s in its %d partitions: drain it first "
                              "(not set to %d)" % (queue, jobs, "" if jobs == 1 else "s",
                                                   frm, n))
    if (frm == 1) != (n == 1):
        due = keys.sched_keys(c.prefix, queue, frm)[1]
        count = int(c._cmd("ZCARD", due))      # the schedules, one member each
        if count > 0:
            raise ExistsError("queue %s has %d recurring schedule%s: remove them first and "
                              "add them again after (not set to %d partitions)"
                              % (queue, count, "" if count == 1 else "s", n))
    # The new count goes into every partition either layout has before it
    # is stored: a producer of the old count is refused from now on.
    upto = max(frm, n)
    _mark(c, queue, upto, n)
    ks, _ = keys.queue_keys(c.prefix, queue)
    r = c._run("partitions", ks, [frm, n])
    c._parts.pop(queue, None)
    what, x = r[0].decode(), r[1].decode() if isinstance(r[1], bytes) else str(r[1])
    if what == "ok":
        return
    try:        # not stored: the partitions get back the count that is
        now = c.partitions(queue)
        _mark(c, queue, max(upto, now), now)
    except Exception:
        pass
    if what == "changed":
        raise StaleError("queue %s: its partition count changed from %d to %s meanwhile: "
                         "not set to %d" % (queue, frm, x, n))
    if what == "jobs":
        raise ExistsError("queue %s holds %s job%s unpartitioned: drain it first (not set "
                          "to %d partitions)" % (queue, x, "" if x == "1" else "s", n))
    raise RedisError('queue %s: stored partition count "%.20s" is not a number 1..%d'
                     % (queue, x, keys.PARTITIONS_MAX))


def _mark(c, queue, upto, count):
    """The count's epoch: `count` into the meta hash of partitions
    0..upto-1, where enqueue and enqueue_many compare it with the count
    their caller read (docs/protocol.md, "Partitioned queues")."""
    for p in range(upto if upto >= 2 else 0):
        c._cmd("HSET", keys.queue_keys(c.prefix, queue, p, upto)[0][4], "partitions", count)


class _S:
    def __init__(self, r):
        self.delayed, self.due, self.processing, self.dead = (int(x) for x in r[1:5])


def _stats_of(c, queue, p, n):
    return _S(c._run("stats", keys.queue_keys(c.prefix, queue, p, n)[0], []))
