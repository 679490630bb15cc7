/*
 * The reaper process: returns jobs whose lease expired (their worker hung
 * or vanished without the supervisor noticing) to their queue, or buries
 * them when their attempts are used up.  Per queue it sleeps until the next
 * lease expires, at most reaper.interval.
 */
#ifndef DQ_REAPER_H
#define DQ_REAPER_H

#include "daemon/reaper/reaper_args.h"

/* Run in a freshly forked child until SIGTERM/SIGINT; returns the exit code. */
int reaper_main(const struct reaper_args *a);

#endif
