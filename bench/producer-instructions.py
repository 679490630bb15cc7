#!/usr/bin/env python3
"""Instructions per call of the producer's scripts inside Redis, counted by
callgrind (deterministic, so parts far smaller than a timing run's noise
show; docs/benchmarks.md, "The producer's path").  Redis runs under
valgrind with only EVALSHA counted; each script (as Redis runs it, from a
build's scripts/ or any file) is called 200 times to warm up, then N
times between a zeroing and a dump of the counts.

  /usr/bin/python3 bench/producer-instructions.py [--many|--generated|--show [--raw]] \\
      label=path/to/script.lua ...

Each script gets enqueue's arguments (a producer's id "e-N" unless
--generated, type "bench", a 32-byte payload, "at" an hour ahead,
max_attempts 0), or with --many enqueue_many's (100 jobs a call, generated
ids, "@" times, their bodies).  The label "minimal" stands for the bench's
minimal script of the call (run_producer.c's, with a value as long as the
record).  Put a warm-up label first: the first script measured pays for
the hash tables' first growth.
"""
import argparse, glob, os, subprocess, time

import callgrind_redis

MINIMAL_ID = """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])
redis.call('ZRANGE', KEYS[2], '0', '0')
return { 'ok', ARGV[2], ARGV[6], t[1] }
"""
MINIMAL_GEN = """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
local id = string.format('%d', redis.call('HINCRBY', KEYS[5], 'seq', '1'))
redis.call('HSETNX', KEYS[1] .. ':' .. string.sub(id, 1, -3), id,
           ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
redis.call('ZADD', KEYS[2], ARGV[6], id)
redis.call('ZRANGE', KEYS[2], '0', '0')
return { 'ok', id, ARGV[6], t[1] }
"""
# An enqueue's further commands with --with: an expiry's entry and its
# record, a window's record, a debounce's due time made a score (the
# bench's minimal scripts, run_producer.c).
MINIMAL_WITH = {
    'expiry': """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])
local base = string.sub(KEYS[5], 1, -5)
redis.call('ZADD', base .. 'expire_at', ARGV[6], ARGV[2])
redis.call('HSET', base .. 'expire_info', ARGV[2], ARGV[6] .. ' ' .. t[1] .. ' dead')
return { 'ok', ARGV[2], ARGV[6], t[1] }
""",
    'window': """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[2])
redis.call('HSET', string.sub(KEYS[5], 1, -5) .. 'unique', ARGV[2], t[1] .. ' 60000')
return { 'ok', ARGV[2], ARGV[6], t[1] }
""",
    'debounce': """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
redis.call('HGET', KEYS[1], ARGV[2])
redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
local due = string.format('%d', t[1] * 1000 + ARGV[6])
redis.call('ZADD', KEYS[2], due, ARGV[2])
return { 'ok', ARGV[2], due, t[1] }
""",
}
MINIMAL_WITH['debounce-hit'] = """local t = redis.call('TIME')
redis.call('HGET', KEYS[5], 'partitions')
redis.call('HGET', KEYS[1], ARGV[2])
redis.call('ZSCORE', KEYS[3], ARGV[2])
redis.call('ZSCORE', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4] .. 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrr')
local due = string.format('%d', t[1] * 1000 + ARGV[6])
redis.call('ZADD', KEYS[2], due, ARGV[2])
redis.call('HDEL', string.sub(KEYS[5], 1, -5) .. 'next', ARGV[2])
return { 'debounced', ARGV[2], due, t[1] }
"""
WITH_ARGV = {'expiry': ['5', '1', '0', '+60000', 'dead'],
             'window': ['5', '1', '0', '', 'dead', '60000', '0'],
             'debounce': ['5', '1', '0', '', 'dead', '', '0', '3600000'],
             'debounce-hit': ['5', '1', '0', '', 'dead', '', '0', '3600000']}
MINIMAL_SHOW = """local t = redis.call('TIME')
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
local base = string.sub(KEYS[5], 1, -5)
redis.call('EXISTS', base .. 'expire_info', base .. 'unique')
return { 'delayed', raw, s, t[1] }
"""
MINIMAL_MANY = """local t = redis.call('TIME')
local n = (#ARGV - 1) / 3
local seq = tonumber(redis.call('HGET', KEYS[5], 'seq') or '0')
redis.call('HGET', KEYS[5], 'partitions')
local ids, rec, z = {}, {}, {}
for i = 1, n do
  local id = string.format('%d', seq + i)
  ids[i] = id
  rec[2 * i - 1] = id
  rec[2 * i] = ARGV[3 * i + 1] .. 'bbbbbbbbbbbbbbbbbbb'
  z[2 * i - 1] = string.sub(ARGV[3 * i], 2)
  z[2 * i] = id
end
local b = KEYS[1] .. ':' .. string.sub(ids[1], 1, -3)
redis.call('HMGET', b, unpack(ids))
redis.call('HINCRBY', KEYS[5], 'seq', string.format('%d', n))
redis.call('HSET', b, unpack(rec))
redis.call('ZADD', KEYS[2], unpack(z))
redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')
return { t[1], seq }
"""

