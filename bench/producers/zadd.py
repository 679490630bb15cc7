"""The classic design's side of bench/producers/run.py: what teams hand-roll
on Redis, one ZADD per job into a sorted set scored by due time (the
payload in the member), one call at a time or pipelined 1000 per round trip.
Run with a python3 that has redis-py (Debian's python3-redis)."""
import json
import sys
import time

import redis

target, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
host, port = target.split(':')
r = redis.Redis(host=host, port=int(port))
BULK = 1000
r.ping()
print('ready', flush=True)
sys.stdin.readline()
t0 = time.monotonic()
for i in range(0, n, 1 if mode == 'one' else BULK):
    k = 1 if mode == 'one' else min(BULK, n - i)
    due = time.time() * 1000 + 1800_000
    if k == 1:
        r.zadd('orders:timeouts', {json.dumps({'order': 1234, 'n': i}): due})
    else:
        p = r.pipeline(transaction=False)
        for j in range(k):
            p.zadd('orders:timeouts', {json.dumps({'order': 1234, 'n': i + j}): due})
        p.execute()
print('%.6f' % (time.monotonic() - t0))
