#!/usr/bin/env python3
"""Where a script's Redis time goes, part by part (docs/benchmarks.md, "The
producer's path"): the script is cut before each marker line of its body
and `return 1` appended; each cut is called N times one at a time with
enqueue's arguments, and Redis's time per call (INFO commandstats) is
printed with that of the commands it ran.  A part's cost is the difference
between two cuts.  Redis runs on core 0, this on core 1.  perf cannot split
the Lua of Debian's redis-server by function (its Lua has no symbols): this
does it by cutting.

  /usr/bin/python3 bench/script-parts.py --build BUILD [--id] \\
      'label=marker line' ...

A cut must be at a line of the body's top level (not inside a block).
For example, enqueue's common call (issue 30), the checks and then the
writes:
  bench/script-parts.py --build build 'checks=if due then' \\
      'writes=-- prelude: here'
"""
import argparse, os, subprocess, sys, tempfile, time
import redis

ap = argparse.ArgumentParser()
ap.add_argument('--build', required=True)
ap.add_argument('--script', default='enqueue')
ap.add_argument('--id', action='store_true', help="a producer's id, not a generated one")
ap.add_argument('-n', type=int, default=10000)
ap.add_argument('--reps', type=int, default=5)
ap.add_argument('cuts', nargs='*')
a = ap.parse_args()
full = open(os.path.join(a.build, 'scripts', a.script + '.lua')).read()
if full.startswith('#!'):
    full = full.split('\n', 1)[1]
# The script as Redis runs it: the prelude's part it uses, its body, and
# (for a script with "-- prelude: here") the prelude's functions within
# it.  Each cut is of that text; "prelude" ends where the body begins.
lines = full.split('\n')
body_at = next(i for i, l in enumerate(lines) if l.startswith('-- ' + a.script + ':'))
variants = [('nothing (return 1)', 'return 1'),
            ('prelude', '\n'.join(lines[:body_at]) + '\nreturn 1')]
for c in a.cuts:
    label, marker = c.split('=', 1)
    at = next(i for i, l in enumerate(lines) if i > body_at and marker in l)
    variants.append((label, '\n'.join(lines[:at]) + '\nreturn 1'))
variants.append(('whole script', full))

tmp = tempfile.mkdtemp()
sock = os.path.join(tmp, 'r.sock')
two = os.cpu_count() and os.cpu_count() > 1
pin = ['taskset', '-c', '0'] if two else []
srv = subprocess.Popen(pin + ['redis-server', '--port', '0', '--unixsocket', sock, '--save', '',
                              '--appendonly', 'no'], stdout=subprocess.DEVNULL)
try:
    if two:
        os.sched_setaffinity(0, {1})
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    r = redis.Redis(unix_socket_path=sock)
    K = ['dq:{q}:' + k for k in ('jobs', 'delayed', 'processing', 'dead', 'meta', 'lease')]
    far = int(time.time() * 1000) + 3600000
    payload = b'x' * 32
    def args(i):
        return ['wake', 'order-%d' % i if a.id else '', 't', payload, 'at', far + i, 0, 0]
    def measure(sha):
        s0 = r.info('commandstats')
        for i in range(a.n):
            r.evalsha(sha, 6, *K, *args(i))
        s1 = r.info('commandstats')
        ev = lambda s: s.get('cmdstat_evalsha', {'usec': 0})['usec']
        skip = ('cmdstat_evalsha', 'cmdstat_info', 'cmdstat_flushall')
        inner = sum(v['usec'] - s0.get(k, {'usec': 0})['usec'] for k, v in s1.items() if k not in skip)
        return (ev(s1) - ev(s0)) / a.n, inner / a.n
    shas = [(l, r.script_load(t)) for l, t in variants]
    res = {l: [] for l, _ in shas}
    for _ in range(a.reps):
        for l, sha in shas:
            r.flushall()
            res[l].append(measure(sha))
    print('%-24s %8s %6s %6s %9s' % ('cut before', 'us/call', 'cmds', 'part', 'part cmds'))
    prev = (0, 0)
    for l, _ in shas:
        v = sorted(res[l])[len(res[l]) // 2]
        print('%-24s %8.2f %6.2f %6.2f %9.2f' % (l, v[0], v[1], v[0] - prev[0], v[1] - prev[1]))
        prev = v
finally:
    srv.terminate()
    srv.wait()
