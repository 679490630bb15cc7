#!/usr/bin/python3
"""The Python client's jobs under control, against a real redis-server
(started here, stopped by pid): job expiry (shown, never claimed once
past, refused when bad), dedupe windows, a running job cancelled,
debounced adds, and schedules paused and resumed.  Jobs run through the
claim, ack and fail scripts."""
import re
import sys
import time
import unittest
from datetime import datetime, timedelta, timezone

import delayq
from delayq import cron

from test_client import SERVER, RedisCase


class JobsControlTest(RedisCase):
    def claim(self, queue, n=1):
        """Claim the due jobs of every partition through the claim script,
        as a worker does (a lease of 60 s): the ids handed out, sorted."""
        got = []
        for p in range(n):
            ks, _ = delayq.keys.queue_keys("dq", queue, p, n)
            r = self.dq.conn.run("claim", ks, [1000, 60000])
            got += [r[3 + 4 * i].decode() for i in range(int(r[2]))]
        return sorted(got)

    def test_an_expiry_is_shown(self):
        self.dq.enqueue("q", "t", id="ttl", delay=timedelta(minutes=5),
                        ttl=timedelta(minutes=10))
        j = self.dq.show("q", "ttl")
        self.assertEqual((j.expire_at_ms, j.on_expire), (j.due_ms + 600000, "dead"))
        self.assertEqual(j.expire_at, j.due + timedelta(minutes=10))
        self.dq.enqueue("q", "t", id="ms", delay=1000, ttl=5000, on_expire="drop")
        j = self.dq.show("q", "ms")
        self.assertEqual((j.expire_at_ms, j.on_expire), (j.due_ms + 5000, "drop"))
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        until = at + timedelta(minutes=30)
        self.dq.enqueue("q", "t", id="abs", at=at, expire_at=until, priority="high")
        j = self.dq.show("q", "abs")
        self.assertEqual((j.due_ms, j.expire_at_ms, j.priority),
                         (int(at.timestamp() * 1000), int(until.timestamp() * 1000), 0))
        self.dq.enqueue("q", "t", id="unix", at=int(at.timestamp() * 1000),
                        expire_at=int(until.timestamp() * 1000) + 1)
        self.assertEqual(self.dq.show("q", "unix").expire_at_ms,
                         int(until.timestamp() * 1000) + 1)
        self.dq.enqueue("q", "t", id="plain", delay=1000)
        j = self.dq.show("q", "plain")
        self.assertEqual((j.expire_at_ms, j.on_expire, j.expire_at), (0, "", None))
        # a replacement without an expiry has none; with one, its own
        self.dq.enqueue("q", "t", id="ttl", delay=1000, replace=True)
        self.assertEqual(self.dq.show("q", "ttl").expire_at_ms, 0)
        self.dq.enqueue("q", "t", id="plain", delay=1000, replace=True, ttl=2000)
        j = self.dq.show("q", "plain")
        self.assertEqual(j.expire_at_ms, j.due_ms + 2000)
        self.assertEqual(self.dq.stats("q").jobs_expired, 0)

    def test_an_expired_job_is_never_claimed(self):
        """Past their expiry, unstarted: dead with the error "expired"
        (attempts unchanged) or deleted; the claim hands out the rest, and
        the queue counts them."""
        self.dq.enqueue("q", "t", b"d", id="x:dead", ttl=150)
        self.dq.enqueue("q", "t", b"g", id="x:drop", ttl=timedelta(milliseconds=150),
                        on_expire="drop")
        self.dq.enqueue("q", "t", id="plain")
        self.dq.enqueue("q", "t", id="later", ttl=timedelta(minutes=1))
        time.sleep(0.3)
        self.assertEqual(self.claim("q"), ["later", "plain"])
        j = self.dq.show("q", "x:dead")
        self.assertEqual((j.state, j.last_error, j.attempts, j.payload),
                         ("dead", "expired", 0, b"d"))
        self.assertEqual((j.expire_at_ms, j.on_expire), (0, ""))   # it expires no more
        self.assertIsNone(self.dq.show("q", "x:drop"))
        s = self.dq.stats("q")
        self.assertEqual((s.delayed, s.due, s.processing, s.dead, s.jobs_expired),
                         (0, 0, 2, 1, 2))
        page = self.dq.dead_list("q")
        self.assertEqual([(d.id, d.last_error) for d in page.jobs], [("x:dead", "expired")])
        # requeued, it runs: its expiry went with its death
        self.dq.requeue("q", "x:dead")
        self.assertEqual(self.claim("q"), ["x:dead"])

    def test_enqueue_many_carries_expiries_on_a_partitioned_queue(self):
        self.dq.set_partitions("pq", 3)
        now = self.dq.server_time_ms()
        got = self.dq.enqueue_many("pq", [
            {"type": "t", "id": "m:ttl", "ttl": 150},
            {"type": "t", "id": "m:at", "expire_at": now + 200, "on_expire": "drop"},
            {"type": "t", "id": "m:prio", "ttl": timedelta(milliseconds=150), "priority": "high"},
            {"type": "t", "id": "m:plain"},
            {"type": "t", "ttl": 150},
            {"type": "t", "id": "m:long", "delay": 100, "ttl": 60000, "on_expire": "drop"},
        ])
        self.assertTrue(all(e.ok for e in got), [e.error for e in got])
        self.dq.enqueue("pq", "t", id="one", ttl=150, on_expire="drop")
        gen = got[4].id
        want = {"m:ttl": (150, "dead"), "m:prio": (150, "dead"), gen: (150, "dead"),
                "m:long": (60000, "drop"), "one": (150, "drop")}
        for job_id, (ttl, mode) in want.items():
            j = self.dq.show("pq", job_id)
            self.assertEqual((j.expire_at_ms, j.on_expire), (j.due_ms + ttl, mode), job_id)
        j = self.dq.show("pq", "m:at")
        self.assertEqual((j.expire_at_ms, j.on_expire), (now + 200, "drop"))
        self.assertEqual(self.dq.show("pq", "m:prio").priority, 0)
        self.assertEqual(self.dq.show("pq", "m:plain").expire_at_ms, 0)
        time.sleep(0.4)
        self.assertEqual(self.claim("pq", 3), ["m:long", "m:plain"])
        for job_id in ("m:ttl", "m:prio", gen):
            j = self.dq.show("pq", job_id)
            self.assertEqual((j.state, j.last_error), ("dead", "expired"), job_id)
        self.assertIsNone(self.dq.show("pq", "m:at"))
        self.assertIsNone(self.dq.show("pq", "one"))
        s = self.dq.stats("pq")
        self.assertEqual((s.dead, s.processing, s.jobs_expired), (3, 2, 5))

    def test_bad_expiries_are_refused_before_anything_is_written(self):
        now = int(time.time() * 1000)
        cases = [
            (dict(at=now + 5000, expire_at=now + 4000),
             "expiry %d (Unix ms) is not after the due time %d" % (now + 4000, now + 5000)),
            (dict(at=now + 5000, expire_at=now + 5000),
             "expiry %d (Unix ms) is not after the due time %d" % (now + 5000, now + 5000)),
            (dict(ttl=-1), "ttl -1 ms is not in 1..3153600000000 (100 years)"),
            (dict(ttl=timedelta(days=365 * 100, milliseconds=1)),
             "ttl 3153600000001 ms is not in 1..3153600000000 (100 years)"),
            (dict(ttl=1.5), "ttl 1.5 is not a timedelta or whole milliseconds"),
            (dict(expire_at=-5), "expiry -5 (Unix ms) is negative or more than 200 years from now"),
            (dict(expire_at=now + 3 * 3153600000000),
             "expiry %d (Unix ms) is negative or more than 200 years from now"
             % (now + 3 * 3153600000000)),
            (dict(expire_at=datetime(2030, 1, 1)),
             "expiry 2030-01-01T00:00:00 has no time zone (give tzinfo, e.g. timezone.utc)"),
            (dict(expire_at=now + 60000, ttl=1000),
             "give an expiry time (expire_at) or a ttl, not both"),
            (dict(ttl=1000, on_expire="delete"), 'on_expire \'delete\' is not "dead" or "drop"'),
        ]
        for kw, msg in cases:
            with self.assertRaises(delayq.InvalidError, msg=kw) as e:
                self.dq.enqueue("q", "t", id="bad", **kw)
            self.assertEqual(str(e.exception), msg)
        self.assertEqual(self.r.raw.keys("*"), [])   # not even the queue's registration
        for kw, msg in cases:
            got = self.dq.enqueue_many("q", [dict(kw, type="t", id="bad"),
                                             {"type": "t", "id": "good", "ttl": 60000,
                                              "replace": True}])
            self.assertIsInstance(got[0].error, delayq.InvalidError, kw)
            self.assertEqual(str(got[0].error), msg)
            self.assertTrue(got[1].ok, got[1].error)
        s = self.dq.stats("q")
        self.assertEqual((s.delayed, s.due, s.dead, s.jobs_expired), (0, 1, 0, 0))   # "good"

    def test_an_expiry_before_now_plus_delay_is_refused_here(self):
        """The due time of a delay is this host's now + delay: an expiry
        not after it is refused before anything is sent, and in a batch
        refuses that job alone (the script's refusal would fail the call)."""
        now = int(time.time() * 1000)
        msg = re.compile(r"^expiry %d \(Unix ms\) is not after the due time (\d+)$"
                         % (now + 1000))
        with self.assertRaises(delayq.InvalidError) as e:
            self.dq.enqueue("q", "t", id="late", delay=60000, expire_at=now + 1000)
        due = int(msg.match(str(e.exception)).group(1))
        self.assertTrue(now + 60000 <= due <= int(time.time() * 1000) + 60000, due)
        self.assertEqual(self.r.raw.keys("*"), [])   # nothing sent
        got = self.dq.enqueue_many("q", [
            {"type": "t", "id": "a", "delay": 5000},
            {"type": "t", "id": "late", "delay": 60000, "expire_at": now + 1000},
            {"type": "t", "id": "b", "delay": 5000, "ttl": 1000},
            {"type": "t", "id": "late:at", "at": now + 60000, "expire_at": now + 60000},
        ])
        self.assertEqual([g.ok for g in got], [True, False, True, False])
        self.assertIsInstance(got[1].error, delayq.InvalidError)
        self.assertRegex(str(got[1].error), msg)
        self.assertEqual(str(got[3].error), "expiry %d (Unix ms) is not after the due time %d"
                         % (now + 60000, now + 60000))
        self.assertEqual([self.dq.show("q", i) is None for i in ("a", "late", "b", "late:at")],
                         [False, True, False, True])
        self.assertEqual(self.dq.stats("q").delayed, 2)

    # ---- dedupe windows: an id stays taken after its job is done --------

    def run_all(self, queue):
        """Claim every due job and ack it, as a worker that succeeds does:
        the ids run, sorted."""
        ks, _ = delayq.keys.queue_keys("dq", queue)
        r = self.dq.conn.run("claim", ks, [1000, 60000])
        held = [(r[3 + 4 * i], r[5 + 4 * i]) for i in range(int(r[2]))]   # id, fence
        if held:
            acked = self.dq.conn.run("ack", ks, [x for pair in held for x in pair])
            self.assertEqual(acked, [1] * len(held))
        return sorted(job_id.decode() for job_id, _ in held)

    def test_a_dedupe_window_keeps_the_id_after_the_job_ran(self):
        hour = 3600000
        self.assertEqual(self.dq.enqueue("q", "t", b"1", id="hook:1",
                                         unique_for=timedelta(hours=1)), "hook:1")
        j = self.dq.show("q", "hook:1")
        self.assertEqual((j.state, j.unique_ms, j.unique_until_ms), ("delayed", hour, 0))
        self.assertEqual(self.run_all("q"), ["hook:1"])
        with self.assertRaises(delayq.UniqueError) as e:
            self.dq.enqueue("q", "t", b"2", id="hook:1", unique_for=hour)
        err = e.exception
        self.assertEqual((err.code, str(err)), ("unique", "job hook:1 in queue q finished "
                                                "within its dedupe window"))
        self.assertEqual(err.until_ms, err.finished_ms + hour)
        self.assertLess(abs(err.finished_ms - self.dq.server_time_ms()), 5000)
        # not ExistsError: a replace is refused too, and nothing was written
        self.assertNotIsInstance(err, delayq.ExistsError)
        with self.assertRaises(delayq.UniqueError):
            self.dq.enqueue("q", "t", b"3", id="hook:1", replace=True)
        # unique_ok: the id, as for an add, and still nothing added
        self.assertEqual(self.dq.enqueue("q", "t", b"4", id="hook:1", unique_for=hour,
                                         unique_ok=True), "hook:1")
        got = self.dq.enqueue("q", "t", b"4", id="hook:1", unique_for=hour, unique_ok=True,
                              detail=True)
        self.assertEqual((got.id, got.finished, got.finished_ms, got.unique_until_ms,
                          got.due_ms), ("hook:1", True, err.finished_ms, err.until_ms, 0))
        j = self.dq.show("q", "hook:1")
        self.assertEqual((j.state, j.state_ms, j.unique_ms, j.unique_until_ms, j.payload),
                         ("done", err.finished_ms, hour, err.until_ms, b""))
        self.assertEqual(j.unique_until, datetime.fromtimestamp(err.until_ms / 1000, timezone.utc))
        s = self.dq.stats("q")
        self.assertEqual((s.delayed, s.due, s.processing, s.dead), (0, 0, 0, 0))
        # a cancelled job's window runs from the cancel; without a window
        # the id is free the moment the job is done
        self.dq.enqueue("q", "t", id="c:1", delay=60000, unique_for=hour)
        self.dq.enqueue("q", "t", id="plain", delay=60000)
        self.assertTrue(self.dq.cancel("q", "c:1"))
        self.assertTrue(self.dq.cancel("q", "plain"))
        with self.assertRaises(delayq.UniqueError):
            self.dq.enqueue("q", "t", id="c:1")
        self.assertEqual(self.dq.enqueue("q", "t", id="plain"), "plain")
        self.assertEqual(self.dq.show("q", "c:1").state, "done")

    def test_a_short_window_ends(self):
        self.dq.enqueue("q", "t", b"1", id="w", unique_for=300)
        self.assertEqual(self.run_all("q"), ["w"])
        with self.assertRaises(delayq.UniqueError) as e:
            self.dq.enqueue("q", "t", b"2", id="w")
        time.sleep(max(0, e.exception.until_ms - self.dq.server_time_ms()) / 1000 + 0.02)
        self.assertEqual(self.dq.enqueue("q", "t", b"2", id="w"), "w")
        j = self.dq.show("q", "w")
        self.assertEqual((j.state, j.payload, j.unique_ms), ("delayed", b"2", 0))
        self.assertEqual(self.run_all("q"), ["w"])
        self.assertIsNone(self.dq.show("q", "w"))   # that job had no window

    def test_bad_windows_are_refused_before_anything_is_written(self):
        cases = [
            (dict(id="w", unique_for=0, unique_ok=True),
             "unique_ok needs a dedupe window (unique_for)"),
            (dict(id="w", unique_ok=True), "unique_ok needs a dedupe window (unique_for)"),
            (dict(id="w", unique_for=-1),
             "dedupe window -1 ms is not in 1..3153600000000 (100 years)"),
            (dict(id="w", unique_for=timedelta(days=365 * 100, milliseconds=1)),
             "dedupe window 3153600000001 ms is not in 1..3153600000000 (100 years)"),
            (dict(id="w", unique_for=1.5),
             "dedupe window 1.5 is not a timedelta or whole milliseconds"),
            (dict(unique_for=60000), "a dedupe window needs the job's id"),
        ]
        for kw, msg in cases:
            with self.assertRaises(delayq.InvalidError, msg=kw) as e:
                self.dq.enqueue("q", "t", **kw)
            self.assertEqual(str(e.exception), msg)
            got = self.dq.enqueue_many("q", [dict(kw, type="t")])
            self.assertIsInstance(got[0].error, delayq.InvalidError, kw)
            self.assertEqual(str(got[0].error), msg)
        self.assertEqual(self.r.raw.keys("*"), [])   # not even the queue's registration

    def test_enqueue_many_with_windows(self):
        """A window by job in one call, on a partitioned queue: refused,
        answered done (unique_ok), or added; the other jobs as ever."""
        self.dq.set_partitions("pq", 3)
        got = self.dq.enqueue_many("pq", [{"type": "t", "id": "a", "unique_for": 60000},
                                          {"type": "t", "id": "b", "unique_for": 60000,
                                           "priority": "high", "ttl": 60000}])
        self.assertTrue(all(e.ok for e in got))
        self.assertEqual(sorted(self.claim("pq", 3)), ["a", "b"])
        for p in range(3):
            ks, _ = delayq.keys.queue_keys("dq", "pq", p, 3)
            for job_id in ("a", "b"):
                if delayq.keys.partition_of(job_id, 3) == p:
                    fence = self.dq.show("pq", job_id).fence
                    self.assertEqual(self.dq.conn.run("ack", ks, [job_id, fence]), [1])
        got = self.dq.enqueue_many("pq", [
            {"type": "t", "id": "a", "unique_for": 60000},
            {"type": "t", "id": "b", "unique_for": timedelta(minutes=1), "unique_ok": True,
             "delay": 5000},
            {"type": "t", "id": "c", "unique_for": 60000, "unique_ok": True, "delay": 5000},
            {"type": "t", "id": "a"},
            {"type": "t", "delay": 5000},
        ])
        self.assertIsInstance(got[0].error, delayq.UniqueError)
        self.assertEqual((got[0].id, got[0].finished, got[0].error.until_ms), ("a", True, None))
        self.assertEqual((got[1].ok, got[1].id, got[1].finished, got[1].due_ms),
                         (True, "b", True, 0))
        self.assertEqual((got[2].ok, got[2].finished), (True, False))
        self.assertGreater(got[2].due_ms, 0)
        self.assertIsInstance(got[3].error, delayq.UniqueError)
        self.assertTrue(got[4].ok and got[4].id.isdigit() and not got[4].finished)
        self.assertEqual([self.dq.show("pq", i).state for i in ("a", "b", "c", got[4].id)],
                         ["done", "done", "delayed", "delayed"])
        self.assertEqual(self.dq.show("pq", "c").unique_ms, 60000)
        self.assertEqual(self.dq.enqueue("pq", "t", id="d", delay=5000, priority="low",
                                         unique_for=timedelta(seconds=30)), "d")
        j = self.dq.show("pq", "d")
        self.assertEqual((j.unique_ms, j.priority, j.expire_at_ms), (30000, 9, 0))
        self.assertEqual(self.dq.stats("pq").delayed, 3)

    # ---- cancel of a running job: it ends at once ------------------------

    def test_a_running_job_is_cancelled_at_once(self):
        """Claimed by hand (as a worker), a job is cancelled: show says
        "cancelled" with the claim's fence until the run's lease end, the
        run's ack is refused, stats count it (summed over the partitions),
        and an add of its id meanwhile is refused as unique."""
        for n in (1, 3):
            q = "cr%d" % n
            self.dq.set_partitions(q, n)
            self.dq.enqueue(q, "t", b"x", id="run:1")
            self.dq.enqueue(q, "t", b"w", id="wait:1", delay=60000)
            ks, _ = delayq.keys.queue_keys("dq", q, delayq.keys.partition_of("run:1", n), n)
            r = self.dq.conn.run("claim", ks, [10, 60000])
            self.assertEqual((int(r[2]), r[3]), (1, b"run:1"))
            fence = int(r[5])
            held = self.dq.show(q, "run:1")
            self.assertEqual((held.state, held.fence), ("processing", fence))
            # replace and run_now still refuse a running job
            with self.assertRaises(delayq.RunningError):
                self.dq.enqueue(q, "t", b"y", id="run:1", replace=True)
            with self.assertRaises(delayq.RunningError):
                self.dq.run_now(q, "run:1")

            self.assertTrue(self.dq.cancel(q, "run:1"))
            j = self.dq.show(q, "run:1")
            self.assertEqual((j.state, j.fence, j.type, j.payload, j.attempts, j.last_error),
                             ("cancelled", fence, "", b"", 0, ""))
            self.assertLess(abs(j.state_ms - j.now_ms), 5000)
            self.assertEqual(j.unique_until_ms, held.state_ms)   # the run's lease end
            self.assertFalse(self.dq.cancel(q, "run:1"))          # nothing left to cancel
            self.assertEqual(self.dq.conn.run("ack", ks, ["run:1", fence]), [0])   # stale
            with self.assertRaises(delayq.NotFoundError):
                self.dq.run_now(q, "run:1")

            self.assertTrue(self.dq.cancel(q, "wait:1"))   # a waiting one counts too
            s = self.dq.stats(q)
            self.assertEqual((s.delayed, s.due, s.processing, s.dead, s.jobs_cancelled),
                             (0, 0, 0, 0, 2))

            for kw in ({}, {"replace": True}):
                with self.assertRaises(delayq.UniqueError, msg=kw) as e:
                    self.dq.enqueue(q, "t", b"y", id="run:1", **kw)
                err = e.exception
                self.assertEqual((err.code, str(err)),
                                 ("unique", "job run:1 in queue %s finished within its "
                                  "dedupe window" % q))
                self.assertEqual((err.finished_ms, err.until_ms, err.cancelled),
                                 (j.state_ms, j.unique_until_ms, True))
            got = self.dq.enqueue(q, "t", b"y", id="run:1", unique_for=60000, unique_ok=True,
                                  detail=True)
            self.assertEqual((got.id, got.finished, got.cancelled, got.finished_ms,
                              got.unique_until_ms, got.due_ms),
                             ("run:1", True, True, j.state_ms, j.unique_until_ms, 0))
            many = self.dq.enqueue_many(q, [{"type": "t", "id": "run:1"}])
            self.assertIsInstance(many[0].error, delayq.UniqueError)
            self.assertEqual(self.dq.show(q, "run:1").state, "cancelled")

    def test_a_windows_tombstone_is_not_a_cancelled_run(self):
        """A job done within its window refuses an add without cancelled."""
        self.dq.enqueue("q", "t", id="w", unique_for=60000)
        self.assertEqual(self.run_all("q"), ["w"])
        with self.assertRaises(delayq.UniqueError) as e:
            self.dq.enqueue("q", "t", id="w")
        self.assertFalse(e.exception.cancelled)
        got = self.dq.enqueue("q", "t", id="w", unique_for=60000, unique_ok=True, detail=True)
        self.assertEqual((got.finished, got.cancelled), (True, False))
        self.assertEqual(self.dq.stats("q").jobs_cancelled, 0)

    # ---- debounce: a burst of adds of one id runs once, after it ---------

    def hold(self, queue, job_id):
        """Claim the due jobs (as a worker does); the fence of job_id."""
        self.assertIn(job_id, self.claim(queue))
        return self.dq.show(queue, job_id).fence

    def test_a_debounced_add_takes_the_waiting_jobs_place(self):
        now = self.dq.server_time_ms()
        first = self.dq.enqueue("q", "t", b"1", id="d", debounce=timedelta(minutes=1),
                                priority="low", detail=True)
        self.assertEqual((first.id, first.debounced, first.next_run, first.replaced),
                         ("d", False, False, False))
        self.assertTrue(now + 60000 <= first.due_ms < now + 65000, first)
        j = self.dq.show("q", "d")
        self.assertEqual((j.state, j.payload, j.due_ms, j.priority), ("delayed", b"1",
                                                                     first.due_ms, 9))
        created = j.created_ms
        time.sleep(0.05)
        again = self.dq.enqueue("q", "u", b"2", id="d", debounce=60000, max_wait=120000,
                                detail=True)
        self.assertEqual((again.id, again.debounced, again.next_run), ("d", True, False))
        self.assertGreater(again.due_ms, first.due_ms)
        j = self.dq.show("q", "d")
        self.assertEqual((j.state, j.type, j.payload, j.due_ms, j.created_ms, j.priority),
                         ("delayed", "u", b"2", again.due_ms, created, 5))
        # never later than max_wait after the first add
        self.assertEqual(self.dq.enqueue("q", "t", b"3", id="d", debounce=60000,
                                         max_wait=timedelta(seconds=1)), "d")
        j = self.dq.show("q", "d")
        self.assertEqual((j.payload, j.due_ms, j.created_ms), (b"3", created + 1000, created))
        s = self.dq.stats("q")
        self.assertEqual((s.delayed + s.due, s.processing), (1, 0))

    def test_a_debounced_add_while_the_job_runs_is_its_next_run(self):
        self.dq.enqueue("q", "t", b"1", id="r", debounce=1)
        time.sleep(0.02)
        fence = self.hold("q", "r")
        now = self.dq.server_time_ms()
        nxt = self.dq.enqueue("q", "t", b"2", id="r", debounce=5000, detail=True)
        self.assertEqual((nxt.debounced, nxt.next_run), (False, True))
        self.assertTrue(now + 5000 <= nxt.due_ms < now + 10000, nxt)
        later = self.dq.enqueue("q", "t", b"3", id="r", debounce=5000, detail=True)
        self.assertTrue(later.next_run and later.due_ms >= nxt.due_ms)
        j = self.dq.show("q", "r")
        self.assertEqual((j.state, j.payload, j.fence), ("processing", b"1", fence))
        ks, _ = delayq.keys.queue_keys("dq", "q")
        self.assertEqual(self.dq.conn.run("ack", ks, ["r", fence]), [1])
        j = self.dq.show("q", "r")
        self.assertEqual((j.state, j.payload, j.due_ms, j.attempts), ("delayed", b"3",
                                                                     later.due_ms, 0))

    def test_a_dead_job_keeps_its_id_from_a_debounced_add(self):
        self.dq.enqueue("q", "t", b"1", id="x")
        fence = self.hold("q", "x")
        ks, wake = delayq.keys.queue_keys("dq", "q")
        self.dq.conn.run("fail", ks, [wake, "x", fence, "boom", "dead", -1, 1000, 60000, 0, 1,
                                      0])
        with self.assertRaises(delayq.ExistsError):
            self.dq.enqueue("q", "t", b"2", id="x", debounce=1000)
        j = self.dq.show("q", "x")
        self.assertEqual((j.state, j.payload), ("dead", b"1"))

    def test_bad_debounces_are_refused_before_anything_is_written(self):
        alone = "a debounce goes alone: no delay, time, replace, expiry or dedupe window"
        now = int(time.time() * 1000)
        cases = [
            (dict(debounce=1000), "a debounce needs the job's id"),
            (dict(id="d", max_wait=1000), "a max wait needs a debounce"),
            (dict(id="d", debounce=0, max_wait=1000), "a max wait needs a debounce"),
            (dict(id="d", debounce=1000, delay=5), alone),
            (dict(id="d", debounce=1000, at=now + 5000), alone),
            (dict(id="d", debounce=1000, replace=True), alone),
            (dict(id="d", debounce=1000, ttl=60000), alone),
            (dict(id="d", debounce=1000, expire_at=now + 60000), alone),
            (dict(id="d", debounce=1000, unique_for=60000), alone),
            (dict(id="d", debounce=-1), "debounce -1 ms is not in 1..3153600000000 (100 years)"),
            (dict(id="d", debounce=timedelta(days=365 * 100, milliseconds=1)),
             "debounce 3153600000001 ms is not in 1..3153600000000 (100 years)"),
            (dict(id="d", debounce=1000, max_wait=3153600000001),
             "max wait 3153600000001 ms is not in 1..3153600000000 (100 years)"),
            (dict(id="d", debounce=1.5), "debounce 1.5 is not a timedelta or whole milliseconds"),
        ]
        for kw, msg in cases:
            with self.assertRaises(delayq.InvalidError, msg=kw) as e:
                self.dq.enqueue("q", "t", **kw)
            self.assertEqual(str(e.exception), msg)
            got = self.dq.enqueue_many("q", [dict(kw, type="t")])
            self.assertEqual(str(got[0].error), msg)
        self.assertEqual(self.r.raw.keys("*"), [])   # not even the queue's registration
        # enqueue_many: a debounced add goes alone; the others are added
        got = self.dq.enqueue_many("q", [{"type": "t", "id": "d1", "debounce": 1000},
                                         {"type": "t", "id": "ok1"},
                                         {"type": "t", "id": "d2", "debounce": 1000,
                                          "max_wait": 5000},
                                         {"type": "t", "id": "ok2", "replace": True}])
        self.assertEqual([g.ok for g in got], [False, True, False, True])
        self.assertIsInstance(got[0].error, delayq.InvalidError)
        self.assertEqual(str(got[2].error), "a debounced add goes one at a time (enqueue)")
        self.assertEqual([self.dq.show("q", i) is None for i in ("d1", "ok1", "d2", "ok2")],
                         [True, False, True, False])
        self.assertEqual((got[1].replaced, got[3].replaced), (False, False))

    # ---- schedules: pause and resume --------------------------------------

    def test_schedule_pause_and_resume(self):
        self.dq.schedule_add("q", "often", "ping", "@every 90s")
        self.dq.schedule_add("q", "nightly", "report", "0 3 * * *", tz="Europe/Berlin")
        now = self.dq.server_time_ms()
        since = self.dq.schedule_pause("q", "nightly")
        self.assertLess(abs(since - now), 5000)
        by_name = {s.name: s for s in self.dq.schedule_list("q")}
        self.assertEqual((by_name["nightly"].next_ms, by_name["nightly"].paused_since_ms),
                         (-1, since))
        self.assertIsNone(by_name["nightly"].next)   # not 1969-12-31
        self.assertEqual(by_name["often"].paused_since_ms, -1)
        self.assertEqual(by_name["often"].next, datetime.fromtimestamp(
            by_name["often"].next_ms / 1000, timezone.utc))
        self.assertEqual([s.name for s in self.dq.schedule_list("q")], ["often", "nightly"])
        time.sleep(0.01)
        self.assertEqual(self.dq.schedule_pause("q", "nightly"), since)   # the first pause
        # a replace keeps it paused, with the new definition
        self.assertEqual(self.dq.schedule_add("q", "nightly", "report", "0 4 * * *",
                                              tz="Europe/Berlin", replace=True), -1)
        self.assertEqual(self.dq.schedule_list("q")[1].paused_since_ms, since)
        now = self.dq.server_time_ms()
        nxt = self.dq.schedule_resume("q", "nightly")
        self.assertEqual(nxt, cron.first_tick(cron.parse("0 4 * * *"), "Europe/Berlin", now))
        self.assertTrue(now < nxt <= now + 86400000)
        s = {s.name: s for s in self.dq.schedule_list("q")}["nightly"]
        self.assertEqual((s.next_ms, s.paused_since_ms, s.expr), (nxt, -1, "0 4 * * *"))
        # resuming a running schedule changes nothing: its next tick
        self.assertEqual(self.dq.schedule_resume("q", "nightly"), nxt)
        for call in (self.dq.schedule_pause, self.dq.schedule_resume):
            with self.assertRaises(delayq.NotFoundError) as e:
                call("q", "none")
            self.assertEqual(str(e.exception), "no schedule none in queue q")
            with self.assertRaises(delayq.InvalidError):
                call("q", "a@b")


if __name__ == "__main__":
    if not SERVER:
        print("python client tests skipped: no redis-server")
        sys.exit(77)
    import warnings
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main()
