/*
 * The reaper's part in cancelling a running job (cancel_board.h): it
 * listens on the wake channel of every partition of every queue of its
 * configuration, and for each "cancel <fence> <id> <tag>" finds the
 * worker of this daemon that runs that job under that fence and posts
 * the request in its row of the cancel board.  A job claimed here but not
 * started yet (in a worker's slot table, pending) is posted in that
 * worker's row too, which the worker reads before it starts a job (unless
 * the row asks about the job it runs), and looked for again every SCAN_MS
 * until it is skipped or, having started, posted to its run; one this
 * daemon does not hold is someone else's.
 *
 * Messages are not kept by Redis: one published while this connection is
 * down is missed.  So each time the subscription is (again) confirmed,
 * the job each worker here runs is looked up (show) over the reaper's
 * command connection, and one that was cancelled under the fence it runs
 * with is stopped then.  (A job that started and was cancelled while the
 * subscription was down and that connection too runs to its end; it
 * ended in Redis all the same, so its ack is refused and it never runs
 * again.)
 */
#ifndef DQ_REAPER_CANCEL_H
#define DQ_REAPER_CANCEL_H

#include <event2/event.h>

#include "daemon/reaper/reaper_args.h"
#include "redis/rconn.h"

struct reaper_cancel;

/* Listen for `a`'s queues (a is borrowed and must outlive the object) on
 * a connection of its own, started at once, and look jobs up over `cmd`
 * (the reaper's, borrowed: free it first, so that replies in flight
 * reach this object); NULL when out of memory. */
struct reaper_cancel *reaper_cancel_new(struct event_base *base, const struct reaper_args *a,
                                        struct rconn *cmd);

/* The command connection is (again) up (the subscription's own coming up
 * is seen here): look up the jobs running here once both are. */
void reaper_cancel_up(struct reaper_cancel *rc);

/* NULL is ignored. */
void reaper_cancel_free(struct reaper_cancel *rc);

#endif
