#!/usr/bin/env python3
"""What an open dashboard costs: Redis commands per second and the CPU
of the supervisor and of the admin process that serves the dashboard,
with 0, 1 and 10 browser windows open on the overview and on a queue
page (their live refresh running).

    python3 bench/ui-load.py --build BUILDDIR [--seconds 20] [--json FILE]

It starts its own redis-server (unix socket) and the built delayqd with
the dashboard on and the test handler (BUILDDIR/tests/plugins/.libs, from
`make check`), fills two queues (1000 and 200 delayed jobs, 20 dead),
then for each case measures over --seconds:
  - Redis commands/s: the delta of INFO stats total_commands_processed
    (the bench's own two INFO calls taken off), and the same minus the
    baseline with no window open (what the dashboard adds);
  - the supervisor's CPU and the admin process's (delayqd-admin, the
    supervisor's child of that name): utime+stime of /proc/PID/stat over
    the window, in % of one core.
The reaper's periodic fsck is off (fsck_interval "0"): its pass over
every record would swamp the figures.
Windows, not tabs: the dashboard stops refreshing a hidden tab, and a
background tab is hidden; each window's page is visible (checked, and
its refreshes counted from the page's resource timing).  Needs
/usr/bin/chromium and /usr/bin/chromedriver (Debian's chromium and
chromium-driver).  Everything it starts is stopped on the way out.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "browser"))
import webdriver  # noqa: E402

QUEUES = (("orders", 2, 1000), ("mail", 1, 200))
DEAD = 20


def die(msg):
    print("ui-load: " + msg, file=sys.stderr)
    sys.exit(1)


def redis_info(sock_path, section):
    """INFO `section` of the Redis server at `sock_path`, as text."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock_path)
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(section), section.encode()))
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                die("INFO: the connection closed")
            data += chunk
        head, _, rest = data.partition(b"\r\n")
        if not head.startswith(b"$"):
            die("INFO: unexpected reply %r" % head)
        size = int(head[1:])
        while len(rest) < size:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    return rest.decode()


