/*
 * qparts_record: the partition count each configured queue is stored
 * with in Redis (dq_queue_partitions) must be the one in the
 * configuration, or producers and workers would use different keys.
 * delayqd records it at start (dq_queue_set_partitions, which refuses a
 * change over a queue that holds jobs); `delayqd -t` only compares.
 */
#ifndef DQ_QPARTS_RECORD_H
#define DQ_QPARTS_RECORD_H

#include <stddef.h>

#include "daemon/dconfig.h"

enum qparts_outcome {
    QPARTS_OK,              /* recorded (or, checking, the same) */
    QPARTS_REFUSED,         /* a queue's stored count cannot become the
                               configured one: err names it */
    QPARTS_UNREACHABLE      /* Redis did not answer: err says why */
};

/*
 * For every queue of `dc` (only those with partitions > 1 when
 * `only_partitioned`): record its count, or with `check_only` compare it
 * with the stored one and refuse a difference the recording would refuse
 * (the queue holds jobs).  One line in err for anything but QPARTS_OK.
 * Blocking: connects with a short timeout (2 s), for start-up, -t and
 * reloads.
 */
enum qparts_outcome qparts_record(const struct daemon_conf *dc, int check_only,
                                  int only_partitioned, char *err, size_t errlen);

/*
 * A reload from `old` to `new`: QPARTS_REFUSED (one line in err) when it
 * changes a queue's partition count (the workers of both configurations
 * would claim from different keys while the old ones drain), or when Redis
 * refuses to record the count of a queue it adds with partitions > 1;
 * QPARTS_UNREACHABLE when that count could not be recorded (Redis did not
 * answer); QPARTS_OK: go ahead.  Blocking when a partitioned queue is
 * added: the supervisor runs it in a short-lived child (reload_check.h).
 */
enum qparts_outcome qparts_reload_check(const struct daemon_conf *old,
                                        const struct daemon_conf *new, char *err,
                                        size_t errlen) __attribute__((warn_unused_result));

#endif
