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
