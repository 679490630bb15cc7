#!/bin/sh
# What the supervisor costs while jobs flow: its CPU time and RSS over a
# run of SECONDS (default 300), and the admin process's RSS where there is
# one (the process named delayqd-admin).  A private redis-server on a Unix
# socket, delayqd from BUILD (default: ./build) with 4 workers on one queue
# and the no-op handler, a producer adding jobs with `delayq add` as fast
# as one loop can, and /metrics plus /healthz asked once a second (as a
# scraper and a liveness probe would).
#
#   bench/supervisor-cost.sh [BUILD] [SECONDS]
#
# Prints one line of figures; docs/benchmarks.md keeps them.
set -eu
BUILD=$(cd "${1:-build}" && pwd)
SECONDS_RUN=${2:-300}
PORT=${PORT:-19464}
DIR=$(mktemp -d /tmp/supervisor-cost.XXXXXX)
REDIS_PID= DAEMON_PID= PRODUCER_PID=
cleanup() {
    [ -n "$PRODUCER_PID" ] && kill "$PRODUCER_PID" 2>/dev/null || true
    [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null && sleep 2 || true
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

command -v redis-server >/dev/null || { echo "supervisor-cost: no redis-server" >&2; exit 77; }
redis-server --port 0 --unixsocket "$DIR/redis.sock" --save '' --appendonly no \
    --dir "$DIR" >"$DIR/redis.log" 2>&1 &
REDIS_PID=$!
cat >"$DIR/delayqd.conf" <<CONF
redis = { unix_socket = "$DIR/redis.sock"; };
handler_dir = "$BUILD/bench/.libs";
log = { level = "info"; target = "stderr"; };
metrics = { listen = "127.0.0.1:$PORT"; };
queues = ( { name = "cost"; workers = 4; batch = 16; lease = "60s"; } );
handlers = ( { type = "*"; file = "noop.so"; timeout = "10s"; } );
CONF
sleep 0.5
"$BUILD/delayqd" -f -c "$DIR/delayqd.conf" 2>"$DIR/delayqd.log" &
DAEMON_PID=$!
sleep 3
kill -0 "$DAEMON_PID" || { cat "$DIR/delayqd.log" >&2; exit 1; }

producer() {
    while :; do
        "$BUILD/delayq" -c "$DIR/delayqd.conf" add -q cost -t t '{}' >/dev/null 2>&1 || true
    done
}
producer &
PRODUCER_PID=$!

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }
admin_pid() {
    for p in $(pgrep -P "$DAEMON_PID" 2>/dev/null); do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = delayqd-admin ] && { echo "$p"; return 0; }
    done
    return 0
}

c0=$(cpu_ticks "$DAEMON_PID")
t0=$(date +%s)
end=$((t0 + SECONDS_RUN))
while [ "$(date +%s)" -lt "$end" ]; do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics" || true
    curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" || true
    sleep 1
done
c1=$(cpu_ticks "$DAEMON_PID")
t1=$(date +%s)
kill "$PRODUCER_PID" 2>/dev/null || true
PRODUCER_PID=
done_jobs=$(curl -s "http://127.0.0.1:$PORT/metrics" \
    | awk '/^delayq_jobs_succeeded_total/ { n += $2 } END { print n + 0 }')
a=$(admin_pid)
admin_rss=-
[ -n "$a" ] && admin_rss="$(rss_kb "$a") kB"
awk -v c="$((c1 - c0))" -v hz="$ticks" -v s="$((t1 - t0))" -v rss="$(rss_kb "$DAEMON_PID")" \
    -v hwm="$(hwm_kb "$DAEMON_PID")" -v jobs="$done_jobs" -v admin="$admin_rss" 'BEGIN {
    printf "seconds %d  jobs %d  supervisor cpu %.2f s (%.2f%%)  rss %d kB (peak %d kB)  admin rss %s\n",
        s, jobs, c / hz, 100 * c / hz / s, rss, hwm, admin }'
