#!/bin/sh
# The dashboard in a real browser (tests/browser/ui-test.py has the
# scenario): this starts a private redis-server and the built delayqd with
# the dashboard on (a token file, the test handler), runs the scenario in
# Debian's headless Chromium through chromedriver, and stops everything it
# started by pid, also when it fails or is interrupted.
#
# Skipped (77, one line) without chromium, chromedriver, python3,
# redis-server or the built test handler.  Screenshots (overview, queue
# page, job page) go to $BROWSER_SHOTS, by default the test's temporary
# directory, which is kept (and named) only when the test fails.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
chromium=/usr/bin/chromium
chromedriver=/usr/bin/chromedriver
handlers=$top/tests/plugins/.libs

skip() { echo "browser test skipped: $*"; exit 77; }
[ -x "$chromium" ] || skip "no $chromium (apt-get install chromium chromium-driver)"
[ -x "$chromedriver" ] || skip "no $chromedriver (apt-get install chromium-driver)"
command -v python3 >/dev/null 2>&1 || skip "no python3 (apt-get install python3)"
{ [ -n "$server" ] && [ -x "$server" ]; } || skip "no redis-server (apt-get install redis-server)"
[ -f "$handlers/testhandler.so" ] || skip "the test handler is not built ($handlers/testhandler.so; make check builds it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/browser-ui.XXXXXX") || exit 1
shots=${BROWSER_SHOTS:-$tmp/shots}
redis_pid="" daemon_pid="" test_pid="" status=1

# stop PID NAME: TERM, up to 10 s for it to exit, then KILL.
stop() {
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null || return 0
    i=0
    while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$1" 2>/dev/null; then
        echo "browser-ui: $2 ($1) did not stop in 10 s: killing it"
        kill -KILL "$1" 2>/dev/null
    fi
    wait "$1" 2>/dev/null
}
cleanup() {
    trap - EXIT INT TERM
    stop "$test_pid" "the browser scenario"
    stop "$daemon_pid" "delayqd"
    stop "$redis_pid" "redis-server"
    if [ "$status" = 0 ]; then
        rm -rf "$tmp"
        [ -n "${BROWSER_SHOTS:-}" ] ||
            echo "browser-ui: (removed with the test's directory: BROWSER_SHOTS=DIR keeps the screenshots)"
    else
        echo "browser-ui: delayqd's log, the handler's record, the browser's files: $tmp"
        [ -f "$tmp/delayqd.log" ] && tail -n 30 "$tmp/delayqd.log"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'status=130; cleanup' INT
trap 'status=143; cleanup' TERM
fail() { echo "browser-ui: $*"; status=1; exit 1; }

# Redis on a unix socket only.
sock=$tmp/redis.sock
"$server" --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis_pid=$!
i=0
until [ -S "$sock" ] && "$top/delayq" -s "$sock" stats >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 100 ] || fail "redis-server did not answer on $sock in 10 s: $(tail -n 5 "$tmp/redis.log")"
    kill -0 "$redis_pid" 2>/dev/null || fail "redis-server exited: $(tail -n 5 "$tmp/redis.log")"
    sleep 0.1
done

# The token file: delayqd refuses one that others may read.
(umask 077 && od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/ui.token") ||
    fail "cannot write $tmp/ui.token"
chmod 600 "$tmp/ui.token"

# delayqd refuses handlers that others could replace.
chmod go-w "$handlers" "$handlers/testhandler.so"
port=$(PYTHONPATH="$srcdir/tests/python" python3 -c 'from ports import free_port; print(free_port())')
cat >"$tmp/delayqd.conf" <<EOF
redis = { unix_socket = "$sock"; };
handler_dir = "$(cd "$handlers" && pwd)";
admin = { listen = "127.0.0.1:$port"; ui = true; token_file = "$tmp/ui.token"; };
queues = (
  { name = "orders"; workers = 2; lease = "30s"; max_attempts = 3;
    backoff = { base = "100ms"; cap = "1s"; jitter = 0.0; }; },
  { name = "mail"; workers = 1; }
);
handlers = ( { type = "*"; file = "testhandler.so"; timeout = "10s";
               settings = { record = "$tmp/record.log"; }; } );
reaper = { interval = "1s"; batch = 100; };
shutdown_timeout = "5s";
log = { level = "info"; target = "stderr"; };
EOF
"$top/delayqd" -f -c "$tmp/delayqd.conf" >"$tmp/delayqd.log" 2>&1 &
daemon_pid=$!
sleep 0.2
kill -0 "$daemon_pid" 2>/dev/null || fail "delayqd exited at start: $(tail -n 5 "$tmp/delayqd.log")"

mkdir -p "$shots" "$tmp/browser"
PYTHONDONTWRITEBYTECODE=1 python3 "$srcdir/tests/browser/ui-test.py" --url "http://127.0.0.1:$port/ui" \
    --token-file "$tmp/ui.token" --queue orders=2 --queue mail=1 \
    --delayq "$top/delayq" --redis-socket "$sock" --record "$tmp/record.log" \
    --flag "$tmp/flag" --shots "$shots" --work "$tmp/browser" &
test_pid=$!
wait "$test_pid"
status=$?
test_pid=""
kill -0 "$daemon_pid" 2>/dev/null || { echo "browser-ui: delayqd died during the test"; status=1; }
stop "$daemon_pid" "delayqd"
daemon_pid=""
# In a sanitizer build, a report from the supervisor or a worker fails the
# test even when the pages looked right.
if grep -q -e 'Sanitizer' -e 'runtime error:' "$tmp/delayqd.log"; then
    echo "browser-ui: sanitizer report in delayqd's log:"
    grep -A 20 -e 'Sanitizer' -e 'runtime error:' "$tmp/delayqd.log" | head -n 60
    status=1
fi
exit "$status"
