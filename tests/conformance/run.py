#!/usr/bin/python3
"""The conformance cases (cases.json) run through the Python client.

    run.py [--cases FILE] [--redis-server PATH] [-v]

Starts two private redis-servers (unix sockets in a temporary directory:
one plain, one with requirepass for the wrong-password cases), runs every
case for each of its partition counts with a fresh client and a fresh
queue, and prints "N passed, N failed" last; exit 0 only when none failed.
README.md in this directory describes the format.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import redis

import delayq
from delayq import keys as dkeys

HERE = os.path.dirname(os.path.abspath(__file__))
PASSWORD = "conformance-secret"


class Server:
    """A private redis-server on a unix socket, stopped by pid."""

    def __init__(self, binary, tmp, name, password=None):
        self.dir = os.path.join(tmp, name)
        os.mkdir(self.dir)
        self.sock = os.path.join(self.dir, "redis.sock")
        argv = [binary, "--port", "0", "--unixsocket", self.sock, "--save", "",
                "--appendonly", "no", "--dir", self.dir]
        if password:
            argv += ["--requirepass", password]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.raw = redis.Redis(unix_socket_path=self.sock, password=password)
        for _ in range(200):
            try:
                self.raw.ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not answer at %s" % self.sock)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def payload_of(p):
    """A case's payload: a string is UTF-8, {"hex"} bytes, {"repeat","times"}."""
    if isinstance(p, str):
        return p.encode()
    if "hex" in p:
        return bytes.fromhex(p["hex"])
    return p["repeat"].encode() * p["times"]


