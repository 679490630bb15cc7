#!/bin/sh
# Quick start: a private redis-server, a few delayed jobs, their figures.
# Run from the top of a built tree: ./examples/quickstart.sh
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
delayq=$top/delayq
[ -x "$delayq" ] || { echo "quickstart: build first: ./autogen.sh && ./configure && make" >&2; exit 2; }
redis=$(command -v redis-server || echo /usr/bin/redis-server)
dir=$(mktemp -d)
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
"$redis" --port 0 --unixsocket "$dir/redis.sock" --save '' --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
i=0
until [ -S "$dir/redis.sock" ] || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done

dq() { echo "\$ delayq $*" >&2; "$delayq" -s "$dir/redis.sock" "$@"; }

echo "== three orders, each with an unpaid-timeout job =="
for order in 1001 1002 1003; do
    dq add -q orders -t order.cancel -d 30m --id "order:$order:cancel" "{\"order\":$order}"
done
echo "== a partner-API call to retry in 5 s, and a reminder due now =="
dq add -q partner -t api.retry -d 5s --max-attempts 3 '{"call":"charge"}'
dq add -q partner -t reminder -d 0 'appointment tomorrow'
echo "== order 1002 is paid: its timeout is cancelled =="
dq cancel -q orders order:1002:cancel
echo "== the queues =="
dq stats
echo "== one job in detail =="
dq show -q orders order:1001:cancel
