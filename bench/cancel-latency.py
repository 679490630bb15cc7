#!/usr/bin/python3
"""How long a cancelled running job takes to stop: p50, p99 and max over
N cancels (200 by default), for the two ways a run is stopped:

  exec    the exec handler runs a program that sleeps; the time from
          `delayq cancel` returning to the program's process being gone
          (killed with its process group and reaped);
  watch   an in-process handler (the test handler's watch:N payload,
          which asks host->cancelled every 5 ms); the time from
          `delayq cancel` returning to the handler's "end" line.

    /usr/bin/python3 bench/cancel-latency.py --build BUILDDIR [--n 200]
        [--json FILE]

It starts its own redis-server (unix socket) and the built delayqd with
one worker, one job at a time: add a job, wait until it runs, cancel it
with the built `delayq`, then time the stop.  The test handler comes from
`make check` (BUILDDIR/tests/plugins/.libs).  Everything it starts is
stopped on the way out.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import redis

QUEUE = "orders"


def die(msg):
    print("cancel-latency: " + msg, file=sys.stderr)
    sys.exit(1)


def gone(pid):
    """The process is dead: no longer there, or a zombie (killed, its
    parent about to collect it)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.0005)
    die("timed out waiting for " + what)


class Daemon:
    def __init__(self, build, work, handler):
        self.build, self.work = build, work
        self.sock = os.path.join(work, "redis.sock")
        server = os.environ.get("REDIS_SERVER") or "redis-server"
        self.redis = subprocess.Popen(
            [server, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", work],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.r = redis.Redis(unix_socket_path=self.sock)
        wait_for(self.ping, 10, "redis-server")
        conf = os.path.join(work, "delayqd.conf")
        with open(conf, "w") as f:
            f.write('redis = { unix_socket = "%s"; };\n' % self.sock)
            f.write('handler_dir = "%s";\n' % os.path.join(build, "tests", "plugins", ".libs"))
            f.write('queues = ( { name = "%s"; workers = 1; lease = "120s"; batch = 1; } );\n'
                    % QUEUE)
            f.write("handlers = ( %s );\n" % handler)
        self.log = open(os.path.join(work, "delayqd.log"), "w")
        self.proc = subprocess.Popen([os.path.join(build, "delayqd"), "-f", "-c", conf],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for(lambda: b"ready" in open(self.log.name, "rb").read(), 10, "delayqd")

    def ping(self):
        try:
            return self.r.ping()
        except (redis.ConnectionError, OSError):
            return False

    def cli(self, *args):
        subprocess.run([os.path.join(self.build, "delayq"), "-s", self.sock] + list(args),
                       check=True, stdout=subprocess.DEVNULL)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.redis.terminate()
        self.redis.wait(10)
        self.log.close()


def read_pid(path):
    try:
        with open(path) as f:
            v = f.read().strip()
        return int(v) if v else 0
    except (FileNotFoundError, ValueError):
        return 0


def run_exec(build, work, n):
    top = os.path.abspath(os.path.join(build))
    pidfile = os.path.join(work, "prog.pid")
    script = "echo $$ > %s; exec sleep 60" % pidfile
    handler = ('{ type = "*"; file = "%s/handlers/.libs/exec.so"; timeout = "100s";\n'
               '  settings = { argv = ["/bin/sh", "-c", "%s"]; }; }' % (top, script))
    d = Daemon(build, work, handler)
    out = []
    try:
        for i in range(n):
            if os.path.exists(pidfile):
                os.unlink(pidfile)
            d.cli("add", "-q", QUEUE, "-t", "t", "--id", "e%d" % i, "x")
            pid = wait_for(lambda: read_pid(pidfile), 10, "the program to start")
            d.cli("cancel", "-q", QUEUE, "e%d" % i)
            t0 = time.monotonic()
            wait_for(lambda: gone(pid), 10, "the program to stop")
            out.append((time.monotonic() - t0) * 1000)
    finally:
        d.stop()
    return out


def ends(record, ident):
    with open(record) as f:
        return any(l.startswith(ident + " ") and " end " in l for l in f)


def run_watch(build, work, n):
    record = os.path.join(work, "record.log")
    handler = ('{ type = "*"; file = "testhandler.so"; timeout = "100s";\n'
               '  settings = { record = "%s"; }; }' % record)
    d = Daemon(build, work, handler)
    out = []
    try:
        for i in range(n):
            ident = "w%d" % i
            d.cli("add", "-q", QUEUE, "-t", "t", "--id", ident, "watch:60000")
            wait_for(lambda: os.path.exists(record) and
                     any(l.startswith(ident + " ") for l in open(record)), 10, "the run")
            d.cli("cancel", "-q", QUEUE, ident)
            t0 = time.monotonic()
            wait_for(lambda: ends(record, ident), 10, "the handler to return")
            out.append((time.monotonic() - t0) * 1000)
    finally:
        d.stop()
    return out


def summary(ms):
    s = sorted(ms)
    return {"n": len(s), "p50_ms": round(statistics.median(s), 2),
            "p99_ms": round(s[min(len(s) - 1, int(len(s) * 0.99))], 2),
            "max_ms": round(s[-1], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--json")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.path.exists(os.path.join(build, "tests", "plugins", ".libs", "testhandler.so")):
        die("no test handler in %s: run make check (or make tests/plugins/testhandler.la)"
            % build)
    results = {}
    for name, fn in (("exec", run_exec), ("watch", run_watch)):
        work = tempfile.mkdtemp(prefix="dq-cancel-")
        try:
            results[name] = summary(fn(build, work, a.n))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        r = results[name]
        print("%-5s  n=%d  p50 %.2f ms  p99 %.2f ms  max %.2f ms"
              % (name, r["n"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
