#!/usr/bin/python3
"""The Python client over Redis Cluster (a partitioned queue spread over
three masters), behind Sentinel, and over TLS: real redis-servers on
loopback ports, started here and stopped by pid."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import redis

import delayq
from ports import free_port

SERVER = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
HERE = os.path.dirname(os.path.abspath(__file__))


def wait_for(fn, what, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if fn():
                return
        except (redis.exceptions.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


class Procs:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="pytopo.")
        self.procs = []
        self.args = []

    def start(self, name, *args):
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        self.procs.append(self._run(d, args))
        self.args.append(args)
        return d

    def restart(self, i, *extra):
        """Server i started again (after it exited) in its directory, with
        its arguments and `extra`."""
        d = os.path.dirname(os.path.join(self.tmp, "n%d" % i, ""))
        self.procs[i] = self._run(d, self.args[i] + extra)

    @staticmethod
    def _run(d, args):
        return subprocess.Popen([SERVER] + list(args) + ["--dir", d, "--save", "",
                                                          "--appendonly", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)

    def stop(self):
        for p in self.procs:
            p.terminate()
            p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


BOUNDS = [(0, 5460), (5461, 10922), (10923, 16383)]     # the slots of masters 0, 1, 2


def start_cluster(procs, node_timeout_ms):
    """Three masters on free loopback ports, BOUNDS their slots: the ports
    and a plain connection to each, once every node says the cluster is ok."""
    ports = [free_port() for _ in range(3)]
    buses = [free_port() for _ in range(3)]
    for i, port in enumerate(ports):
        procs.start("n%d" % i, "--port", str(port), "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-port", str(buses[i]),
                    "--cluster-node-timeout", str(node_timeout_ms))
    nodes = [redis.Redis(port=port) for port in ports]
    for n in nodes:
        wait_for(n.ping, "a cluster node")
    for n, (lo, hi) in zip(nodes, BOUNDS):
        n.execute_command("CLUSTER ADDSLOTSRANGE", lo, hi)
    for n in nodes[1:]:
        n.execute_command("CLUSTER MEET", "127.0.0.1", ports[0], buses[0])

    def ready(n):
        info = n.execute_command("CLUSTER INFO")   # parsed into a dict
        return info["cluster_state"] == "ok" and info["cluster_known_nodes"] == "3"
    wait_for(lambda: all(ready(n) for n in nodes), "the cluster")
    return ports, nodes


class ClusterTest(unittest.TestCase):
    """A queue of 6 partitions over 3 masters: every call finds its job."""

    @classmethod
    def setUpClass(cls):
        cls.p = Procs()
        cls.ports, cls.nodes = start_cluster(cls.p, 2000)

    @classmethod
    def tearDownClass(cls):
        cls.p.stop()

    def test_partitioned_queue_over_three_masters(self):
        conf = os.path.join(self.p.tmp, "cluster.conf")
        with open(conf, "w") as f:
            f.write('redis = {\n  cluster = true;\n  nodes = [ %s ];\n};\n'
                    % ", ".join('"127.0.0.1:%d"' % p for p in self.ports))
        with delayq.Client.from_config(conf) as dq:
            dq.set_partitions("orders", 6)
            self.assertEqual(dq.partitions("orders"), 6)
            ids = [dq.enqueue("orders", "t", b"%d" % i, id="order:%d" % i, delay=60000)
                   for i in range(30)]
            ids += [dq.enqueue("orders", "t", b"gen", delay=60000) for _ in range(12)]
            got = dq.enqueue_many("orders", [{"type": "t", "id": "bulk:%d" % i,
                                              "payload": b"\x00\xff"} for i in range(200)]
                                  + [{"type": "t"} for _ in range(60)])
            self.assertTrue(all(e.ok for e in got), [e.error for e in got if not e.ok][:3])
            ids += [e.id for e in got]
            self.assertEqual(len(set(ids)), 302)
            for job_id in ids:
                self.assertIsNotNone(dq.show("orders", job_id), job_id)
            s = dq.stats("orders")
            self.assertEqual(s.delayed + s.due, 302)
            # the partitions' keys live on more than one master
            holding = [n for n in self.nodes if any(n.scan_iter(match="dq:*orders*"))]
            self.assertGreaterEqual(len(holding), 2)
            for job_id in ids:
                self.assertTrue(dq.cancel("orders", job_id), job_id)
            self.assertEqual(dq.stats("orders").due, 0)
            dq.schedule_add("orders", "nightly", "report", "@daily")
            run = dq.schedule_run_now("orders", "nightly")
            self.assertEqual(dq.show("orders", run).type, "report")
            self.assertTrue(dq.cancel("orders", run))
            dq.schedule_remove("orders", "nightly")
            self.assertTrue(dq.pause("orders") > 0)
            self.assertIsNotNone(dq.paused("orders"))
            dq.resume("orders")

    def test_noscript_on_a_master_loads_there(self):
        with delayq.Client(cluster=True, nodes=["127.0.0.1:%d" % self.ports[0]]) as dq:
            dq.enqueue("plain", "t", id="a")
            for n in self.nodes:
                n.script_flush()
            self.assertEqual(dq.enqueue("plain", "t", id="b"), "b")
            self.assertEqual(len(dq.enqueue_many("plain", [{"type": "t"}])), 1)
            self.assertEqual(dq.stats("plain").due, 3)


class ClusterMasterDownTest(unittest.TestCase):
    """3 masters without replicas, one killed: enqueue_many fails only the
    jobs bound for it, and the others are written and said so."""

    def setUp(self):
        self.p = Procs()
        # A node timeout past the test: the others keep taking writes.
        self.ports, _ = start_cluster(self.p, 60000)

    def tearDown(self):
        self.p.stop()

    def node_of(self, hashed):
        """The master of the keys whose slot is from `hashed` (a key's hash
        tag, or the whole key without one)."""
        slot = delayq.keys.crc16(hashed.encode()) % 16384
        return next(i for i, (lo, hi) in enumerate(BOUNDS) if lo <= slot <= hi)

    def test_enqueue_many_fails_only_the_jobs_of_a_master_out_of_reach(self):
        q, n = "orders", 12
        with delayq.Client(cluster=True, nodes=["127.0.0.1:%d" % p for p in self.ports],
                           connect_timeout_ms=1000) as dq:
            dq.set_partitions(q, n)
            dq.enqueue(q, "t", id="first", delay=60000)   # registered, count read
            # The victim holds partitions, but neither the queue's meta nor
            # the registry (a call needs both before it sends a job).
            keep = {self.node_of(q), self.node_of(delayq.keys.registry_key("dq"))}
            victim = next(i for i in range(3) if i not in keep)
            on_victim = {p for p in range(n)
                         if self.node_of(delayq.keys.tag(q, p, n)) == victim}
            self.assertTrue(on_victim)
            self.p.procs[victim].kill()
            self.p.procs[victim].wait()
            jobs = [{"type": "t", "id": "job:%d" % i, "delay": 60000} for i in range(60)]
            got = dq.enqueue_many(q, jobs)
            down = [j["id"] for j in jobs if delayq.keys.partition_of(j["id"], n) in on_victim]
            self.assertTrue(0 < len(down) < 60, len(down))
            for j, e in zip(jobs, got):
                if j["id"] in down:
                    self.assertIsInstance(e.error, delayq.ConnectError, j["id"])
                    self.assertIn(str(self.ports[victim]), str(e.error))
                else:
                    self.assertTrue(e.ok, (j["id"], e.error))
                    self.assertEqual(dq.show(q, j["id"]).type, "t")
            # Again, after the slot map was read again: the same answer.
            again = dq.enqueue_many(q, [{"type": "t", "id": down[0]},
                                        {"type": "t", "id": "late", "delay": 60000}])
            self.assertIsInstance(again[0].error, delayq.ConnectError)
            if delayq.keys.partition_of("late", n) not in on_victim:
                self.assertTrue(again[1].ok, again[1].error)
            print("enqueue_many with a master down: %d jobs scheduled, %d refused (%s)"
                  % (60 - len(down), len(down), got[jobs.index(next(
                      j for j in jobs if j["id"] in down))].error), file=sys.stderr)


class ClusterMasterLoadingTest(unittest.TestCase):
    """3 masters, one restarted and still loading its data (it answers
    LOADING): enqueue_many waits for it, and the jobs the others took are
    not sent again (generated ids would be added twice)."""

    def setUp(self):
        self.p = Procs()
        self.ports, self.nodes = start_cluster(self.p, 60000)

    def tearDown(self):
        self.p.stop()

    def test_enqueue_many_waits_for_a_loading_master_and_adds_each_job_once(self):
        q, n, jobs = "orders", 12, 60
        node_of = ClusterMasterDownTest.node_of
        with delayq.Client(cluster=True, nodes=["127.0.0.1:%d" % p for p in self.ports],
                           connect_timeout_ms=20000) as dq:
            dq.set_partitions(q, n)
            dq.enqueue(q, "t", id="first", delay=60000)   # registered, count read
            keep = {node_of(self, q), node_of(self, delayq.keys.registry_key("dq"))}
            victim = next(i for i in range(3) if i not in keep)
            self.assertTrue(any(node_of(self, delayq.keys.tag(q, p, n)) == victim
                                for p in range(n)))
            # Data of its own for the victim to load, about 4 s at 100 us a
            # key (clients answered LOADING every 1 KiB read): keys of a
            # hash tag of its slots.
            tag = next(t for t in ("f%d" % k for k in range(100)) if node_of(self, t) == victim)
            v = self.nodes[victim]
            for c in range(0, 20000, 1000):
                v.mset({"{%s}:%d" % (tag, k): "x" for k in range(c, c + 1000)})
            v.execute_command("SAVE")
            v.close()
            self.p.procs[victim].kill()
            self.p.procs[victim].wait()
            self.p.restart(victim, "--key-load-delay", "100",
                           "--loading-process-events-interval-bytes", "1024")
            raw = redis.Redis(port=self.ports[victim])

            def loading():
                try:
                    raw.ping()
                except redis.exceptions.BusyLoadingError:
                    return True
                self.fail("the victim answered before it was seen loading")
            wait_for(loading, "the victim answering LOADING")
            t0 = time.monotonic()
            got = dq.enqueue_many(q, [{"type": "t", "delay": 60000} for _ in range(jobs)])
            took = time.monotonic() - t0
            for e in got:
                self.assertTrue(e.ok, e.error)
            self.assertEqual(len({e.id for e in got}), jobs)
            on_victim = sum(1 for e in got
                            if node_of(self, delayq.keys.tag(q, int(e.id) % n, n)) == victim)
            self.assertTrue(0 < on_victim < jobs, on_victim)
            # Each job once in the queue: the others' calls were not sent again.
            self.assertEqual(dq.stats(q).delayed, jobs + 1)
            print("enqueue_many with a master loading: %d jobs, %d of them for it, added once "
                  "each in %.1f s" % (jobs, on_victim, took), file=sys.stderr)


class SentinelTest(unittest.TestCase):
    def test_master_found_through_the_sentinels(self):
        p = Procs()
        try:
            mport, sport = free_port(), free_port()
            p.start("master", "--port", str(mport), "--bind", "127.0.0.1")
            wait_for(redis.Redis(port=mport).ping, "the master")
            sconf = os.path.join(p.tmp, "sentinel.conf")
            with open(sconf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\nsentinel monitor jobs 127.0.0.1 %d 1\n"
                        % (sport, mport))
            d = os.path.join(p.tmp, "s")
            os.mkdir(d)
            p.procs.append(subprocess.Popen([SERVER, sconf, "--sentinel"], cwd=d,
                                            stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            sent = redis.Redis(port=sport)
            wait_for(lambda: sent.execute_command("SENTINEL", "get-master-addr-by-name",
                                                  "jobs"), "the sentinel")
            conf = os.path.join(p.tmp, "s.conf")
            with open(conf, "w") as f:
                f.write('redis = {\n  sentinel = {\n    master = "jobs";\n'
                        '    nodes = [ "127.0.0.1:%d" ];\n  };\n};\n' % sport)
            with delayq.Client.from_config(conf) as dq:
                self.assertEqual(dq.enqueue("q", "t", b"x", id="s1"), "s1")
            self.assertIsNotNone(redis.Redis(port=mport).hget("dq:{q}:jobs", "s1"))
        finally:
            p.stop()


class TlsTest(unittest.TestCase):
    def test_tls_with_a_client_certificate(self):
        p = Procs()
        try:
            certs = os.path.join(p.tmp, "certs")
            os.mkdir(certs)
            subprocess.run(["sh", os.path.join(HERE, "..", "tls-certs.sh"), certs], check=True,
                           stdout=subprocess.DEVNULL)
            port = free_port()
            c = lambda n: os.path.join(certs, n)  # noqa: E731
            p.start("tls", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                    "--tls-cert-file", c("server.crt"), "--tls-key-file", c("server.key"),
                    "--tls-ca-cert-file", c("ca.crt"), "--tls-auth-clients", "yes")
            conf = os.path.join(p.tmp, "tls.conf")
            with open(conf, "w") as f:
                f.write('redis = {\n  host = "localhost";\n  port = %d;\n  tls = {\n'
                        '    ca_file = "%s";\n    cert_file = "%s";\n    key_file = "%s";\n'
                        '  };\n};\n' % (port, c("ca.crt"), c("client.crt"), c("client.key")))
            wait_for(lambda: socket.create_connection(("127.0.0.1", port)).close() or True,
                     "the TLS port")
            with delayq.Client.from_config(conf) as dq:
                self.assertEqual(dq.enqueue("q", "t", b"x", id="tls1"), "tls1")
                self.assertTrue(dq.cancel("q", "tls1"))
            with open(conf, "w") as f:
                f.write('redis = {\n  host = "localhost";\n  port = %d;\n  tls = {\n'
                        '    ca_file = "%s";\n    cert_file = "%s";\n    key_file = "%s";\n'
                        '  };\n};\n' % (port, c("other-ca.crt"), c("client.crt"),
                                        c("client.key")))
            with delayq.Client.from_config(conf) as dq:
                with self.assertRaises(delayq.ConnectError):
                    dq.enqueue("q", "t", b"x", id="tls2")
        finally:
            p.stop()


if __name__ == "__main__":
    if not SERVER:
        print("python topology tests skipped: no redis-server")
        sys.exit(77)
    import warnings
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main()
