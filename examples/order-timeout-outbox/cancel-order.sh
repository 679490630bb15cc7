#!/bin/sh
# The order-timeout-outbox handler's program (run by exec.so for each due
# job): the order id arrives on stdin; an order still unpaid is cancelled,
# in PostgreSQL (DEMO_PG_CONNINFO, DEMO_PSQL: set by delayqd.conf's setenv).
# Exit 0: done.  Exit 75: try again later (PostgreSQL unreachable).
# Exit 65: the payload is no order id (retrying would not help).
set -u
order=$(cat)
case "$order" in
    '' | *[!0-9]*) echo "payload '$order' is no order id" >&2; exit 65 ;;
esac
# One statement: cancel it if unpaid, and say what it was otherwise.
status=$("$DEMO_PSQL" -qAtX -v ON_ERROR_STOP=1 -v id="$order" \
    -v by="delayq job $DELAYQ_JOB_ID (attempt $DELAYQ_ATTEMPT)" "$DEMO_PG_CONNINFO" <<'SQL'
WITH cancelled AS (
    UPDATE orders SET status = 'cancelled', cancelled_by = :'by'
    WHERE id = :'id' AND status = 'unpaid' RETURNING id)
SELECT CASE WHEN EXISTS (SELECT FROM cancelled) THEN 'cancelled'
            ELSE coalesce((SELECT status FROM orders WHERE id = :'id'), 'missing') END;
SQL
) || exit 75
case "$status" in
    cancelled) echo "order $order: unpaid after its timeout, cancelled" >&2 ;;
    *) echo "order $order: $status, nothing to do" >&2 ;;
esac
exit 0
