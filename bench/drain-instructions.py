#!/usr/bin/env python3
"""Instructions Redis spends inside EVALSHA per job drained: claim and ack
of batches of BATCH jobs, with the scripts of one build tree, counted by
callgrind (deterministic: the machine's load does not move it).

    bench/drain-instructions.py BUILDDIR [BATCH ...]

Needs valgrind, redis-server and Python's redis module.  Starts its own
redis-server under callgrind on a unix socket in a temporary directory,
fills the queue with 6,400 jobs due now (enqueue), and counts only the
claims and acks that drain them (after a warm-up of 640).
docs/benchmarks.md, "Jobs under control", has the figures."""
import glob, os, re, shutil, subprocess, sys

import callgrind_redis

N, WARM = 6400, 640
KEYS = ['dq:{q}:' + k for k in ('jobs', 'delayed', 'processing', 'dead', 'meta', 'lease')]


def per_job(build, batch):
    srv, r, tmp = callgrind_redis.start(['--instr-atstart=no'])
    try:
        sha = {n: r.script_load(open(os.path.join(build, 'scripts', n + '.lua')).read())
               for n in ('enqueue', 'claim', 'ack')}

        def fill(n):
            p = r.pipeline(transaction=False)
            for _ in range(n):
                p.evalsha(sha['enqueue'], 6, *KEYS, '', '', 't', b'x' * 32, 'delay', 0, 0, 0)
            p.execute()

        def drain(n):
            done = 0
            while done < n:
                c = r.evalsha(sha['claim'], 6, *KEYS, batch, 30000)
                k, pairs = c[2], []
                for j in range(k):
                    pairs += [c[3 + 4 * j], c[5 + 4 * j]]
                if k:
                    r.evalsha(sha['ack'], 6, *KEYS, *pairs)
                done += k

        fill(WARM)
        drain(WARM)
        fill(N)
        subprocess.run(['callgrind_control', '-i', 'on', str(srv.pid)],
                       stdout=subprocess.DEVNULL, check=True)
        drain(N)
        subprocess.run(['callgrind_control', '-i', 'off', str(srv.pid)],
                       stdout=subprocess.DEVNULL, check=True)
    finally:
        callgrind_redis.stop(srv)
    out = subprocess.run(['callgrind_annotate', '--inclusive=yes',
                          glob.glob(tmp + '/cg.*')[0]],
                         capture_output=True, text=True, check=True).stdout
    shutil.rmtree(tmp, ignore_errors=True)
    for line in out.split('\n'):
        m = re.match(r'\s*([\d,]+)\s.*[ :]evalShaCommand( |$)', line)
        if m:
            return int(m.group(1).replace(',', '')) / N
    sys.exit('drain-instructions: no evalShaCommand in the profile (symbols missing?)')


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for b in [int(x) for x in sys.argv[2:]] or [1, 16, 64]:
        print('%s batch %d: %.0f instructions per job inside EVALSHA (claim + ack)'
              % (sys.argv[1], b, per_job(sys.argv[1], b)), flush=True)


if __name__ == '__main__':
    main()
