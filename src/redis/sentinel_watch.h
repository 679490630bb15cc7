/*
 * sentinel_watch: the daemon's ear on the sentinels.  Behind Sentinel
 * (redis.sentinel), it keeps a connection subscribed to +switch-master on
 * every listed sentinel, and when one announces that the master moved:
 * logs it and tells its owner (the settler process, settler.h), which
 * counts the failover (delayq_failovers_total) and sends SIGUSR2 to the
 * supervisor, which relays it to every child, so that every connection of
 * every process looks the master up at once (rconn.c) rather than at the
 * end of its reconnect backoff.
 *
 * Why every sentinel, not one: the one subscribed to may be the one that
 * is down during the failover; each connection is an rconn that
 * reconnects by itself.  The sentinels each announce the same move: a
 * move to the address already announced is not counted again.
 *
 * Why a signal: the children's connections are down (the old master died)
 * or on a demoted master, so no message through Redis reaches them; a
 * signal does, at once, and the same SIGUSR2 sent by an operator to the
 * supervisor does the same.
 */
#ifndef DQ_SENTINEL_WATCH_H
#define DQ_SENTINEL_WATCH_H

#include <event2/event.h>

#include "config/redis_conf.h"

struct sentinel_watch;

/* Start watching the sentinels of `conf` (conf->sentinel.master set;
 * copied); `on_move(arg)` is called once per new master address
 * announced.  NULL after logging when out of memory. */
struct sentinel_watch *sentinel_watch_new(struct event_base *base,
                                          const struct redis_conf *conf,
                                          void (*on_move)(void *arg), void *arg);

/* Stop watching and free; NULL is ignored. */
void sentinel_watch_free(struct sentinel_watch *w);

#endif
