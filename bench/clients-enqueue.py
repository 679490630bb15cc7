#!/usr/bin/python3
"""Enqueue from each client, side by side on this machine: N jobs (32-byte
payload, due in 30 minutes, generated ids) one call at a time and in one
bulk call, through the Python client, libdelayq and Sidekiq (push,
push_bulk), into a private redis-server on a unix socket.

    python3 bench/clients-enqueue.py --build BUILD [-n 10000] [--rounds 3]

For each row and round: FLUSHALL, CONFIG RESETSTAT, the run, then INFO
commandstats: jobs/s (client wall time), Redis's time in commands per job
(commandstats, each command once: see command_usec) and redis-server's
CPU per job (INFO cpu, which also counts reading and writing the
sockets).  Prints the median of the rounds;
the rows alternate within each round.  Sidekiq is skipped (one line) when
ruby or its sidekiq gem is missing (apt-get install ruby-sidekiq).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
PAYLOAD = b"0123456789abcdef0123456789abcdef"


def python_run(sock, mode, n):
    import delayq
    with delayq.Client.from_url("unix://" + sock) as dq:
        jobs = [{"type": "bench", "payload": PAYLOAD, "delay": 1800000} for _ in range(n)]
        t0 = time.monotonic()
        if mode == "one":
            for _ in range(n):
                dq.enqueue("bench", "bench", PAYLOAD, delay=1800000)
        else:
            got = dq.enqueue_many("bench", jobs)
            bad = [e.error for e in got if not e.ok]
            if bad:
                raise RuntimeError(str(bad[0]))
        return time.monotonic() - t0


def external_run(argv):
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def command_usec(r):
    """Redis's time in commands (INFO commandstats), each counted once: a
    script's usec already holds the commands it called (which commandstats
    also lists on their own), so with EVALSHA only the top-level commands
    a delayq client sends count: evalsha and the registration's."""
    stats = r.info("commandstats")
    stats = {k.replace("cmdstat_", ""): v for k, v in stats.items()
             if not k.startswith("cmdstat_config")}
    if "evalsha" in stats:
        return sum(stats.get(k, {}).get("usec", 0) for k in ("evalsha", "sadd", "hsetnx",
                                                             "hmget", "ping", "time"))
    return sum(v.get("usec", 0) for v in stats.values())


def cpu_usec(r):
    """redis-server's CPU (user + sys) so far, in µs."""
    info = r.info("cpu")
    return (info["used_cpu_user"] + info["used_cpu_sys"]) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the build directory")
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER")
                    or shutil.which("redis-server"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "pyclient"))
    cbin = os.path.join(a.build, "bench", "client-enqueue")
    rows = [("python enqueue (one at a time)", lambda s: python_run(s, "one", a.n)),
            ("python enqueue_many (bulk)", lambda s: python_run(s, "bulk", a.n)),
            ("libdelayq dq_enqueue (one at a time)",
             lambda s: external_run([cbin, s, "one", str(a.n)])),
            ("libdelayq dq_enqueue_many (bulk)",
             lambda s: external_run([cbin, s, "bulk", str(a.n)]))]
    ruby = shutil.which("ruby")
    if ruby and subprocess.run([ruby, "-e", "require 'sidekiq'"], capture_output=True).returncode == 0:
        rb = os.path.join(HERE, "sidekiq-enqueue.rb")
        ver = subprocess.run([ruby, "-e", "require 'sidekiq'; print Sidekiq::VERSION"],
                             capture_output=True, text=True).stdout
        rows += [("sidekiq %s push (one at a time)" % ver,
                  lambda s: external_run([ruby, rb, s, "one", str(a.n)])),
                 ("sidekiq %s push_bulk (bulk)" % ver,
                  lambda s: external_run([ruby, rb, s, "bulk", str(a.n)]))]
    else:
        print("sidekiq rows skipped: no ruby or no sidekiq gem (apt-get install ruby-sidekiq)")
    tmp = tempfile.mkdtemp(prefix="clients-enqueue.")
    sock = os.path.join(tmp, "redis.sock")
    proc = subprocess.Popen([a.redis_server, "--port", "0", "--unixsocket", sock, "--save", "",
                             "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(unix_socket_path=sock)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        results = {name: ([], [], []) for name, _ in rows}
        for rnd in range(a.rounds):
            order = rows if rnd % 2 == 0 else list(reversed(rows))
            for name, fn in order:
                r.flushall()
                r.config_resetstat()
                cpu0 = cpu_usec(r)
                secs = fn(sock)
                cpu = cpu_usec(r) - cpu0
                usec = command_usec(r)
                results[name][0].append(a.n / secs)
                results[name][1].append(usec / a.n)
                results[name][2].append(cpu / a.n)
        print("%d jobs per run, %d rounds, medians (redis-server %s)"
              % (a.n, a.rounds, r.info("server")["redis_version"]))
        print("| client | jobs/s | Redis command µs/job | redis-server CPU µs/job |")
        print("| --- | ---: | ---: | ---: |")
        for name, _ in rows:
            js, us, cpu = results[name]
            print("| %s | %s | %.1f | %.1f |" % (name, format(int(statistics.median(js)), ","),
                                                 statistics.median(us), statistics.median(cpu)))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
