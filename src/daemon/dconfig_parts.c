/*
 * Every partition of every queue (see dconfig_parts.h).
 */
#include "daemon/dconfig_parts.h"

#include <string.h>

void dconfig_parts_begin(struct dconfig_part *it, const struct daemon_conf *dc)
{
    memset(it, 0, sizeof *it);
    it->dc = dc;
}

int dconfig_parts_next(struct dconfig_part *it)
{
    const struct daemon_conf *dc = it->dc;
    if (!it->started) {
        it->started = 1;
        it->queue = 0;
        it->part = 0;
    } else {
        it->at++;
        if (++it->part >= it->nparts) {
            it->part = 0;
            it->queue++;
        }
    }
    if (it->queue >= dc->nqueues)
        return 0;
    it->q = &dc->queues[it->queue];
    it->nparts = it->q->partitions > 1 ? (unsigned)it->q->partitions : 1;
    keys_build_part(&it->keys, dc->redis.prefix, it->q->name, it->part, it->nparts);
    return 1;
}

size_t dconfig_parts_count(const struct daemon_conf *dc)
{
    size_t n = 0;
    for (size_t i = 0; i < dc->nqueues; i++)
        n += dc->queues[i].partitions > 1 ? (size_t)dc->queues[i].partitions : 1;
    return n;
}