def redis_counts(sock_path):
    """(total_commands_processed, {command: calls}) of the server."""
    total = None
    for line in redis_info(sock_path, "stats").splitlines():
        if line.startswith("total_commands_processed:"):
            total = int(line.split(":")[1])
    if total is None:
        die("INFO stats has no total_commands_processed")
    calls = {}
    for line in redis_info(sock_path, "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, fields = line[8:].partition(":")
            calls[name] = int(fields.split(",")[0].split("=")[1])
    return total, calls


def cpu_seconds(pid):
    """utime + stime of process `pid`, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def admin_pid(daemon_pid):
    """The pid of the daemon's admin process (named delayqd-admin), or
    None."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if comm == "delayqd-admin" and ppid == daemon_pid:
            return int(name)
    return None


def admin_cpu_seconds(daemon_pid):
    """(pid, CPU seconds) of the admin process; (None, 0) without one."""
    pid = admin_pid(daemon_pid)
    return (pid, cpu_seconds(pid)) if pid else (None, 0.0)


class Setup:
    """redis-server and delayqd in a temporary directory; stop() ends
    both by pid."""

    def __init__(self, build, work):
        self.build = build
        self.work = work
        self.redis = None
        self.daemon = None
        self.sock = os.path.join(work, "redis.sock")

    def start(self):
        server = os.environ.get("REDIS_SERVER") or "redis-server"
        self.redis = subprocess.Popen(
            [server, "--port", "0", "--unixsocket", self.sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", self.work],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis_info(self.sock, "server")
                break
            except OSError:
                if time.monotonic() > deadline or self.redis.poll() is not None:
                    die("redis-server did not start on " + self.sock)
                time.sleep(0.1)
        token = os.path.join(self.work, "ui.token")
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(16).hex().encode())
        os.close(fd)
        self.token = token
        handlers = os.path.realpath(os.path.join(self.build, "tests", "plugins", ".libs"))
        if not os.path.exists(os.path.join(handlers, "testhandler.so")):
            die("no %s/testhandler.so: run make check (or make tests/plugins/testhandler.la) "
                "in the build first" % handlers)
        for p in (handlers, os.path.join(handlers, "testhandler.so")):
            os.chmod(p, os.stat(p).st_mode & 0o755)
        self.port = webdriver.free_port()
        queues = ",\n".join('  { name = "%s"; workers = %d; }' % (q, w) for q, w, _ in QUEUES)
        conf = os.path.join(self.work, "delayqd.conf")
        with open(conf, "w") as f:
            f.write('redis = { unix_socket = "%s"; };\n' % self.sock)
            f.write('handler_dir = "%s";\n' % handlers)
            f.write('admin = { listen = "127.0.0.1:%d"; ui = true; token_file = "%s"; };\n'
                    % (self.port, token))
            f.write("queues = (\n%s\n);\n" % queues)
            f.write('handlers = ( { type = "*"; file = "testhandler.so"; timeout = "10s"; } );\n')
            # No fsck pass: once a minute it reads every job's record
            # (some 60 commands/s for 20 s here), which would hide what
            # the dashboard adds.
            f.write('reaper = { fsck_interval = "0"; };\n')
            f.write('log = { level = "warn"; target = "stderr"; };\n')
        self.log = open(os.path.join(self.work, "delayqd.log"), "w")
        self.daemon = subprocess.Popen([os.path.join(self.build, "delayqd"), "-f", "-c", conf],
                                       stdout=self.log, stderr=subprocess.STDOUT)
        self.url = "http://127.0.0.1:%d/ui" % self.port
        err = webdriver.wait_login_page(self.url + "/", 15,
                                        lambda: self.daemon.poll() is None)
        if err:
            die("delayqd: %s (its log: %s)" % (err, self.log.name))

    def cli(self, *args):
        subprocess.run([os.path.join(self.build, "delayq"), "-s", self.sock] + list(args),
                       check=True, stdout=subprocess.DEVNULL)

    def fill(self):
        """The queues' jobs: delayed (hours ahead) and a few dead ones."""
        for q, _, n in QUEUES:
            for i in range(n):
                self.cli("add", "-q", q, "-t", "type-%d" % (i % 5), "-d", "%ds" % (3600 + i),
                         "--id", "%s-%d" % (q, i), '{"n": %d}' % i)
        for i in range(DEAD):
            self.cli("add", "-q", QUEUES[0][0], "-t", "charge", "--max-attempts", "1",
                     "--id", "dead-%d" % i, "fail")

    def stop(self):
        for p in (self.daemon, self.redis):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def login(b, url, token_file):
    b.get(url + "/")
    with open(token_file) as f:
        b.find("input#token").type(f.read().strip())
    b.find("button#login-submit").click()
    deadline = time.monotonic() + 10
    while b.find("table#queues") is None:
        if time.monotonic() > deadline:
            die("login did not reach the overview")
        time.sleep(0.2)


def measure(setup, seconds):
    """(commands/s, supervisor CPU %, admin process CPU % (nan when it
    changed during the window), the three commands called most, with
    their calls/s) over `seconds`.  The bench's own INFO calls (four per
    window) are taken off."""
    pid = setup.daemon.pid
    (c0, k0), t0, (a0p, a0), w0 = (redis_counts(setup.sock), cpu_seconds(pid),
                                   admin_cpu_seconds(pid), time.monotonic())
    time.sleep(seconds)
    (c1, k1), t1, (a1p, a1), w1 = (redis_counts(setup.sock), cpu_seconds(pid),
                                   admin_cpu_seconds(pid), time.monotonic())
    wall = w1 - w0
    k1["info"] = k1.get("info", 0) - 2
    top = sorted(((k1[n] - k0.get(n, 0)) / wall, n) for n in k1)[-3:]
    admin = 100.0 * (a1 - a0) / wall if a0p and a0p == a1p else float("nan")
    return (c1 - c0 - 2) / wall, 100.0 * (t1 - t0) / wall, admin, \
        ", ".join("%s %.1f/s" % (n, r) for r, n in reversed(top) if r > 0)


def open_windows(b, n, url):
    """Make `n` windows show `url` (closing the others); their handles."""
    handles = b.tabs()
    while len(handles) < n:
        h = b.cmd("POST", "/window/new", {"type": "window"})["handle"]
        handles.append(h)
    for h in handles[n:]:
        b.switch_to(h)
        b.cmd("DELETE", "/window")
    handles = handles[:n]
    for h in handles:
        b.switch_to(h)
        b.get(url)
        b.script("performance.setResourceTimingBufferSize(100000);"
                 "performance.clearResourceTimings();")
    return handles


def refreshes(b, handles):
    """Per window: (visibility, fetches of the page, fetches of the
    charts' history) since it was opened."""
    out = []
    for h in handles:
        b.switch_to(h)
        out.append(b.script(
            "var r = performance.getEntriesByType('resource').filter(function (e) {"
            "  return e.initiatorType === 'fetch' || e.initiatorType === 'xmlhttprequest'; });"
            "var api = r.filter(function (e) { return e.name.indexOf('/ui/api/') >= 0; });"
            "return [document.visibilityState, r.length - api.length, api.length];"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", required=True, help="the build directory (after make check)")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--tabs", default="1,10", help="window counts to measure (default 1,10)")
    p.add_argument("--json", help="write the rows here too")
    opts = p.parse_args()
    for exe in (webdriver.CHROMIUM, webdriver.CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            die("no %s (apt-get install chromium chromium-driver)" % exe)
    counts = [int(x) for x in opts.tabs.split(",")]
    work = tempfile.mkdtemp(prefix="ui-load.")
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))
    setup = Setup(os.path.abspath(opts.build), work)
    rows = []
    try:
        setup.start()
        print("ui-load: filling the queues", flush=True)
        setup.fill()
        # Let the start and the fill's aftermath settle (the dead jobs'
        # runs, the first statistics).
        time.sleep(10)
        base_cmds, base_cpu, base_admin, top = measure(setup, opts.seconds)
        rows.append({"page": "-", "windows": 0, "redis_cmds_s": base_cmds,
                     "added_cmds_s": 0.0, "sup_cpu_pct": base_cpu,
                     "admin_cpu_pct": base_admin, "top": top})
        print("ui-load: baseline %.1f commands/s (%s), supervisor %.2f%% CPU, admin "
              "process %.2f%%" % (base_cmds, top, base_cpu, base_admin), flush=True)
        with webdriver.Browser(work, timeout=30) as b:
            login(b, setup.url, setup.token)
            pages = (("overview", setup.url + "/"),
                     ("queue page", setup.url + "/queues/" + QUEUES[0][0]))
            for name, url in pages:
                for n in counts:
                    handles = open_windows(b, n, url)
                    time.sleep(4)
                    cmds, cpu, admin, top = measure(setup, opts.seconds)
                    seen = refreshes(b, handles)
                    hidden = sum(1 for v, _, _ in seen if v != "visible")
                    fetched = sum(c for _, c, _ in seen)
                    charts = sum(c for _, _, c in seen)
                    rows.append({"page": name, "windows": n, "redis_cmds_s": cmds,
                                 "added_cmds_s": cmds - base_cmds, "sup_cpu_pct": cpu,
                                 "admin_cpu_pct": admin,
                                 "page_refreshes": fetched, "history_fetches": charts,
                                 "hidden_windows": hidden, "top": top})
                    print("ui-load: %s, %d window(s): %.1f commands/s (%+.1f; %s), "
                          "supervisor %.2f%% CPU, admin process %.2f%%; %d page refreshes "
                          "and %d history fetches seen, %d window(s) hidden"
                          % (name, n, cmds, cmds - base_cmds, top, cpu, admin, fetched,
                             charts, hidden), flush=True)
        # The baseline again with the browser gone: the table's "added"
        # is against the mean of both.
        time.sleep(3)
        after_cmds, after_cpu, after_admin, top = measure(setup, opts.seconds)
        print("ui-load: baseline after %.1f commands/s (%s), supervisor %.2f%% CPU, admin "
              "process %.2f%%" % (after_cmds, top, after_cpu, after_admin), flush=True)
        rows.append({"page": "- (after)", "windows": 0, "redis_cmds_s": after_cmds,
                     "sup_cpu_pct": after_cpu, "admin_cpu_pct": after_admin, "top": top})
        base = (base_cmds + after_cmds) / 2
        for r in rows:
            r["added_cmds_s"] = r["redis_cmds_s"] - base if r["windows"] else 0.0
    finally:
        setup.stop()
    print()
    print("%-11s %7s %12s %12s %10s %12s" % ("page", "windows", "redis cmd/s",
                                             "added cmd/s", "sup CPU %", "admin CPU %"))
    for r in rows:
        print("%-11s %7d %12.1f %12.1f %10.2f %12.2f" % (r["page"][:11], r["windows"],
                                                        r["redis_cmds_s"], r["added_cmds_s"],
                                                        r["sup_cpu_pct"], r["admin_cpu_pct"]))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"seconds": opts.seconds, "rows": rows}, f, indent=2)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
