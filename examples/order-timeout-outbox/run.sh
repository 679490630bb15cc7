#!/bin/sh
# The order-timeout demo through the PostgreSQL outbox (docs/outbox.md),
# end to end on a private redis-server and a private PostgreSQL 15: six
# orders are created, each in one transaction that inserts the order and
# enqueues its unpaid-timeout job, due in 3 s (delayq_enqueue); a seventh
# order's transaction rolls back and leaves no job; two orders are paid in
# time, each payment cancelling its timeout job in the same transaction
# (delayq_cancel).  delayqd's relay moves the committed rows to Redis; the
# four timeouts left fire, and their handler (exec.so running
# cancel-order.sh) cancels those orders in PostgreSQL.
# ./examples/order-timeout-outbox/run.sh [BUILDDIR] (by default the source
# tree).  Exit 77 (one line) without PostgreSQL 15 (PG_BINDIR, by default
# /usr/lib/postgresql/15/bin) or with a delayqd built without libpq.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../..}" && pwd)
delayq=$build/delayq delayqd=$build/delayqd handlers=$build/handlers/.libs
for f in "$delayq" "$delayqd" "$handlers/exec.so"; do
    [ -e "$f" ] || { echo "run.sh: no delayq built in $build: run ./quickstart demo" >&2; exit 2; }
done
pgbin=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
for f in initdb postgres psql pg_isready; do
    [ -x "$pgbin/$f" ] || { echo "run.sh: skipped: no PostgreSQL 15 ($pgbin/$f; apt-get install postgresql-15)"; exit 77; }
done
redis=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
dir=$(mktemp -d)
chmod 755 "$dir"
cleanup() {
    if [ -f "$dir/delayqd.pid" ]; then
        kill "$(cat "$dir/delayqd.pid")" 2>/dev/null || true
        wait "$(cat "$dir/delayqd.pid")" 2>/dev/null || true
    fi
    if [ -f "$dir/redis.pid" ]; then        # not our child: wait until it is gone
        pid=$(cat "$dir/redis.pid") i=0
        kill "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    fi
    if [ -f "$dir/postgres.pid" ]; then     # a fast shutdown: it waits for its children
        kill -INT "$(cat "$dir/postgres.pid")" 2>/dev/null || true
        wait "$(cat "$dir/postgres.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# PostgreSQL's own files belong to its user: nobody when we are root
# (initdb and postgres refuse to run as root).
pgdata=$dir/pgdata pgsock=$dir/pgsock port=5432
mkdir "$pgdata" "$pgsock"
as_root=no
if [ "$(id -u)" = 0 ]; then
    as_root=yes
    chown nobody:nogroup "$pgdata" "$pgsock"
fi
# exec_pg PROGRAM ARGS...: become PROGRAM as PostgreSQL's user.  It execs,
# so run it in a subshell, or in the background: $! is then the program's.
exec_pg() {
    if [ $as_root = yes ]; then
        exec setpriv --reuid=nobody --regid=nogroup --clear-groups -- env LC_ALL=C TZ=UTC "$@"
    fi
    exec env LC_ALL=C TZ=UTC "$@"
}
sql() {     # sql USER: run stdin as USER of database shop, quietly
    "$pgbin/psql" -qAtX -v ON_ERROR_STOP=1 "host=$pgsock port=$port dbname=shop user=$1"
}

sock=$dir/redis.sock
cat >"$dir/delayqd.conf" <<CONF
redis = { unix_socket = "$sock"; };
handler_dir = "$handlers";
log = { level = "debug"; };
queues = ( { name = "orders"; workers = 2; lease = "1m"; batch = 8; max_attempts = 3;
             backoff = { base = "500ms"; cap = "5s"; }; } );
handlers = ( { type = "order.cancel"; file = "exec.so"; timeout = "10s";
               settings = { argv = [ "$here/cancel-order.sh" ];
                            setenv = { DEMO_PSQL = "$pgbin/psql";
                                       DEMO_PG_CONNINFO = "host=$pgsock port=$port dbname=shop user=shop"; }; }; } );
sources = ( { type = "postgres"; conninfo = "host=$pgsock port=$port dbname=shop user=delayq";
              table = "delayq_outbox"; poll_interval = "500ms"; } );
CONF
# Before anything starts: a delayqd without libpq refuses any source.
rc=0
out=$("$delayqd" -t -c "$dir/delayqd.conf" 2>&1) || rc=$?
case "$rc:$out" in
    78:*"built without PostgreSQL"*) echo "run.sh: skipped: this delayqd was built without PostgreSQL (libpq)"; exit 77 ;;
    0:*) ;;
    *) printf '%s\n' "$out" >&2; exit 1 ;;
esac

