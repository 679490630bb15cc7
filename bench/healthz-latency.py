#!/usr/bin/python3
"""/healthz latency of the admin listener: p50, p99 and max of 1,000
requests (each on a new connection, as a liveness probe asks; one every
10 ms, so that they span about 10 s of what runs beside them), in three
cases:

  1. alone;
  2. with 100 clients trickling a request one byte every 4 s (each
     reconnecting when the listener closes it);
  3. with the dashboard open on a queue of 100,000 dead jobs (its dead
     tab fetched every 3 s, as the page's own refresh does, and the
     overview every 3 s), the 100 trickling clients gone.

    /usr/bin/python3 bench/healthz-latency.py --build BUILDDIR [--n 1000]
        [--dead 100000] [--interval-ms 10] [--json FILE]

It starts its own redis-server (unix socket) and the built delayqd
(BUILDDIR/delayqd) with the dashboard on and the test handler
(BUILDDIR/tests/plugins/.libs, from `make check`); the dead jobs are
enqueued with the enqueue_many script (EVALSHA through python3-redis)
with payload "fail" and one attempt, and die in the workers.  Everything
it starts is stopped on the way out.
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, "..")
QUEUE = "orders"


def die(msg):
    print("healthz-latency: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script_text(build, name):
    """A script as delayqd sends it: the build's scripts/NAME (the prelude's
    part it uses and its body, as build-aux/embed-scripts.sh made it)."""
    with open(os.path.join(build, "scripts", name)) as f:
        return f.read()


class Setup:
    def __init__(self, build, work):
        self.build, self.work = build, work
        self.sock = os.path.join(work, "redis.sock")
        self.redis_proc = self.daemon = None

    def start(self):
        server = os.environ.get("REDIS_SERVER") or "redis-server"
        self.redis_proc = subprocess.Popen(
            [server, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", self.work],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(unix_socket_path=self.sock)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.r.ping()
                break
            except (redis.ConnectionError, OSError):
                if time.monotonic() > deadline:
                    die("redis-server did not start")
                time.sleep(0.1)
        self.token = os.urandom(16).hex()
        token = os.path.join(self.work, "ui.token")
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, self.token.encode())
        os.close(fd)
        handlers = os.path.realpath(os.path.join(self.build, "tests", "plugins", ".libs"))
        if not os.path.exists(os.path.join(handlers, "testhandler.so")):
            die("no %s/testhandler.so: run make check in the build first" % handlers)
        for p in (handlers, os.path.join(handlers, "testhandler.so")):
            os.chmod(p, os.stat(p).st_mode & 0o755)
        self.port = free_port()
        conf = os.path.join(self.work, "delayqd.conf")
        with open(conf, "w") as f:
            f.write('redis = { unix_socket = "%s"; };\n' % self.sock)
            f.write('handler_dir = "%s";\n' % handlers)
            f.write('admin = { listen = "127.0.0.1:%d"; ui = true; token_file = "%s"; };\n'
                    % (self.port, token))
            f.write('queues = ( { name = "%s"; workers = 2; batch = 64; } );\n' % QUEUE)
            f.write('handlers = ( { type = "*"; file = "testhandler.so"; timeout = "10s"; } );\n')
            f.write('reaper = { fsck_interval = "0"; };\n')
            f.write('log = { level = "warn"; target = "stderr"; };\n')
        self.log = open(os.path.join(self.work, "delayqd.log"), "w")
        self.daemon = subprocess.Popen([os.path.join(self.build, "delayqd"), "-f", "-c", conf],
                                       stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while get(self.port, "/healthz")[0] != 200:
            if time.monotonic() > deadline or self.daemon.poll() is not None:
                die("delayqd did not answer /healthz 200 (log: %s)" % self.log.name)
            time.sleep(0.1)

    def fill_dead(self, n):
        """n jobs due now that fail once and die (the test handler's "fail")."""
        sha = self.r.script_load(script_text(self.build, "enqueue_many.lua"))
        keys = ["dq:{%s}:%s" % (QUEUE, k)
                for k in ("jobs", "delayed", "processing", "dead", "meta", "lease")]
        body = b"\x96\xa6charge\xa4fail\x01"
        for start in range(0, n, 1000):
            args = [""]
            for i in range(start, min(n, start + 1000)):
                args += ["dead-%d" % i, "0", body]
            self.r.evalsha(sha, len(keys), *(keys + args))
        deadline = time.monotonic() + 600
        while self.r.zcard(keys[3]) < n:
            if time.monotonic() > deadline:
                die("only %d of %d jobs dead after 600 s" % (self.r.zcard(keys[3]), n))
            time.sleep(0.5)

    def stop(self):
        for p in (self.daemon, self.redis_proc):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def get(port, path, headers=None, timeout=10, body=False):
    """(status, seconds) of one GET on a new connection, and with `body`
    the count of dead jobs' ids in the answer; status 0 on failure."""
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path, headers=headers or {})
        resp = c.getresponse()
        data = resp.read()
        c.close()
        took = time.monotonic() - t0
        return (resp.status, took, data.count(b">dead-")) if body else (resp.status, took)
    except (OSError, http.client.HTTPException):
        took = time.monotonic() - t0
        return (0, took, 0) if body else (0, took)


