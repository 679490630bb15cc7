#!/usr/bin/python3
"""The Python client against real redis-servers (started here, stopped by
pid): the scripts it carries are the C library's, NOSCRIPT, durability
"replicated", ACL users with a password file, URLs, delayqd.conf, the
first tick of a schedule (jobs under control: test_jobs_control.py).  The
operations themselves are in tests/conformance (the same cases as the C
library)."""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from datetime import datetime, timedelta, timezone

import redis

import delayq
from delayq import cron, scripts
from delayq.keys import partition_of
from ports import free_port

TOP = os.environ.get("TOP_BUILDDIR", ".")
SERVER = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


class Redis:
    def __init__(self, tmp, name, *extra, port=0):
        self.dir = os.path.join(tmp, name)
        os.mkdir(self.dir)
        self.sock = os.path.join(self.dir, "redis.sock")
        self.port = port
        self.proc = subprocess.Popen([SERVER, "--port", str(port), "--unixsocket", self.sock,
                                      "--save", "", "--appendonly", "no", "--dir", self.dir]
                                     + list(extra), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.raw = redis.Redis(unix_socket_path=self.sock)
        for _ in range(250):
            try:
                self.raw.ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class RedisCase(unittest.TestCase):
    """A redis-server for the class, flushed before each test, and a client."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyclient.")
        cls.r = Redis(cls.tmp, "main")

    @classmethod
    def tearDownClass(cls):
        cls.r.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.r.raw.flushall()
        self.dq = delayq.Client.from_url("unix://" + self.r.sock)

    def tearDown(self):
        self.dq.close()


class ClientTest(RedisCase):

    def test_scripts_are_the_c_librarys(self):
        """Each script the package carries is byte for byte the build's
        scripts/NAME.lua, and its SHA1 is the one libdelayq's table names."""
        built = os.path.join(TOP, "scripts")
        names = sorted(f[:-4] for f in os.listdir(built) if f.endswith(".lua"))
        mine = sorted(f[:-4] for f in os.listdir(scripts.directory()) if f.endswith(".lua"))
        self.assertEqual(mine, names)
        with open(os.path.join(TOP, "src", "scripts_gen.c")) as f:
            table = dict(re.findall(r'\{ "([a-z_]+)", "([0-9a-f]{40})"', f.read()))
        self.assertEqual(sorted(table), names)
        for name in names:
            with open(os.path.join(built, name + ".lua"), "rb") as f:
                text = f.read()
            s = scripts.get(name)
            self.assertEqual(s.text, text, name)
            self.assertEqual(s.sha, hashlib.sha1(text).hexdigest(), name)
            self.assertEqual(s.sha, table[name], name)

    def test_noscript_loads_again(self):
        self.dq.enqueue("q", "t", b"1", id="a")
        self.r.raw.script_flush()
        self.assertEqual(self.dq.enqueue("q", "t", b"2", id="b"), "b")
        self.assertEqual(self.r.raw.script_exists(scripts.get("enqueue").sha), [True])
        page = self.dq.enqueue_many("q", [{"type": "t", "id": "c"}])
        self.r.raw.script_flush()
        page = self.dq.enqueue_many("q", [{"type": "t", "id": "d"}])
        self.assertIsNone(page[0].error)
        self.assertEqual(self.dq.stats("q").due, 4)

    def test_messages_are_libdelayqs(self):
        self.dq.enqueue("q", "t", id="a")
        with self.assertRaises(delayq.ExistsError) as e:
            self.dq.enqueue("q", "t", id="a")
        self.assertEqual(str(e.exception), "job a already exists in queue q (use replace)")
        self.assertEqual(e.exception.code, "exists")
        with self.assertRaises(delayq.InvalidError) as e:
            self.dq.enqueue("q", "t", delay=timedelta(days=365 * 100, milliseconds=1))
        self.assertEqual(str(e.exception),
                         "delay 3153600000001 ms is not in 0..3153600000000 (100 years)")
        with self.assertRaises(delayq.InvalidError) as e:
            self.dq.enqueue("q", "t", at=datetime(2026, 1, 1))
        self.assertIn("has no time zone", str(e.exception))
        with self.assertRaises(delayq.TooLargeError) as e:
            self.dq.enqueue("q", "t", b"x" * (1024 * 1024 + 1))
        self.assertEqual(str(e.exception), "payload is 1048577 bytes, over the limit of 1048576")

    def evalsha_calls(self):
        """Script calls Redis counted since the last CONFIG RESETSTAT."""
        return self.r.raw.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    def test_show_reads_a_waiting_record_in_one_call(self):
        """A producer's show of a waiting job is one script call that hands
        back the record, which the client reads; a record it cannot vouch for
        costs a second call, whose answer says what is wrong; a job the script
        cannot hand back raw (a queue with expiries) is answered in full."""
        self.dq.enqueue("q", "t", b"hello", id="s-1", delay=60000, max_attempts=3)
        self.assertIsNone(self.dq.show("q", "none"))    # the script loaded (NOSCRIPT once)
        self.r.raw.config_resetstat()
        j = self.dq.show("q", "s-1")
        self.assertEqual((j.state, j.payload, j.max_attempts, j.state_ms),
                         ("delayed", b"hello", 3, j.due_ms))
        self.assertEqual(self.evalsha_calls(), 1)
        # an array 16 of six elements: no record body for the scripts
        bad = bytes.fromhex("333a303adc0006a174a17803cf0000019b76daa800cdea60a0")
        self.r.raw.hset("dq:{q}:jobs", "s-2", bad)
        self.r.raw.zadd("dq:{q}:delayed", {"s-2": 1})
        self.r.raw.config_resetstat()
        j = self.dq.show("q", "s-2")
        self.assertEqual(j.state, "unreadable")
        self.assertIn("not a MessagePack array of 6 or 7", j.unreadable)
        self.assertEqual(self.evalsha_calls(), 2)
        self.dq.enqueue("q", "t", b"x", id="s-3", delay=60000, ttl=60000)
        self.r.raw.config_resetstat()
        j = self.dq.show("q", "s-3")
        self.assertEqual(j.state, "delayed")
        self.assertGreater(j.expire_at_ms, 0)
        self.assertEqual(self.evalsha_calls(), 1)

    def test_delay_and_at_forms(self):
        now = self.dq.server_time_ms()
        self.dq.enqueue("q", "t", id="td", delay=timedelta(minutes=30))
        self.dq.enqueue("q", "t", id="ms", delay=1800000)
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        self.dq.enqueue("q", "t", id="at", at=at)
        j = self.dq.show("q", "td")
        self.assertTrue(now + 1800000 <= j.due_ms < now + 1800000 + 5000)
        self.assertEqual(self.dq.show("q", "at").due_ms, int(at.timestamp() * 1000))
        got = self.dq.enqueue("q", "t", id="ms", delay=1000, replace=True, detail=True)
        self.assertEqual((got.id, got.replaced, got.finished, got.debounced), ("ms", True,
                                                                             False, False))
        self.assertTrue(now + 1000 <= got.due_ms < now + 6000)
        with self.assertRaises(delayq.InvalidError):
            self.dq.enqueue("q", "t", delay=5, at=now)
        with self.assertRaises(delayq.InvalidError):
            self.dq.enqueue("q", "t", delay=1.5)

    # ---- expiry: a job not started by its expiry is not run --------------

    def test_context_manager_closes(self):
        with delayq.Client.from_url("unix://" + self.r.sock) as dq:
            dq.enqueue("q", "t", id="cm")
        self.assertIsNotNone(self.dq.show("q", "cm"))

    def test_acl_user_with_password_file(self):
        self.r.raw.execute_command("ACL", "SETUSER", "producer", "on", ">s3cret", "~*",
                                   "&*", "+@all")
        pw = os.path.join(self.tmp, "redis.pass")
        with open(pw, "w") as f:
            f.write("s3cret\n")
        conf = os.path.join(self.tmp, "acl.conf")
        with open(conf, "w") as f:
            f.write('redis = {\n  unix_socket = "%s";\n  user = "producer";\n'
                    '  password_file = "%s";\n};\n' % (self.r.sock, pw))
        with delayq.Client.from_config(conf) as dq:
            self.assertEqual(dq.enqueue("q", "t", id="acl"), "acl")
        with delayq.Client.from_url("unix://producer@%s?password_file=%s" % (self.r.sock, pw)) as dq:
            self.assertTrue(dq.cancel("q", "acl"))
        with delayq.Client.from_url("unix://producer:nope@%s" % self.r.sock) as dq:
            with self.assertRaises(delayq.AuthError):
                dq.enqueue("q", "t", id="x")
        self.r.raw.execute_command("ACL", "DELUSER", "producer")

    def test_replicated_durability_waits_for_a_replica(self):
        port = free_port()
        master = Redis(self.tmp, "master%d" % port, port=port, )
        replica = None
        try:
            with delayq.Client.from_url("unix://%s?durability=replicated&"
                                        "replication_timeout_ms=200" % master.sock) as dq:
                with self.assertRaises(delayq.TimeoutError) as e:
                    dq.enqueue("q", "t", id="lonely")
                self.assertEqual(str(e.exception), "not replicated within 200 ms (the write "
                                 "is on the master only)")
                replica = Redis(self.tmp, "replica%d" % port, "--replicaof", "127.0.0.1",
                                str(port))
                for _ in range(500):
                    if replica.raw.info("replication").get("master_link_status") == "up":
                        break
                    time.sleep(0.02)
            # (a generous timeout: the machine may be loaded)
            with delayq.Client.from_url("unix://%s?durability=replicated&"
                                        "replication_timeout_ms=10000" % master.sock) as dq:
                self.assertEqual(dq.enqueue("q", "t", id="safe"), "safe")
                got = dq.enqueue_many("q", [{"type": "t", "id": "m%d" % i} for i in range(3)])
                self.assertTrue(all(e.ok for e in got))
                self.assertIsNotNone(replica.raw.hget("dq:{q}:jobs", "safe"))
                # A queue of 4 partitions on one server: one WAIT for the
                # whole call, not one per partition.
                dq.set_partitions("pq", 4)
                waits = master.raw.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
                got = dq.enqueue_many("pq", [{"type": "t", "id": "p%d" % i} for i in range(12)])
                self.assertTrue(all(e.ok for e in got))
                self.assertEqual(len({partition_of("p%d" % i, 4) for i in range(12)}), 4)
                self.assertEqual(master.raw.info("commandstats")["cmdstat_wait"]["calls"],
                                 waits + 1)
        finally:
            if replica:
                replica.stop()
            master.stop()

    def test_urls(self):
        o = delayq.Client.from_url("redis://:pw@127.0.0.1:1/3?prefix=jobs").options
        self.assertEqual((o.host, o.port, o.db, o.password, o.prefix),
                         ("127.0.0.1", 1, 3, "pw", "jobs"))
        self.assertTrue(delayq.Client.from_url("rediss://h:2").options.tls)
        for bad in ("http://x", "redis://h/abc", "redis://h?colour=red", "unix://"):
            with self.assertRaises(delayq.InvalidError, msg=bad):
                delayq.Client.from_url(bad)

    def test_config_errors_name_file_and_line(self):
        conf = os.path.join(self.tmp, "bad.conf")
        cases = [('redis = {\n  hots = "x";\n};\n', ":2: unknown setting redis.hots"),
                 ('redis = {\n  port = 0;\n};\n', ":2: redis.port: 0 is out of range"),
                 ('redis = {\n\n  connect_timeout = "5";\n};\n',
                  ':3: redis.connect_timeout: "5" has no unit'),
                 ('redis = {\n  host = "a";\n  unix_socket = "/s";\n};\n',
                  ":3: redis.host and redis.unix_socket are both set"),
                 ('redis = {\n  user = "u";\n};\n', ":2: redis.user needs redis.password"),
                 ('redis = {\n  durability = "safe";\n};\n', ':2: redis.durability: "safe"'),
                 ('log = { level = "info"; }\nredis = {\n  port = 6379\n  host = ;\n};\n',
                  ":4: expected a value"),
                 ('redis = {\n  password_file = "/nonexistent/pw";\n};\n',
                  ":2: redis.password_file: cannot read /nonexistent/pw")]
        for text, want in cases:
            with open(conf, "w") as f:
                f.write(text)
            with self.assertRaises(delayq.ConfigError, msg=text) as e:
                delayq.Client.from_config(conf)
            self.assertIn(conf + want, str(e.exception))
            self.assertNotIn("\n", str(e.exception))

    def test_config_reads_the_shipped_example(self):
        src = os.path.join(os.path.dirname(__file__), "..", "..", "etc", "delayqd.conf")
        o = delayq.Client.from_config(src).options
        self.assertEqual((o.host, o.port, o.prefix, o.max_payload), ("127.0.0.1", 6379, "dq",
                                                                       1048576))
        conf = os.path.join(self.tmp, "full.conf")
        with open(conf, "w") as f:
            f.write('# c\nredis : {\n  unix_socket = "%s"; /* here */ db = 2;\n'
                    '  prefix = "a" "b";  // joined\n  command_timeout = "500ms";\n'
                    '  durability = "replicated"; replication_timeout = "2s";\n};\n'
                    'queues = ( { name = "x"; }, { name = "y"; } );\n' % self.r.sock)
        o = delayq.Client.from_config(conf).options
        self.assertEqual((o.unix_socket, o.db, o.prefix, o.command_timeout_ms, o.durability,
                          o.replication_timeout_ms),
                         (self.r.sock, 2, "ab", 500, "replicated", 2000))

    def test_first_tick_in_a_zone(self):
        e = cron.parse("0 3 * * *")
        now = int(datetime(2026, 11, 26, 10, 0, tzinfo=timezone.utc).timestamp() * 1000)
        self.assertEqual(cron.first_tick(e, "Europe/Berlin", now),
                         int(datetime(2026, 11, 27, 2, 0, tzinfo=timezone.utc).timestamp() * 1000))
        # 02:30 does not exist in Berlin on 2026-03-29: the first minute after the jump
        e = cron.parse("30 2 * * *")
        now = int(datetime(2026, 3, 28, 12, 0, tzinfo=timezone.utc).timestamp() * 1000)
        self.assertEqual(cron.first_tick(e, "Europe/Berlin", now),
                         int(datetime(2026, 3, 29, 1, 0, tzinfo=timezone.utc).timestamp() * 1000))
        # Vixie's day rule: day 13 or a Friday
        e = cron.parse("0 0 13 * fri")
        now = int(datetime(2026, 11, 26, tzinfo=timezone.utc).timestamp() * 1000)
        self.assertEqual(cron.first_tick(e, None, now),
                         int(datetime(2026, 11, 27, tzinfo=timezone.utc).timestamp() * 1000))
        self.assertEqual(cron.first_tick(cron.parse("@every 90s"), None, 1000500), 1090000)



# A script that keeps Redis busy for 300 ms: it reads no connection
# meanwhile, so what a client sends waits in its socket.
BUSY_300MS = ("local s = redis.call('TIME') repeat local t = redis.call('TIME') "
              "until (t[1] - s[1]) * 1000000 + t[2] - s[2] > 300000 return 1")


class SpanningCallsTest(RedisCase):
    """Calls over a queue's partitions send their scripts in one pipeline:
    each reaches Redis in one read, where one call at a time takes one per
    partition."""

    def reads(self):
        return self.r.raw.info("stats")["total_reads_processed"]

    def reads_of(self, call):
        """Redis's reads for `call`, made while Redis was busy (so that a
        pipeline arrives in one read)."""
        busy = self.r.raw.connection_pool.get_connection("EVAL")
        before = self.reads()
        busy.send_command("EVAL", BUSY_300MS, 0)
        time.sleep(0.05)
        call()
        busy.read_response()
        self.r.raw.connection_pool.release(busy)
        return self.reads() - before - 2       # less the busy script's and the INFO's

    def test_calls_over_twelve_partitions_take_one_round_trip(self):
        q = "span"
        self.dq.set_partitions(q, 12)
        for _ in range(12):     # generated ids: one in each partition
            self.dq.enqueue(q, "t", b"x", delay=60000)
        calls = {
            "stats": lambda: self.dq.stats(q),
            "pause": lambda: self.dq.pause(q),
            "resume": lambda: self.dq.resume(q),
            "dead list": lambda: self.dq.dead_list(q),
            "requeue all": lambda: self.dq.requeue_all(q),
            "purge all": lambda: self.dq.purge_all(q),
        }
        for call in calls.values():     # the scripts loaded, the count read
            call()
        for name, call in calls.items():
            self.assertEqual(self.reads_of(call), 1, name)
        # Each partition's reply counts: the twelve summed, all paused.
        self.assertEqual(self.dq.stats(q).delayed, 12)
        since = self.dq.pause(q)
        for p in range(12):     # each paused when its script ran, within the call
            at = int(self.r.raw.hget("dq:{span:%d}:meta" % p, "paused") or -1)
            self.assertTrue(since <= at < since + 1000, "partition %d: %d, queue %d"
                            % (p, at, since))
        self.assertEqual(self.dq.resume(q), since)
        self.assertIsNone(self.dq.paused(q))

if __name__ == "__main__":
    if not SERVER:
        print("python client tests skipped: no redis-server")
        sys.exit(77)
    import warnings
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main()
