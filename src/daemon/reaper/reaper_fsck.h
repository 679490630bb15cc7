/*
 * The reaper's periodic fsck: every reaper.fsck_interval (and at once
 * after each connect), one pass of the fsck script over each queue, in
 * steps of reaper.batch elements, with repair (docs/operations.md).
 *
 * Repairs are logged (the first few of a pass one by one, then a count)
 * and counted per queue in the reaper's slot, with the ids the claim
 * script dropped for a missing record (its meta field orphans_removed,
 * from the first value seen on): both make delayq_orphans_repaired_total.
 * A key of the wrong type is logged once, and again only after a pass
 * found it fixed; the first such key is published in the slot for
 * /healthz.
 */
#ifndef DQ_REAPER_FSCK_H
#define DQ_REAPER_FSCK_H

#include <event2/event.h>

#include "daemon/dconfig.h"
#include "redis/rconn.h"
#include "daemon/slots.h"

struct reaper_fsck;

/* The passes of `dc`'s queues (none when fsck_interval is 0) over `conn`
 * (borrowed), keys under its redis prefix; NULL when out of memory. */
struct reaper_fsck *reaper_fsck_new(struct event_base *base, struct rconn *conn,
                                    const struct daemon_conf *dc,
                                    struct slot_fsck *slot);

/* The connection is (again) up: start a pass of every queue now. */
void reaper_fsck_up(struct reaper_fsck *f);

/* NULL is ignored. */
void reaper_fsck_free(struct reaper_fsck *f);

#endif
