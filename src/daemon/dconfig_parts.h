/*
 * dconfig_parts: the daemon's one walk over every partition of every
 * configured queue, with each partition's keys built once here.
 */
#ifndef DQ_DCONFIG_PARTS_H
#define DQ_DCONFIG_PARTS_H

#include <stddef.h>

#include "daemon/dconfig.h"
#include "lib/keys.h"

/*
 * Every partition of every queue, in order (queue 0's partitions 0..n-1,
 * then queue 1's, ...), with its keys under the configured prefix (which
 * redis_conf_read resolved when the file was loaded):
 *
 *     struct dconfig_part it;
 *     for (dconfig_parts_begin(&it, dc); dconfig_parts_next(&it);)
 *         use(it.q, it.part, &it.keys);
 *
 * The one expansion of "each queue, each partition" for the daemon's
 * modules; it.at counts 0.. over all of them (dconfig_parts_count in all).
 */
struct dconfig_part {
    const struct daemon_conf *dc;
    size_t queue;               /* index in dc->queues */
    const struct queue_conf *q;
    unsigned part;              /* 0..nparts-1 */
    unsigned nparts;
    size_t at;                  /* 0.. over every partition of every queue */
    struct queue_keys keys;     /* this partition's */
    int started;
};

void dconfig_parts_begin(struct dconfig_part *it, const struct daemon_conf *dc);
/* Move to the next partition: 1, or 0 when there is none. */
int dconfig_parts_next(struct dconfig_part *it);
/* How many partitions all the queues have. */
size_t dconfig_parts_count(const struct daemon_conf *dc);

#endif
