/*
 * Inside libdelayq: a queue's partition count, as this client knows it.
 *
 * A queue of N > 1 partitions keeps N sets of keys (keys_build_part); the
 * count is stored in the unpartitioned meta hash (KEYS_PARTITIONS_FIELD).
 * The client reads it once per queue and connection and keeps it in a
 * small cache (struct part_cache in client_internal.h), with the
 * per-queue round-robin counters that spread jobs without an id over the
 * partitions and the start of each claim.
 */
#ifndef DQ_PARTITIONS_H
#define DQ_PARTITIONS_H

#include <delayq/client.h>

#include "lib/client_internal.h"
#include "lib/keys.h"

/*
 * The entry of `queue` (a checked name), reading its count from Redis
 * when this connection has not read it yet.  NULL on failure (the
 * client's error says why).  The entry stays valid until the next call
 * into the client.
 */
struct part_entry *part_lookup(dq_client *c, const char *queue, dq_status *st);

/* Forget the count of `queue` this client read: a script said it is no
 * longer the stored one (the count's epoch); the next use reads it. */
void part_forget(dq_client *c, const char *queue);

/* The partition count of `queue` (cached; 1 for an unpartitioned queue). */
dq_status part_count(dq_client *c, const char *queue, unsigned *n);

/*
 * Where a job of `queue` goes: *n receives the queue's count, *part the
 * partition of `id` (keys_partition_of), or for a job without an id (NULL
 * or "") the next partition of this client's round robin.
 */
dq_status part_assign(dq_client *c, const char *queue, const char *id,
                      unsigned *n, unsigned *part);

/* The keys of the partition that holds job `id` of `queue` (checked
 * name), for calls that reach one job; *n (may be NULL) gets the count. */
dq_status part_keys_of_id(dq_client *c, const char *queue, const char *id,
                          struct queue_keys *k, unsigned *n);

/* Build partition `part`'s command of a part_pipeline on its keys `k`. */
typedef void (*part_make_fn)(void *ctx, unsigned part, const struct queue_keys *k,
                             struct cmd *cmd);

/*
 * Script `s` (-1: a plain command) on `calls` partitions of `queue` (of
 * `n`): which[0..calls-1], or partitions 0..calls-1 when `which` is NULL;
 * in one pipeline: under Cluster one write per master, the replies in the
 * order of the partitions in *replies, an array of `calls` it allocates
 * (NULL when the call fails; the caller frees it with part_replies_free).
 * `make` builds each command on its partition's keys, which live until
 * the replies are read.  An error reply fails the whole call
 * (DQ_ERR_REDIS, naming the script or command).
 */
dq_status part_pipeline(dq_client *c, const char *queue, unsigned n, unsigned calls,
                        const unsigned *which, enum dq_script_id s, part_make_fn make,
                        void *ctx, redisReply ***replies);
/* Free the `calls` replies of part_pipeline and their array (NULL: none). */
void part_replies_free(redisReply **replies, unsigned calls);

/* The figures of each of the `n` partitions of `queue` into each[n], in
 * one pipeline. */
dq_status part_stats_all(dq_client *c, const char *queue, unsigned n, dq_stats *each);

/* The keys of partition `part` of `queue` in a queue of `n` partitions
 * (the unpartitioned keys when n is 1). */
void part_keys(const dq_client *c, const char *queue, unsigned part, unsigned n,
               struct queue_keys *k);

#endif
