"""The delayq Python client's side of bench/producers/run.py: enqueue()
one call at a time, or enqueue_many() in calls of 1000 (one round trip per
call), the same job as the other producers. PYTHONPATH must reach the
client (run.py sets it to the build's staged package)."""
import sys
import time

import delayq

target, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
BULK = 1000
PAYLOAD = b'{"order":1234}'
DELAY = 30 * 60 * 1000
with delayq.Client.from_url('redis://' + target) as dq:
    dq.enqueue('bench', 'order.cancel', PAYLOAD, delay=DELAY)      # loads the script
    print('ready', flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    if mode == 'one':
        for _ in range(n):
            dq.enqueue('bench', 'order.cancel', PAYLOAD, delay=DELAY)
    else:
        for done in range(0, n, BULK):
            jobs = [{'type': 'order.cancel', 'payload': PAYLOAD, 'delay': DELAY}
                    for _ in range(min(BULK, n - done))]
            bad = [e.error for e in dq.enqueue_many('bench', jobs) if not e.ok]
            if bad:
                raise SystemExit('enqueue_many: %s' % bad[0])
    print('%.6f' % (time.monotonic() - t0))
