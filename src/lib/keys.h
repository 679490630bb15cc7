/*
 * Names of a queue's Redis keys and checks on the names producers choose.
 *
 * Key schema version 2 (docs/protocol.md): for prefix P and queue Q
 *   P:{Q}:jobs P:{Q}:delayed P:{Q}:processing P:{Q}:dead P:{Q}:meta
 *   P:{Q}:lease
 * are the six keys every script receives, in that order (the scripts also
 * keep records in buckets P:{Q}:jobs:N, in the same hash slot); P:{Q}:wake
 * is the channel a script publishes to when a job becomes due sooner than
 * the head; P:queues is the set of queue names, for listing.  The
 * recurring-schedule scripts receive two more, after the six:
 * P:{Q}:schedules (hash: name -> definition) and P:{Q}:schedule_due (zset:
 * name by next fire time).
 */
#ifndef DQ_KEYS_H
#define DQ_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KEYS_SCHEMA_VERSION 2
#define KEYS_PER_SCRIPT 6
#define KEYS_PER_SCRIPT_STR "6"    /* as EVALSHA takes it */
#define KEYS_NAME_MAX 512

struct queue_keys {
    char key[KEYS_PER_SCRIPT][KEYS_NAME_MAX];
    char wake[KEYS_NAME_MAX];
};

/* The two keys of a queue's recurring schedules. */
struct sched_keys {
    char defs[KEYS_NAME_MAX];
    char due[KEYS_NAME_MAX];
};

void keys_build_sched(struct sched_keys *k, const char *prefix, const char *queue);

/* Fill `k` for queue `queue` under `prefix`.  The names must have passed
 * keys_check_queue (and the prefix keys_check_prefix). */
void keys_build(struct queue_keys *k, const char *prefix, const char *queue);

/*
 * Partitioned queues.  A queue of N > 1 partitions keeps N sets of the
 * keys above, partition i tagged {Q:i} instead of {Q} (P:{Q:i}:jobs ...,
 * its wake channel P:{Q:i}:wake), so that Redis Cluster spreads them over
 * its masters; with N = 1 the keys are the unpartitioned ones, unchanged.
 * The queue's partition count is kept in the unpartitioned meta hash,
 * P:{Q}:meta, field KEYS_PARTITIONS_FIELD (absent: 1).
 */
#define KEYS_PARTITIONS_MAX 256
#define KEYS_PARTITIONS_FIELD "partitions"

/*
 * The protocol version a queue's data was written with: the field
 * KEYS_PROTOCOL_FIELD of the unpartitioned meta hash P:{Q}:meta, set
 * (HSETNX) when a producer's connection first registers the queue, and
 * read with the partition count (so neither costs an enqueue anything).
 * Absent means 1.  A client refuses a queue whose version is newer than
 * KEYS_PROTOCOL_VERSION (docs/protocol.md, "Versioning").
 */
#define KEYS_PROTOCOL_FIELD "protocol"
#define KEYS_PROTOCOL_VERSION 1

/* keys_build for partition `part` of a queue of `nparts` partitions. */
void keys_build_part(struct queue_keys *k, const char *prefix, const char *queue,
                     unsigned part, unsigned nparts);

/* keys_build_sched for a queue of `nparts` partitions: the schedules live
 * with partition 0 ({Q:0}), where they fire, when nparts > 1. */
void keys_build_sched_part(struct sched_keys *k, const char *prefix, const char *queue,
                           unsigned nparts);

/*
 * The partition of job `id` in a queue of `nparts` partitions: a
 * generated id (all digits, made as seq * nparts + partition) is its
 * number mod nparts; a schedule's job id (keys_is_schedule_id) is 0, the
 * partition whose keys hold the schedules and where they fire; any other
 * id is CRC16 of the id (cluster_crc16) mod nparts.  Every caller reaches
 * a job by this, without a lookup.
 */
unsigned keys_partition_of(const char *id, unsigned nparts);

/* Whether `id` has the form of a recurring schedule's job id: NAME@ and a
 * tick "2026-11-23T00:00:00Z", or NAME@now- and a time with a fraction
 * "2026-11-23T10:05:00.123Z" (sched_tick_id, sched_now_id). */
bool keys_is_schedule_id(const char *id);

/* The registry set's name: "<prefix>:queues". */
void keys_registry(char *out, size_t outlen, const char *prefix);

/*
 * Checks on user-supplied names.  Each returns NULL when the name is
 * acceptable, otherwise a constant phrase saying what is wrong with it.
 */
const char *keys_check_queue(const char *queue);
const char *keys_check_prefix(const char *prefix);
const char *keys_check_type(const char *type);
const char *keys_check_id(const char *id);

#endif
