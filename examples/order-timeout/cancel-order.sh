#!/bin/sh
# The order-timeout handler's program (run by exec.so for each due job):
# the order id arrives on stdin; an order still unpaid is cancelled.
# Exit 0: done.  Exit 75: try again later (Redis unreachable).
set -u
order=$(cat)
key="demo:order:$order"
status=$(redis-cli -s "$DEMO_REDIS_SOCK" HGET "$key" status) || exit 75
case "$status" in
    unpaid)
        redis-cli -s "$DEMO_REDIS_SOCK" HSET "$key" status cancelled \
            cancelled_by "delayq job $DELAYQ_JOB_ID (attempt $DELAYQ_ATTEMPT)" >/dev/null || exit 75
        echo "order $order: unpaid after its timeout, cancelled" >&2 ;;
    *)
        echo "order $order: $status, nothing to do" >&2 ;;
esac
exit 0
