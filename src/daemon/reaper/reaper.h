/*
 * The reaper process: returns jobs whose lease expired (their worker hung
 * or vanished without the supervisor noticing) to their queue, or buries
 * them when their attempts are used up.  Per queue it sleeps until the next
 * lease expires, at most reaper.interval.
 */
#ifndef DQ_REAPER_H
#define DQ_REAPER_H

#include "daemon/dconfig.h"
#include "daemon/slots.h"

/* Run in a freshly forked child until SIGTERM/SIGINT; returns the exit code.
 * `slot` receives its Redis reconnect count. */
int reaper_main(const struct daemon_conf *dc, struct worker_slot *slot);

#endif
