#!/bin/sh
# The Python client's own tests: tests/python/test_client.py (the scripts
# it carries are the C library's, byte for byte; NOSCRIPT; durability;
# ACL users; URLs and delayqd.conf) and tests/python/test_topologies.py (a
# partitioned queue over a three-master Redis Cluster, Sentinel, TLS with
# a client certificate) and tests/python/test_daemon.py (with the real
# delayqd: jobs from Python and from C run once with their bytes, a dead
# job made by C is requeued by Python, a schedule from Python fires).  Skipped (77, one line) without
# /usr/bin/python3, its redis module (python3-redis) or redis-server.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
py=/usr/bin/python3
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
skip() { echo "python client tests skipped: $*"; exit 77; }
[ -x "$py" ] || skip "no $py (apt-get install python3)"
"$py" -c 'import redis' 2>/dev/null || skip "no redis module for $py (apt-get install python3-redis)"
{ [ -n "$server" ] && [ -x "$server" ]; } || skip "no redis-server (apt-get install redis-server)"
[ -f "$top/pyclient/delayq/scripts/enqueue.lua" ] \
    || { echo "python client tests: $top/pyclient is not staged (run make)"; exit 1; }
export REDIS_SERVER=$server TOP_BUILDDIR=$top PYTHONPATH=$top/pyclient
"$py" "$srcdir/tests/python/test_client.py" -v || exit 1
"$py" "$srcdir/tests/python/test_jobs_control.py" -v || exit 1
"$py" "$srcdir/tests/python/test_topologies.py" -v || exit 1
exec "$py" "$srcdir/tests/python/test_daemon.py" -v
