#!/usr/bin/env python3
"""Producers side by side: enqueue N delayed jobs (due in 30 minutes, the
payload {"order":1234}) one call at a time and in bulk calls of 1000, from
each producer, against one private redis-server, and print jobs a second and
Redis CPU microseconds per job.

Redis runs on core 0 and each producer on core 1 (taskset, when there are
two cores), so the producer's own CPU does not slow Redis down. Each
producer connects and warms up (scripts loaded), prints "ready", and starts
on a line from this script; it prints the seconds its enqueueing took. Redis
CPU is INFO cpu's used_cpu_user + used_cpu_sys before and after (getrusage:
microseconds), commands per job from INFO commandstats. Each row is the
median of --rounds runs, the database flushed before each.

  bench/producers/run.py --build BUILD [-n 10000] [--rounds 3] [--only NAME,...]

Producers (a row is skipped with one line when its runtime is missing):
  c        libdelayq (BUILD/delayq-producer-bench)
  python   the delayq Python client (BUILD/pyclient: the package as built)
  node     the delayq Node client (BUILD/clients/node, with the ioredis that
           tests/node-client.sh installs there)
  bullmq   BullMQ Queue.add / addBulk (--bullmq DIR: a node_modules holding bullmq)
  sidekiq  Sidekiq::Client push / push_bulk (Debian's ruby-sidekiq)
  zadd     the hand-rolled design: one ZADD per job (redis-py)
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
SYS_PY = '/usr/bin/python3' if os.path.exists('/usr/bin/python3') else sys.executable


def resp(sock, *args):
    """Send one command, return the reply (bulk, integer, status or array)."""
    out = b'*%d\r\n' % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    sock.sendall(out)
    with sock.makefile('rb') as f:
        return read_reply(f)


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b'$':
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b'*':
        return [read_reply(f) for _ in range(int(rest))]
    if kind == b':':
        return int(rest)
    if kind == b'-':
        raise RuntimeError(rest.decode())
    return rest


def info(sock, section):
    text = resp(sock, 'INFO', section).decode()
    return dict(l.split(':', 1) for l in text.splitlines() if ':' in l and not l.startswith('#'))


def redis_cpu_us(sock):
    i = info(sock, 'cpu')
    return (float(i['used_cpu_user']) + float(i['used_cpu_sys'])) * 1e6


def redis_calls(sock):
    total = 0
    for k, v in info(sock, 'commandstats').items():
        if k.startswith('cmdstat_') and k not in ('cmdstat_info', 'cmdstat_flushall'):
            total += int(dict(x.split('=') for x in v.split(','))['calls'])
    return total


def pin(core):
    return ['taskset', '-c', str(core)] if shutil.which('taskset') and os.cpu_count() >= 2 else []


def producers(args):
    b = os.path.abspath(args.build)
    env_py = dict(os.environ, PYTHONPATH=os.path.join(b, 'pyclient'))
    env_node = dict(os.environ, DQ_NODE_PKG=os.path.join(b, 'clients', 'node'))
    env_bull = dict(os.environ, NODE_PATH=os.path.join(os.path.abspath(args.bullmq or '.'), 'node_modules'))
    return {
        'c': (['%s/delayq-producer-bench' % b], None, os.path.exists('%s/delayq-producer-bench' % b)),
        'python': ([SYS_PY, os.path.join(HERE, 'python-delayq.py')], env_py,
                   os.path.exists(os.path.join(HERE, 'python-delayq.py'))),
        'node': (['node', os.path.join(HERE, 'node-delayq.js')], env_node,
                 shutil.which('node') and os.path.isdir(os.path.join(b, 'clients', 'node',
                                                                     'node_modules', 'ioredis'))),
        'bullmq': (['node', os.path.join(HERE, 'bullmq.js')], env_bull,
                   args.bullmq and os.path.isdir(os.path.join(args.bullmq, 'node_modules', 'bullmq'))),
        'sidekiq': (['ruby', os.path.join(HERE, 'sidekiq.rb')], None, shutil.which('ruby')),
        'zadd': ([SYS_PY, os.path.join(HERE, 'zadd.py')], None, True),
    }


def run_once(cmd, env, target, n, mode, sock):
    resp(sock, 'FLUSHALL')
    p = subprocess.Popen(pin(1) + cmd + [target, str(n), mode], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = p.stdout.readline().strip()
    if line != 'ready':
        p.kill()
        raise RuntimeError('%s did not start (said %r)' % (cmd[-1], line))
    cpu0, calls0 = redis_cpu_us(sock), redis_calls(sock)
    p.stdin.write('go\n')
    p.stdin.close()
    secs = float(p.stdout.readline())
    cpu1, calls1 = redis_cpu_us(sock), redis_calls(sock)
    if p.wait() != 0:
        raise RuntimeError('%s exited %d' % (cmd[-1], p.returncode))
    return n / secs, (cpu1 - cpu0) / n, (calls1 - calls0 - 2) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', required=True)
    ap.add_argument('-n', type=int, default=10000)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--only', default='c,python,node,bullmq,sidekiq,zadd')
    ap.add_argument('--bullmq')
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix='dq-producers.')
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    srv = subprocess.Popen(pin(0) + ['redis-server', '--port', str(port), '--bind', '127.0.0.1',
                                     '--save', '', '--appendonly', 'no', '--dir', d],
                           stdout=subprocess.DEVNULL)
    target = '127.0.0.1:%d' % port
    try:
        for _ in range(100):
            try:
                sock = socket.create_connection(('127.0.0.1', port))
                break
            except OSError:
                time.sleep(0.05)
        print('| producer | mode | jobs/s | Redis CPU µs/job | Redis commands/job |')
        print('| --- | --- | ---: | ---: | ---: |')
        table = producers(args)
        for name in args.only.split(','):
            cmd, env, present = table[name]
            if not present:
                print('%s: skipped (its runtime or package is not here)' % name, file=sys.stderr)
                continue
            for mode in ('one', 'bulk'):
                rows = [run_once(cmd, env, target, args.n, mode, sock) for _ in range(args.rounds)]
                rate = statistics.median(r[0] for r in rows)
                cpu = statistics.median(r[1] for r in rows)
                calls = statistics.median(r[2] for r in rows)
                print('| %s | %s | %.0f | %.1f | %.2f |' % (name, 'one at a time' if mode == 'one'
                      else 'bulk 1000/call', rate, cpu, calls), flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == '__main__':
    main()
