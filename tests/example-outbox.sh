#!/bin/sh
# The outbox demo (examples/order-timeout-outbox/run.sh) against this build:
# a private PostgreSQL 15 and redis-server, orders created and paid in
# transactions that enqueue and cancel their timeout jobs through the
# outbox, delayqd's relay, the handler cancelling the unpaid orders.  It
# passes when the demo does (exit 0); skipped (77, one line) when the demo
# skips (no PostgreSQL 15, or a delayqd built without libpq) or there is no
# redis-server.  The demo runs under a deadline of 90 s (it takes about
# 10 s alone; a sanitizer build, four other tests beside it, took over 25),
# in a temporary directory of ours, and nothing it started may outlive it.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
demo=$srcdir/examples/order-timeout-outbox/run.sh

{ [ -n "$server" ] && [ -x "$server" ]; } ||
    { echo "outbox example skipped: no redis-server (apt-get install redis-server)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/example-outbox.XXXXXX") || exit 1
chmod 755 "$tmp"        # PostgreSQL's user (nobody, under root) enters it
trap 'rm -rf "$tmp"' EXIT

rc=0
TMPDIR=$tmp REDIS_SERVER=$server timeout -k 5 90 sh "$demo" "$top" >"$tmp/out" 2>&1 || rc=$?

# What the demo started runs with its directory (under ours) in its
# command line: redis-server's socket, postgres's -D, delayqd's -c.
left=$(ps -eo pid=,args= | awk -v t="$tmp/" 'index($0, t) && $2 != "awk" { print }')
if [ -n "$left" ]; then
    echo "the demo left processes running (killed now):"
    echo "$left"
    for pid in $(echo "$left" | awk '{ print $1 }'); do
        kill -KILL "$pid" 2>/dev/null
    done
    rc=1
fi
case $rc in
    0) cat "$tmp/out" ;;
    77) tail -n 1 "$tmp/out" | sed 's/^run\.sh: skipped: /outbox example skipped: /' ;;
    124) cat "$tmp/out"; echo "the demo did not finish in 90 s"; rc=1 ;;
    *) cat "$tmp/out"; echo "the demo exited $rc"; rc=1 ;;
esac
exit $rc
