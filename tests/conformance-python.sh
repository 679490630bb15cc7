#!/bin/sh
# The conformance cases (tests/conformance/cases.json) through the Python
# client staged in the build tree (pyclient/), against private
# redis-servers that tests/conformance/run.py starts and stops by pid.
# Skipped (77, one line) without /usr/bin/python3, its redis module
# (python3-redis) or redis-server.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
py=/usr/bin/python3
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
skip() { echo "python conformance skipped: $*"; exit 77; }
[ -x "$py" ] || skip "no $py (apt-get install python3)"
"$py" -c 'import redis' 2>/dev/null || skip "no redis module for $py (apt-get install python3-redis)"
{ [ -n "$server" ] && [ -x "$server" ]; } || skip "no redis-server (apt-get install redis-server)"
[ -f "$top/pyclient/delayq/scripts/enqueue.lua" ] \
    || { echo "python conformance: $top/pyclient is not staged (run make)"; exit 1; }
PYTHONPATH=$top/pyclient exec "$py" "$srcdir/tests/conformance/run.py" --redis-server "$server"
