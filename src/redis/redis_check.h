/*
 * Start-up checks of the Redis server the daemon will use: its version and
 * its eviction policy (any policy but noeviction may silently delete jobs).
 * In cluster mode: a seed answers, cluster_state is ok, and every master
 * passes the same checks.  Warnings and one-line errors only: Redis may be
 * down at start, and workers wait for it.
 */
#ifndef DQ_REDIS_CHECK_H
#define DQ_REDIS_CHECK_H

#include "config/redis_conf.h"

void redis_check_server(const struct redis_conf *rc);

#endif
