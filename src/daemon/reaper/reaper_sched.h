/*
 * The reaper's recurring schedules: every second, for each queue this
 * daemon serves, the schedules whose next tick is due within
 * SCHED_LOOKAHEAD_MS (or overdue) are fired through sched_fire, which
 * makes each tick's job (due at the tick) and moves the schedule on in
 * one atomic step, and only while the schedule still has the tick read:
 * however many daemons race, each tick makes one job (lib/sched.h).  The
 * next tick is computed here (Lua has no time zones); ticks missed while
 * no daemon ran follow each schedule's catch-up policy.  After each
 * connect (so at start and after a reload, which starts a new reaper) the
 * schedules of the config file are stored first (dconfig_sched.h).
 */
#ifndef DQ_REAPER_SCHED_H
#define DQ_REAPER_SCHED_H

#include <event2/event.h>

#include "daemon/dconfig.h"
#include "redis/rconn.h"

struct reaper_sched;

/* The schedules of `dc`'s queues over `conn` (borrowed; free it first,
 * so that replies in flight reach this object); NULL when out of memory.
 * Polls start with reaper_sched_up. */
struct reaper_sched *reaper_sched_new(struct event_base *base, struct rconn *conn,
                                      const struct daemon_conf *dc);

/* The connection is (again) up: poll every queue now. */
void reaper_sched_up(struct reaper_sched *s);

/* NULL is ignored. */
void reaper_sched_free(struct reaper_sched *s);

#endif