class Run:
    def __init__(self, server, auth_server, missing_sock, verbose):
        self.server, self.auth_server, self.missing = server, auth_server, missing_sock
        self.verbose = verbose
        self.prefix = "dq"

    # ---- redis_state, record, wake_messages: read Redis directly -----------

    def tags(self):
        n = self.nparts
        return [dkeys.tag(self.queue, p, n) for p in range(n)]

    def redis_state(self):
        r = self.server.raw
        state = {"delayed": [], "processing": [], "dead": [], "records": 0, "where": {}}
        pin = b"delayq pin: keeps this key in its hash-table encoding (never a job)"
        for p, t in enumerate(self.tags()):
            base = "%s:{%s}:" % (self.prefix, t)
            sets = {"delayed": [base + "delayed"] + [base + "delayed:%d" % lv
                                                       for lv in range(10) if lv != 5],
                    "processing": [base + "processing"], "dead": [base + "dead"]}
            for name, ks in sets.items():
                for k in ks:
                    for m in r.zrange(k, 0, -1):
                        if m == pin:
                            continue
                        state[name].append(m.decode("latin-1"))
                        state["where"][m.decode("latin-1")] = p
            state["records"] += r.hlen(base + "jobs")
            for k in r.scan_iter(match=base.replace("{", "\\{").replace("}", "\\}")
                                 + "jobs:*", count=1000):
                suffix = k.decode()[len(base + "jobs:"):]
                if suffix == "" or suffix.isdigit():
                    state["records"] += r.hlen(k)
        for name in ("delayed", "processing", "dead"):
            state[name].sort()
        state["registered"] = bool(r.sismember("%s:queues" % self.prefix, self.queue))
        proto = r.hget("%s:{%s}:meta" % (self.prefix, self.queue), "protocol")
        state["protocol"] = proto.decode() if proto is not None else None
        return state

    def record(self, job_id):
        """The raw record of a job: its head and each element's MessagePack
        format name, and the decoded values."""
        n = self.nparts
        t = dkeys.tag(self.queue, dkeys.partition_of(job_id, n), n)
        key = "%s:{%s}:jobs" % (self.prefix, t)
        if job_id.isdigit():
            key += ":" + job_id[:-2]
        raw = self.server.raw.hget(key, job_id)
        if raw is None:
            return None
        colon = raw.index(b":", raw.index(b":") + 1) + 1
        formats, values = mp_describe(raw[colon:])
        names = ["type", "payload", "max_attempts", "created_ms", "due_offset_ms",
                 "last_error", "priority"]
        out = {"head": raw[:colon].decode(), "formats": formats}
        out.update(dict(zip(names, values)))
        return out

    # ---- the calls ----------------------------------------------------------

    def call(self, c, step):
        name, a = step["call"], step.get("args", {})
        q = self.queue
        if name == "enqueue":
            return c.enqueue(q, a.get("type"), payload_of(a.get("payload", "")), **self.job_kw(a))
        if name == "enqueue_many":
            jobs = []
            for j in a["jobs"]:
                d = dict(self.job_kw(j), type=j.get("type"), payload=payload_of(j.get("payload", "")))
                jobs.append(d)
            return [{"id": e.id, "error": e.error.code if e.error else None,
                     "generated": bool(e.id and e.id.isdigit())} for e in c.enqueue_many(q, jobs)]
        if name == "cancel":
            return c.cancel(q, a["id"])
        if name == "show":
            j = c.show(q, a["id"])
            return None if j is None else {
                "state": j.state, "type": j.type, "payload": j.payload, "attempts": j.attempts,
                "max_attempts": j.max_attempts, "priority": j.priority,
                "created_ms": j.created_ms, "due_ms": j.due_ms, "last_error": j.last_error,
                "fence": j.fence}
        if name == "run_now":
            return c.run_now(q, a["id"])
        if name == "stats":
            s = c.stats(q)
            return {"delayed": s.delayed, "due": s.due, "processing": s.processing,
                    "dead": s.dead, "expired": s.expired, "next_due_in_ms": s.next_due_in_ms,
                    "due_by_priority": s.due_by_priority, "jobs_cancelled": s.jobs_cancelled}
        if name in ("pause", "resume"):
            getattr(c, name)(q)
            return None
        if name == "paused":
            return c.paused(q) is not None
        if name == "dead_list":
            pg = c.dead_list(q, a.get("offset", 0), a.get("count", 100))
            return {"total": pg.total, "jobs": [
                {"id": d.id, "type": d.type, "attempts": d.attempts, "last_error": d.last_error,
                 "payload_bytes": d.payload_bytes} for d in pg.jobs]}
        if name in ("requeue", "purge"):
            return getattr(c, name)(q, a["id"])
        if name in ("requeue_all", "purge_all"):
            return getattr(c, name)(q)
        if name == "schedule_add":
            return c.schedule_add(q, a["name"], a["type"], a["expr"],
                                  payload_of(a.get("payload", "")), tz=a.get("tz"),
                                  max_attempts=a.get("max_attempts", 0),
                                  catch_up=a.get("catch_up", "one"),
                                  replace=a.get("replace", False))
        if name == "schedule_list":
            return [{"name": s.name, "expr": s.expr, "tz": s.tz, "type": s.type,
                     "payload": s.payload, "max_attempts": s.max_attempts,
                     "catch_up": s.catch_up} for s in c.schedule_list(q)]
        if name == "schedule_remove":
            return c.schedule_remove(q, a["name"])
        if name == "schedule_run_now":
            return c.schedule_run_now(q, a["name"])
        if name == "claim":
            return self.claim(c)
        if name == "claim_and_fail":
            return self.claim_and_fail(c, a.get("error", "failed"))
        if name == "redis_state":
            return self.redis_state()
        if name == "record":
            return self.record(a["id"])
        if name == "redis":
            argv = [bytes.fromhex(x["hex"]) if isinstance(x, dict)
                    else x.replace("$P", self.prefix).replace("$Q", self.queue)
                    for x in a["argv"]]
            rep = self.server.raw.execute_command(*argv)
            if isinstance(rep, bool):       # redis-py's for HEXISTS and the like
                return int(rep)
            return rep.decode() if isinstance(rep, bytes) else rep
        if name == "wake_messages":
            return self.wake_messages()
        raise KeyError("unknown call %s" % name)

    def job_kw(self, a):
        kw = {}
        if "delay_ms" in a:
            kw["delay"] = a["delay_ms"]
        if "at_ms" in a:
            kw["at"] = a["at_ms"]
        if "at_ms_from_now" in a:
            kw["at"] = self.server_now() + a["at_ms_from_now"]
        for k in ("id", "replace", "priority", "max_attempts"):
            if k in a:
                kw[k] = a[k]
        return kw

    def server_now(self):
        s, us = self.server.raw.time()
        return s * 1000 + us // 1000

    def claim_and_fail(self, c, error):
        """Claim the due jobs of every partition and fail each dead, through
        the scripts (claim, fail), as a consumer would; returns how many."""
        n, count = self.nparts, 0
        for p in range(n):
            ks, wake = dkeys.queue_keys(self.prefix, self.queue, p, n)
            r = c.conn.run("claim", ks, [1000, 60000])
            for i in range(int(r[2])):
                job_id, fence = r[3 + 4 * i], r[3 + 4 * i + 2]
                c.conn.run("fail", ks, [wake, job_id, fence, error, "dead", -1, 1000,
                                        3600000, 0, 1, 5])
                count += 1
        return count

    def claim(self, c):
        """Claim the due jobs of every partition (lease 60 s) and leave them
        processing; returns how many."""
        n, count = self.nparts, 0
        for p in range(n):
            ks, _ = dkeys.queue_keys(self.prefix, self.queue, p, n)
            count += int(c.conn.run("claim", ks, [1000, 60000])[2])
        return count

    def wake_messages(self):
        got, deadline = [], time.time() + 0.3
        while time.time() < deadline:
            m = self.pubsub.get_message(timeout=0.05)
            if m and m["type"] == "message":
                got.append(m["data"].decode())
        return {"count": len(got), "due_times": all(g.isdigit() for g in got)}

    # ---- one case ----------------------------------------------------------

    def run_case(self, case, n, idx):
        self.nparts = n
        self.queue = "cf%d-%d-%d" % (os.getpid() % 10000, idx, n)
        self.server.raw.flushall()
        mode = case.get("connect", "normal")
        if mode == "missing_socket":
            c = delayq.Client.from_url("unix://" + self.missing, connect_timeout_ms=500)
        elif mode == "wrong_password":
            c = delayq.Client.from_url("unix://" + self.auth_server.sock, password="wrong")
        else:
            c = delayq.Client.from_url("unix://" + self.server.sock)
        self.pubsub = None
        self.saved = {}
        try:
            if case.get("subscribe_wake"):
                self.pubsub = self.server.raw.pubsub()
                self.pubsub.subscribe(*["%s:{%s}:wake" % (self.prefix, t) for t in self.tags()])
                while self.pubsub.get_message(timeout=0.2):
                    pass
            if n != 1:
                c.set_partitions(self.queue, n)
            for k, step in enumerate(case["steps"]):
                why = self.run_step(c, step)
                if why:
                    return "step %d (%s): %s" % (k + 1, step["call"], why)
            return None
        finally:
            if self.pubsub:
                self.pubsub.close()
            c.close()

    def substitute(self, v):
        """A string "$name" (a value or an object's key) is what the step
        with save_as "name" returned."""
        if isinstance(v, str) and v.startswith("$") and v[1:] in self.saved:
            return self.saved[v[1:]]
        if isinstance(v, dict):
            return {self.substitute(k): self.substitute(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.substitute(x) for x in v]
        return v

    def run_step(self, c, step):
        step = self.substitute(step)
        try:
            got = self.call(c, step)
            if "save_as" in step:
                self.saved[step["save_as"]] = got
        except delayq.Error as e:
            if "raises" in step:
                return None if e.code == step["raises"] else \
                    "raised %s (%s), expected %s" % (e.code, e, step["raises"])
            return "raised %s: %s" % (e.code, e)
        if "raises" in step:
            return "returned %r, expected to raise %s" % (got, step["raises"])
        if "returns" in step and not same(got, step["returns"], exact=True):
            return "returned %r, expected %r" % (got, step["returns"])
        if "returns_fields" in step and not same(got, step["returns_fields"], exact=False):
            return "returned %r, expected fields %r" % (got, step["returns_fields"])
        if "returns_type" in step and not of_type(got, step["returns_type"]):
            return "returned %r, expected a %s" % (got, step["returns_type"])
        return None


def same(got, want, exact):
    """Equal; with exact false, objects compare only the keys `want` has
    (recursively).  bytes equal a string's UTF-8 or a {"hex"} value."""
    if isinstance(want, dict) and ("hex" in want or "repeat" in want) and isinstance(got, bytes):
        return got == payload_of(want)
    if isinstance(got, bytes):
        return isinstance(want, str) and got == want.encode()
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return False
        if exact and set(got) != set(want):
            return False
        return all(k in got and same(got[k], v, exact) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            same(g, w, exact) for g, w in zip(got, want))
    if isinstance(want, bool) or isinstance(got, bool):
        return type(want) is type(got) and want == got
    return got == want


def of_type(got, t):
    if t == "generated_id":
        return isinstance(got, str) and got.isdigit()
    if t == "time_ms":
        return isinstance(got, int) and not isinstance(got, bool) and got > 0
    if t == "schedule_run_id":
        return isinstance(got, str) and dkeys.is_schedule_id(got) and "@now-" in got
    return False


FORMATS = [(0x00, 0x7f, "fixint", 0), (0x80, 0x8f, "fixmap", 0), (0x90, 0x9f, "fixarray", 0),
           (0xa0, 0xbf, "fixstr", 0), (0xc0, 0xc0, "nil", 0), (0xe0, 0xff, "negfixint", 0)]
SIZED = {0xcc: ("uint8", 1), 0xcd: ("uint16", 2), 0xce: ("uint32", 4), 0xcf: ("uint64", 8),
         0xd0: ("int8", 1), 0xd1: ("int16", 2), 0xd2: ("int32", 4), 0xd3: ("int64", 8),
         0xd9: ("str8", 1), 0xda: ("str16", 2), 0xdb: ("str32", 4),
         0xc4: ("bin8", 1), 0xc5: ("bin16", 2), 0xc6: ("bin32", 4),
         0xdc: ("array16", 2), 0xdd: ("array32", 4)}


def mp_describe(b):
    """Each element's format name and value, of a record body (an array)."""
    pos, formats, values = 0, [], []

    def one():
        nonlocal pos
        t = b[pos]
        pos += 1
        for lo, hi, name, _ in FORMATS:
            if lo <= t <= hi:
                if name == "fixint":
                    return name, t
                if name == "negfixint":
                    return name, t - 256
                if name == "nil":
                    return name, None
                if name == "fixstr":
                    n = t & 0x1f
                    pos += n
                    return name, b[pos - n:pos]
                return name, t & 0x0f
        name, size = SIZED[t]
        v = int.from_bytes(b[pos:pos + size], "big", signed=name.startswith("int"))
        pos += size
        if name.startswith(("str", "bin")):
            pos += v
            return name, b[pos - v:pos]
        return name, v
    fmt, count = one()
    formats.append(fmt)
    for _ in range(count):
        f, v = one()
        formats.append(f)
        values.append(v)
    return formats, values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=os.path.join(HERE, "cases.json"))
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER")
                    or shutil.which("redis-server"))
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    with open(a.cases) as f:
        cases = json.load(f)
    if cases.get("version") != 1:
        print("conformance: %s: version %r is not 1" % (a.cases, cases.get("version")))
        return 1
    tmp = tempfile.mkdtemp(prefix="conformance-py.")
    servers = []
    passed = failed = 0
    try:
        servers.append(Server(a.redis_server, tmp, "plain"))
        servers.append(Server(a.redis_server, tmp, "auth", PASSWORD))
        run = Run(servers[0], servers[1], os.path.join(tmp, "absent.sock"), a.verbose)
        for idx, case in enumerate(cases["cases"]):
            for n in case.get("partitions", [1]):
                try:
                    why = run.run_case(case, n, idx)
                except Exception:
                    why = "runner error: " + traceback.format_exc().strip().splitlines()[-1]
                if why:
                    failed += 1
                    print("FAIL %s [partitions %d]: %s" % (case["name"], n, why))
                else:
                    passed += 1
                    if a.verbose:
                        print("ok   %s [partitions %d]" % (case["name"], n))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
