#!/usr/bin/python3
"""Across languages with the real delayqd: jobs enqueued from Python (raw
bytes, every byte value) and from C (the delayq command line, libdelayq)
into a queue of 3 partitions each run exactly once with their payload
byte for byte; a job that C made and that died is listed and requeued by
Python and then runs; a schedule added from Python fires in delayqd; a
job added by Python is cancelled by Node, and jobs from Node, C and Python
run once with their bytes; jobs from Python and C past their expiry in a
paused queue are ended by the reaper and never run.

The exec handler runs /bin/sh, which appends the payload to a file named
after the job: a job run twice would double its file."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from datetime import timedelta

import redis

import delayq

TOP = os.path.abspath(os.environ.get("TOP_BUILDDIR", "."))
SERVER = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
Q = "xlang"


def wait_for(fn, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pydaemon.")
        self.out = os.path.join(self.tmp, "out")
        os.mkdir(self.out)
        self.flag = os.path.join(self.tmp, "flaky-fails")
        self.sock = os.path.join(self.tmp, "redis.sock")
        self.procs = []
        self.procs.append(subprocess.Popen(
            [SERVER, "--port", "0", "--unixsocket", self.sock, "--save", "", "--appendonly",
             "no", "--dir", self.tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        r = redis.Redis(unix_socket_path=self.sock)
        wait_for(lambda: os.path.exists(self.sock) and r.ping(), "redis-server")
        handlers = os.path.realpath(os.path.join(TOP, "handlers", ".libs"))
        os.chmod(handlers, 0o755)
        os.chmod(os.path.join(handlers, "exec.so"), 0o755)
        write = 'cat >> "%s/$DELAYQ_JOB_ID"' % self.out
        flaky = 'if [ -e "%s" ]; then exit 1; fi; %s' % (self.flag, write)
        self.conf = os.path.join(self.tmp, "delayqd.conf")
        with open(self.conf, "w") as f:
            f.write('redis = { unix_socket = "%s"; };\nhandler_dir = "%s";\n'
                    'queues = ( { name = "%s"; workers = 2; batch = 8; lease = "30s";\n'
                    '             partitions = 3; max_attempts = 1; } );\n'
                    'handlers = (\n'
                    '  { type = "write"; file = "exec.so"; timeout = "10s";\n'
                    '    settings = { argv = [ "/bin/sh", "-c", "%s" ]; }; },\n'
                    '  { type = "flaky"; file = "exec.so"; timeout = "10s";\n'
                    '    settings = { argv = [ "/bin/sh", "-c", "%s" ]; }; }\n'
                    ');\nreaper = { interval = "1s"; };\nlog = { level = "info"; };\n'
                    % (self.sock, handlers, Q, write.replace('"', '\\"'),
                       flaky.replace('"', '\\"')))
        self.dq = delayq.Client.from_config(self.conf)
        self.dq.set_partitions(Q, 3)

    def start_daemon(self):
        with open(os.path.join(self.tmp, "delayqd.log"), "w") as log:
            self.daemon = subprocess.Popen([os.path.join(TOP, "delayqd"), "-f", "-c", self.conf],
                                           stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.daemon)

    def running(self, fn):
        """fn(), failing at once when delayqd has exited."""
        def check():
            self.assertIsNone(self.daemon.poll(), "delayqd exited")
            return fn()
        return check

    def tearDown(self):
        if os.environ.get("KEEP"):
            print("kept", self.tmp)
            for p in self.procs:
                p.terminate()
            return
        log = os.path.join(self.tmp, "delayqd.log")
        if os.path.exists(log) and os.path.getsize(log):
            with open(log) as f:
                sys.stderr.write("delayqd's log:\n" + f.read()[-3000:])
        self.dq.close()
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args, stdin=None):
        return subprocess.run([os.path.join(TOP, "delayq"), "-s", self.sock] + list(args),
                              input=stdin, capture_output=True, check=True).stdout.decode().strip()

    def read(self, job_id):
        path = os.path.join(self.out, job_id)
        return open(path, "rb").read() if os.path.exists(path) else None

    def test_jobs_from_python_and_c_run_once_with_their_bytes(self):
        want = {}
        for i in range(20):
            payload = bytes((i * 37 + k) % 256 for k in range(64)) + b"\x00end"
            want[self.dq.enqueue(Q, "write", payload, id="py:%d" % i)] = payload
        for e in self.dq.enqueue_many(Q, [{"type": "write", "payload": bytes([i, 0, 255])}
                                          for i in range(20)]):
            self.assertTrue(e.ok, e.error)
            want[e.id] = self.dq.show(Q, e.id).payload
        for i in range(10):
            payload = bytes(range(256))[i:] + b"\n"
            want[self.cli("add", "-q", Q, "-t", "write", "--id", "c:%d" % i, "-",
                          stdin=payload)] = payload
        # a job that C made and that dies (its handler fails while the flag is there)
        open(self.flag, "w").close()
        self.cli("add", "-q", Q, "-t", "flaky", "--id", "c:flaky", "--max-attempts", "1",
                 "from C")
        self.start_daemon()
        wait_for(self.running(lambda: all(self.read(k) is not None for k in want)),
                 "the jobs to run")
        wait_for(lambda: self.dq.stats(Q).dead == 1, "the flaky job to die")
        page = self.dq.dead_list(Q)
        self.assertEqual([d.id for d in page.jobs], ["c:flaky"])
        self.assertEqual(page.jobs[0].payload_bytes, 6)
        os.unlink(self.flag)
        self.dq.requeue(Q, "c:flaky")
        wait_for(lambda: self.read("c:flaky") is not None, "the requeued job")
        time.sleep(1.5)   # a second run, were there one, would show by now
        for job_id, payload in want.items():
            self.assertEqual(self.read(job_id), payload, job_id)
        self.assertEqual(self.read("c:flaky"), b"from C")
        s = self.dq.stats(Q)
        self.assertEqual((s.delayed, s.due, s.processing, s.dead), (0, 0, 0, 0))

    def test_across_python_node_and_c(self):
        """A job added by Python is cancelled by Node; jobs from Node, C and
        Python run once, each with its bytes."""
        pkg = os.path.join(TOP, "clients", "node")
        if not shutil.which("node") or not os.path.isfile(os.path.join(pkg, "node_modules",
                                                                        ".delayq-ready")):
            self.skipTest("no node, or the Node client's ioredis is not installed in %s "
                          "(tests/node-client.sh --install installs it)" % pkg)
        self.dq.enqueue(Q, "write", b"never", id="py:cancel-me", delay=60000)
        node = r"""
