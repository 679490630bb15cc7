#!/bin/sh
# The order-timeout demo, end to end on a private redis-server:
# six orders are created, each with an unpaid-timeout job due in 3 s;
# two are paid in time and their timeout jobs cancelled; the other four
# fire, and their handler (exec.so running cancel-order.sh) cancels them.
# ./quickstart demo builds delayq and runs it; after a build of your own:
# ./examples/order-timeout/run.sh [BUILDDIR] (by default the source tree).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../..}" && pwd)
delayq=$build/delayq delayqd=$build/delayqd handlers=$build/handlers/.libs
for f in "$delayq" "$delayqd" "$handlers/exec.so"; do
    [ -e "$f" ] || { echo "run.sh: no delayq built in $build: run ./quickstart demo" >&2; exit 2; }
done
redis=$(command -v redis-server || echo /usr/bin/redis-server)
dir=$(mktemp -d)
chmod 755 "$dir"
cleanup() {
    [ -f "$dir/delayqd.pid" ] && kill "$(cat "$dir/delayqd.pid")" 2>/dev/null || true
    kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
sock=$dir/redis.sock
"$redis" --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
i=0
until redis-cli -s "$sock" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "run.sh: redis-server did not start" >&2; exit 1; }
    sleep 0.05
done

cat >"$dir/delayqd.conf" <<CONF
redis = { unix_socket = "$sock"; };
handler_dir = "$handlers";
log = { level = "debug"; };
queues = ( { name = "orders"; workers = 2; lease = "1m"; batch = 8; max_attempts = 3;
             backoff = { base = "500ms"; cap = "5s"; }; } );
handlers = ( { type = "order.cancel"; file = "exec.so"; timeout = "10s";
               settings = { argv = [ "$here/cancel-order.sh" ];
                            setenv = { DEMO_REDIS_SOCK = "$sock"; }; }; } );
CONF
"$delayqd" -t -c "$dir/delayqd.conf"
"$delayqd" -f -c "$dir/delayqd.conf" 2>"$dir/delayqd.log" &
echo $! >"$dir/delayqd.pid"

dq() { "$delayq" -s "$sock" "$@"; }
echo "== six orders, each with an unpaid-timeout job due in 3 s =="
for order in 1001 1002 1003 1004 1005 1006; do
    redis-cli -s "$sock" HSET "demo:order:$order" status unpaid >/dev/null
    printf 'order %s: timeout job %s\n' "$order" \
        "$(dq add -q orders -t order.cancel -d 3s --id "order:$order:cancel" "$order")"
done
echo "== orders 1002 and 1005 are paid: their timeout jobs are cancelled =="
for order in 1002 1005; do
    redis-cli -s "$sock" HSET "demo:order:$order" status paid >/dev/null
    dq cancel -q orders "order:$order:cancel" && echo "order $order: paid, timeout cancelled"
done
dq stats
echo "== waiting for the timeouts to fire =="
i=0
while :; do
    left=$(dq stats --json -q orders | tr -d ' \n' | sed -E 's/.*"delayed":([0-9]+).*"due":([0-9]+).*"processing":([0-9]+).*/\1 \2 \3/')
    [ "$left" = "0 0 0" ] && break
    i=$((i + 1)); [ $i -lt 100 ] || { echo "run.sh: jobs did not run; log:" >&2; cat "$dir/delayqd.log" >&2; exit 1; }
    sleep 0.1
done
echo "== what happened =="
for order in 1001 1002 1003 1004 1005 1006; do
    printf 'order %s: %s\n' "$order" "$(redis-cli -s "$sock" HGET "demo:order:$order" status)"
done
dq stats
echo "== delayqd's log =="
kill "$(cat "$dir/delayqd.pid")"
wait "$(cat "$dir/delayqd.pid")" 2>/dev/null || true
rm -f "$dir/delayqd.pid"
cat "$dir/delayqd.log"
cancelled=0
for order in 1001 1003 1004 1006; do
    [ "$(redis-cli -s "$sock" HGET "demo:order:$order" status)" = cancelled ] && cancelled=$((cancelled + 1))
done
paid=0
for order in 1002 1005; do
    [ "$(redis-cli -s "$sock" HGET "demo:order:$order" status)" = paid ] && paid=$((paid + 1))
done
echo "== $cancelled of 4 unpaid orders cancelled, $paid of 2 paid orders kept =="
[ $cancelled = 4 ] && [ $paid = 2 ]