"$redis" --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
cd "$dir"       # where nobody may be
(exec_pg "$pgbin/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --locale=C \
    --no-sync --no-instructions) >"$dir/initdb.log" 2>&1 ||
    { echo "run.sh: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1; }
exec_pg "$pgbin/postgres" -D "$pgdata" -c listen_addresses='' -c unix_socket_directories="$pgsock" \
    -c port=$port -c fsync=off >"$dir/postgres.log" 2>&1 &
echo $! >"$dir/postgres.pid"
i=0
until redis-cli -s "$sock" ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "run.sh: redis-server did not start" >&2; exit 1; }
    sleep 0.05
done
i=0
until "$pgbin/pg_isready" -q -h "$pgsock" -p $port; do
    i=$((i + 1))
    if [ $i -ge 300 ] || ! kill -0 "$(cat "$dir/postgres.pid")" 2>/dev/null; then
        echo "run.sh: postgres did not start:" >&2; cat "$dir/postgres.log" >&2; exit 1
    fi
    sleep 0.05
done

# The shop's database, owned by its service's role; delayqd's role gets
# what the relay needs (the grants of docs/outbox.md).
"$pgbin/psql" -qAtX -v ON_ERROR_STOP=1 "host=$pgsock port=$port dbname=postgres user=postgres" <<'SQL'
CREATE ROLE shop LOGIN;
CREATE ROLE delayq LOGIN;
CREATE DATABASE shop OWNER shop;
SQL
"$delayq" outbox sql | sql shop
sql shop <<'SQL'
CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL, cancelled_by text);
GRANT SELECT, UPDATE, DELETE ON delayq_outbox TO delayq;
GRANT INSERT ON delayq_outbox_dead TO delayq;
SQL
"$delayqd" -t -c "$dir/delayqd.conf"
"$delayqd" -f -c "$dir/delayqd.conf" 2>"$dir/delayqd.log" &
echo $! >"$dir/delayqd.pid"

dq() { "$delayq" -s "$sock" "$@"; }
outbox_rows() { echo 'SELECT count(*) FROM delayq_outbox' | sql shop; }
echo "== six orders, each created in one transaction with its unpaid-timeout job, due in 3 s =="
for order in 1001 1002 1003 1004 1005 1006; do
    row=$(sql shop <<SQL
BEGIN;
INSERT INTO orders (id, status) VALUES ($order, 'unpaid');
SELECT delayq_enqueue('orders', 'order.cancel', convert_to('$order', 'UTF8'),
                      interval '3 seconds', 'order:$order:cancel');
COMMIT;
SQL
)
    echo "order $order: created, timeout job order:$order:cancel (outbox row $row)"
done
echo "== order 1007's transaction rolls back: no order, and no job =="
row=$(sql shop <<SQL
BEGIN;
INSERT INTO orders (id, status) VALUES (1007, 'unpaid');
SELECT delayq_enqueue('orders', 'order.cancel', convert_to('1007', 'UTF8'),
                      interval '3 seconds', 'order:1007:cancel');
ROLLBACK;
SQL
)
echo "order 1007: rolled back, and its outbox row $row with it"
echo "== orders 1002 and 1005 are paid: each payment cancels its timeout job in its transaction =="
for order in 1002 1005; do
    row=$(sql shop <<SQL
BEGIN;
UPDATE orders SET status = 'paid' WHERE id = $order AND status = 'unpaid';
SELECT delayq_cancel('orders', 'order:$order:cancel');
COMMIT;
SQL
)
    echo "order $order: paid, timeout cancelled (outbox row $row)"
done
echo "== delayqd's relay moves the committed rows to Redis =="
i=0
until [ "$(outbox_rows)" = 0 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "run.sh: rows not relayed; log:" >&2; cat "$dir/delayqd.log" >&2; exit 1; }
    sleep 0.05
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
echo "SELECT 'order ' || id || ': ' || status || coalesce(' by ' || cancelled_by, '')
      FROM orders ORDER BY id" | sql shop
shown=0
dq show -q orders order:1007:cancel >/dev/null 2>&1 || shown=$?
exists=$(echo 'SELECT count(*) FROM orders WHERE id = 1007' | sql shop)
if [ "$exists:$shown" = 0:1 ]; then
    echo "order 1007: no order, no job (delayq show -q orders order:1007:cancel exits 1)"
else
    echo "order 1007: $exists order rows; delayq show -q orders order:1007:cancel exits $shown"
fi
left=$(outbox_rows)
dead=$(echo 'SELECT count(*) FROM delayq_outbox_dead' | sql shop)
echo "outbox: $left rows left, $dead dead"
dq stats
echo "== delayqd's log =="
kill "$(cat "$dir/delayqd.pid")"
wait "$(cat "$dir/delayqd.pid")" 2>/dev/null || true
rm -f "$dir/delayqd.pid"
cat "$dir/delayqd.log"
cancelled=$(echo "SELECT count(*) FROM orders WHERE id IN (1001, 1003, 1004, 1006) AND status = 'cancelled'" | sql shop)
paid=$(echo "SELECT count(*) FROM orders WHERE id IN (1002, 1005) AND status = 'paid'" | sql shop)
# Its job never was: not in Redis now, and no worker ever ran it.
never=yes
{ [ "$exists:$shown" = 0:1 ] && ! grep -q 'order:1007:' "$dir/delayqd.log"; } || never=no
echo "== $cancelled of 4 unpaid orders cancelled, $paid of 2 paid orders kept," \
     "rolled-back order 1007 left no job: $never; outbox: $left rows left, $dead dead =="
[ "$cancelled" = 4 ] && [ "$paid" = 2 ] && [ $never = yes ] && [ "$left" = 0 ] && [ "$dead" = 0 ]