const { Client } = require(process.env.DQ_NODE_PKG);
(async () => {
  const dq = Client.fromUrl('unix://' + process.env.DQ_SOCK);
  const cancelled = await dq.cancel('%s', 'py:cancel-me');
  for (let i = 0; i < 10; i++) {
    const b = Buffer.alloc(48);
    for (let k = 0; k < 48; k++) b[k] = (i * 53 + k) %% 256;
    await dq.enqueue('%s', 'write', b, { id: 'node:' + i });
  }
  console.log(JSON.stringify({ cancelled }));
  await dq.close();
})().catch((e) => { console.error(e.message); process.exit(1); });
""" % (Q, Q)
        out = subprocess.run(["node", "-e", node], capture_output=True, check=True,
                             env=dict(os.environ, DQ_NODE_PKG=os.path.abspath(pkg),
                                      DQ_SOCK=self.sock)).stdout.decode()
        self.assertEqual(out.strip(), '{"cancelled":true}')
        self.assertIsNone(self.dq.show(Q, "py:cancel-me"))
        want = {"node:%d" % i: bytes((i * 53 + k) % 256 for k in range(48)) for i in range(10)}
        for i in range(5):
            payload = bytes(range(256))[i * 7:] + b"\x00"
            want[self.cli("add", "-q", Q, "-t", "write", "--id", "c:%d" % i, "-",
                          stdin=payload)] = payload
            want[self.dq.enqueue(Q, "write", payload[::-1], id="py:%d" % i)] = payload[::-1]
        self.start_daemon()
        wait_for(self.running(lambda: all(self.read(k) is not None for k in want)),
                 "the jobs to run")
        time.sleep(1.5)   # a second run, were there one, would show by now
        for job_id, payload in want.items():
            self.assertEqual(self.read(job_id), payload, job_id)
        self.assertIsNone(self.read("py:cancel-me"))
        s = self.dq.stats(Q)
        self.assertEqual((s.delayed, s.due, s.processing, s.dead), (0, 0, 0, 0))

    def test_expired_jobs_never_run(self):
        """Jobs from Python and C that pass their expiry while the queue is
        paused are ended by delayqd's reaper (dead "expired", or deleted)
        and none runs after resume; the jobs without one run."""
        self.dq.pause(Q)
        now = self.dq.server_time_ms()
        self.dq.enqueue(Q, "write", b"late", id="py:late", ttl=300)
        self.dq.enqueue(Q, "write", b"gone", id="py:gone", ttl=timedelta(milliseconds=300),
                        on_expire="drop")
        got = self.dq.enqueue_many(Q, [
            {"type": "write", "payload": b"many", "id": "py:many", "expire_at": now + 300},
            {"type": "write", "payload": b"runs", "id": "py:runs", "ttl": timedelta(hours=1)}])
        self.assertTrue(all(e.ok for e in got), [e.error for e in got])
        self.cli("add", "-q", Q, "-t", "write", "--id", "c:late", "--ttl", "300ms", "from C")
        self.cli("add", "-q", Q, "-t", "write", "--id", "c:runs", "from C")
        j = self.dq.show(Q, "c:late")
        self.assertEqual((j.expire_at_ms, j.on_expire), (j.due_ms + 300, "dead"))
        self.start_daemon()
        wait_for(self.running(lambda: self.dq.stats(Q).jobs_expired == 4),
                 "the reaper to end the expired jobs")
        self.dq.resume(Q)
        wait_for(self.running(lambda: self.read("py:runs") and self.read("c:runs")),
                 "the jobs without an expiry to run")
        time.sleep(1.5)   # an expired job run after all would show by now
        for job_id in ("py:late", "py:gone", "py:many", "c:late"):
            self.assertIsNone(self.read(job_id), job_id)
        page = self.dq.dead_list(Q)
        self.assertEqual(sorted((d.id, d.last_error) for d in page.jobs),
                         [("c:late", "expired"), ("py:late", "expired"), ("py:many", "expired")])
        self.assertIsNone(self.dq.show(Q, "py:gone"))
        s = self.dq.stats(Q)
        self.assertEqual((s.delayed, s.due, s.processing, s.dead, s.jobs_expired),
                         (0, 0, 0, 3, 4))

    def test_a_schedule_added_from_python_fires_in_delayqd(self):
        self.start_daemon()
        # added once the workers listen on the wake channels: a tick fired
        # before a worker's first subscription is heard at its next look
        # (up to 60 s when idle; docs/protocol.md, the wake channel)
        log = os.path.join(self.tmp, "delayqd.log")
        wait_for(self.running(lambda: "ready:" in open(log).read()), "delayqd to be ready")
        first = self.dq.schedule_add(Q, "tick", "write", "@every 1s", b"scheduled")
        wait_for(self.running(lambda: any(n.startswith("tick@") for n in os.listdir(self.out))),
                 "a tick", seconds=20)
        name = sorted(n for n in os.listdir(self.out) if n.startswith("tick@"))[0]
        self.assertTrue(delayq.keys.is_schedule_id(name), name)
        # the shell makes the file before cat writes to it
        wait_for(lambda: self.read(name) == b"scheduled", "the tick's payload", seconds=10)
        self.assertEqual(self.read(name), b"scheduled")
        self.assertGreaterEqual(first, 0)


if __name__ == "__main__":
    if not SERVER:
        print("python daemon tests skipped: no redis-server")
        sys.exit(77)
    if not os.path.exists(os.path.join(TOP, "handlers", ".libs", "exec.so")):
        print("python daemon tests skipped: the exec handler is not built")
        sys.exit(77)
    import warnings
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main()