def probe(port, n, interval):
    """p50, p99, max (ms) and the failures of n /healthz requests, one
    every `interval` seconds (so that they span what runs beside them)."""
    times, failed = [], 0
    for _ in range(n):
        status, took = get(port, "/healthz")
        failed += status != 200
        times.append(took * 1000)
        time.sleep(max(0.0, interval - took))
    times.sort()
    return {"p50_ms": times[len(times) // 2], "p99_ms": times[int(len(times) * 0.99) - 1],
            "max_ms": times[-1], "failed": failed, "n": n}


class Trickle(threading.Thread):
    """`n` clients sending a request one byte every 4 s, reconnecting."""

    REQ = b"GET /ui/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 200 + b"\r\n\r\n"

    def __init__(self, port, n):
        super().__init__(daemon=True)
        self.port, self.n, self.stop_flag, self.reconnects = port, n, False, 0

    def run(self):
        socks = [None] * self.n
        sent = [0] * self.n
        nxt = [time.monotonic() + i * 4.0 / self.n for i in range(self.n)]
        while not self.stop_flag:
            now = time.monotonic()
            for i in range(self.n):
                if now < nxt[i]:
                    continue
                s = socks[i]
                try:
                    if s is not None:
                        s.setblocking(False)
                        try:
                            if s.recv(1, socket.MSG_PEEK) == b"":
                                raise OSError("closed")
                        except BlockingIOError:
                            pass
                        s.setblocking(True)
                    else:
                        raise OSError("none")
                except OSError:
                    if s is not None:
                        s.close()
                        self.reconnects += 1
                    s = socket.create_connection(("127.0.0.1", self.port))
                    socks[i], sent[i] = s, 0
                try:
                    s.send(self.REQ[sent[i]:sent[i] + 1])
                    sent[i] += 1
                except OSError:
                    pass
                nxt[i] = now + 4.0
            time.sleep(0.01)
        for s in socks:
            if s is not None:
                s.close()


class Dashboard(threading.Thread):
    """One dashboard window: the dead tab and the overview every 3 s."""

    def __init__(self, port, token):
        super().__init__(daemon=True)
        self.port, self.hdr, self.stop_flag = port, {"Authorization": "Bearer " + token}, False
        self.pages = []

    def run(self):
        while not self.stop_flag:
            for path in ("/ui/queues/%s?tab=dead" % QUEUE, "/ui/"):
                status, took, size = get(self.port, path, self.hdr, timeout=30, body=True)
                self.pages.append((path, status, took * 1000, size))
            time.sleep(3)


def row(name, r):
    print("%-42s p50 %6.2f ms  p99 %6.2f ms  max %7.2f ms  failed %d of %d"
          % (name, r["p50_ms"], r["p99_ms"], r["max_ms"], r["failed"], r["n"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--dead", type=int, default=100000)
    ap.add_argument("--interval-ms", type=float, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="healthz-latency.")
    s = Setup(os.path.abspath(a.build), work)
    out = {}
    try:
        s.start()
        out["alone"] = probe(s.port, a.n, a.interval_ms / 1000.0)
        row("alone", out["alone"])
        t = Trickle(s.port, 100)
        t.start()
        time.sleep(8)       # every trickling client connected, some displaced
        out["trickle100"] = probe(s.port, a.n, a.interval_ms / 1000.0)
        t.stop_flag = True
        t.join()
        out["trickle100"]["reconnects"] = t.reconnects
        row("100 trickling clients", out["trickle100"])
        t0 = time.monotonic()
        s.fill_dead(a.dead)
        print("%d dead jobs in %.1f s" % (a.dead, time.monotonic() - t0))
        d = Dashboard(s.port, s.token)
        d.start()
        time.sleep(4)
        out["dashboard_dead"] = probe(s.port, a.n, a.interval_ms / 1000.0)
        d.stop_flag = True
        d.join()
        pages = [p for p in d.pages if p[0].endswith("dead")]
        out["dashboard_dead"]["dead_page_ms"] = [round(p[2], 1) for p in pages]
        row("dashboard open on %d dead jobs" % a.dead, out["dashboard_dead"])
        print("dead tab answered in %s ms (statuses %s, %s dead ids listed)"
              % (", ".join("%.0f" % p[2] for p in pages), sorted({p[1] for p in pages}),
                 sorted({p[3] for p in pages})))
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