ap = argparse.ArgumentParser()
ap.add_argument('--many', action='store_true')
ap.add_argument('--generated', action='store_true')
ap.add_argument('--show', action='store_true', help="show's arguments, on delayed jobs")
ap.add_argument('--raw', action='store_true', help="with --show: the form 'raw' (the clients')")
ap.add_argument('--with', dest='extra', choices=['expiry', 'window', 'debounce', 'debounce-hit'],
                help="an enqueue with a producer's id and an expiry (+60000, dead), a dedupe "
                     "window (60000) or a debounce (due in an hour) of a new id, or of the "
                     "same id every call (its waiting job takes the add)")
ap.add_argument('--enqueue', default='build/scripts/enqueue.lua',
                help='the enqueue script that plants the jobs --show shows')
ap.add_argument('-n', type=int, default=None)
ap.add_argument('scripts', nargs='+')
a = ap.parse_args()
calls = a.n or (100 if a.many else 2000)

def text(path):
    if path == 'minimal':
        if a.extra:
            return MINIMAL_WITH[a.extra]
        return (MINIMAL_SHOW if a.show else MINIMAL_MANY if a.many
                else MINIMAL_GEN if a.generated else MINIMAL_ID)
    t = open(path).read()
    return t.split('\n', 1)[1] if t.startswith('#!') else t

KEYS = ['dq:{q}:' + k for k in ('jobs', 'delayed', 'processing', 'dead', 'meta', 'lease')]
TYPE, PAYLOAD = b'bench', b'0123456789abcdef' * 2
BODY = b'\x96' + bytes([0xa0 + len(TYPE)]) + TYPE + b'\xd9' + bytes([len(PAYLOAD)]) + PAYLOAD + b'\x00'
far = int(time.time() * 1000) + 3600000
serial = 0
label = ''

def args():
    global serial
    if a.show:
        serial += 1
        return ['s-%d' % serial] + (['raw'] if a.raw else [])
    if a.many:
        out = ['']
        for j in range(100):
            serial += 1
            out += ['', '@%d' % (far + serial % 100000), BODY]
        return out
    serial += 1
    if a.extra:
        debounce = a.extra.startswith('debounce')
        when, ms = ('delay', 3600000) if debounce else ('at', far + serial % 100000)
        id = 'd-' + label if a.extra == 'debounce-hit' else 'e-%d' % serial
        return ['', id, TYPE, PAYLOAD, when, ms, 0, 0] + WITH_ARGV[a.extra]
    return ['', '' if a.generated else 'e-%d' % serial, TYPE, PAYLOAD, 'at',
            far + serial % 100000, 0, 0]

srv, r, tmp = callgrind_redis.start(['--collect-atstart=no',
                                     '--toggle-collect=evalShaCommand'])
try:
    def control(what):
        subprocess.run(['callgrind_control', what, str(srv.pid)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if a.show:
        # The jobs shown: delayed, a producer's id each, one per call.
        plant = r.register_script(text(a.enqueue))
        for i in range(1, (calls + (20 if a.many else 200)) * len(a.scripts) + 1):
            plant(keys=KEYS, args=['', 's-%d' % i, TYPE, PAYLOAD, 'at', far + i, 0, 0])
    print('%-16s %12s' % ('script', 'instr/call'))
    for spec in a.scripts:
        label, path = spec.split('=', 1) if '=' in spec else (spec, spec)
        sha = r.script_load(text(path))
        if a.extra == 'debounce-hit':
            # Each script's own waiting job, added by the build's enqueue
            # (a minimal script writes no record a script can read).
            r.register_script(text(a.enqueue))(keys=KEYS, args=args())
        for _ in range(20 if a.many else 200):
            r.evalsha(sha, 6, *KEYS, *args())
        control('-z')
        for _ in range(calls):
            r.evalsha(sha, 6, *KEYS, *args())
        before = set(glob.glob(os.path.join(tmp, 'cg.*')))
        control('-d')
        for _ in range(100):
            new = set(glob.glob(os.path.join(tmp, 'cg.*'))) - before
            if new:
                break
            time.sleep(0.1)
        time.sleep(0.3)
        total = None
        for line in open(sorted(new)[0]):
            if line.startswith(('summary:', 'totals:')):
                total = int(line.split()[1])
        print('%-16s %12.0f' % (label, total / calls), flush=True)
finally:
    callgrind_redis.stop(srv)
