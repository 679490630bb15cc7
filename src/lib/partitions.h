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

/* The partition count of `queue` (cached; 1 for an unpartitioned queue). */
dq_status part_count(dq_client *c, const char *queue, unsigned *n);

/* The keys of partition `part` of `queue` in a queue of `n` partitions
 * (the unpartitioned keys when n is 1). */
void part_keys(const dq_client *c, const char *queue, unsigned part, unsigned n,
               struct queue_keys *k);

#endif
