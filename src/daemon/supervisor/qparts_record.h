/*
 * qparts_record: the partition count each configured queue is stored
 * with in Redis (dq_queue_partitions) must be the one its workers use, or
 * producers and workers would use different keys.  A queue whose group
 * names `partitions` has that count recorded at start
 * (dq_queue_set_partitions, which refuses a change over a queue that
 * holds jobs); a queue that does not name it takes the stored count
 * (1 when none is stored), so that no start ever lowers a count an
 * operator set with `delayq partitions`.  `delayqd -t` only compares.
 */
#ifndef DQ_QPARTS_RECORD_H
#define DQ_QPARTS_RECORD_H

#include <stddef.h>

#include "daemon/dconfig.h"

enum qparts_outcome {
    QPARTS_OK,              /* recorded or taken (or, checking, the same) */
    QPARTS_REFUSED,         /* a queue's stored count cannot become the
                               configured one: err names it */
    QPARTS_UNREACHABLE      /* Redis did not answer: err says why */
};

/*
 * For every queue of `dc`: record its configured count, or take the
 * stored one into dc when the file names none (logged when above 1).
 * With `check_only`, compare instead of recording, and refuse a
 * difference the recording would refuse (the queue holds jobs).  One line
 * in err for anything but QPARTS_OK; on QPARTS_UNREACHABLE the queues not
 * yet taken keep 1.  Blocking: connects with a short timeout (2 s), for
 * start-up and -t, before the supervisor runs.
 */
enum qparts_outcome qparts_record(struct daemon_conf *dc, int check_only, char *err,
                                  size_t errlen);

/*
 * A reload from `old` to `new`, in the supervisor before its check: a
 * queue both run that `new` gives no count takes the one `old` runs it
 * with.  No call to Redis.
 */
void qparts_carry_over(const struct daemon_conf *old, struct daemon_conf *new);

/*
 * A reload from `old` to `new` (carried over): QPARTS_REFUSED (one line
 * in err) when it changes a queue's partition count (the workers of both
 * configurations would claim from different keys while the old ones
 * drain), when Redis refuses to record the count of a queue it adds with
 * partitions > 1, or when a queue it adds without a count is stored with
 * more than 1 (the count found here could not reach the supervisor);
 * QPARTS_UNREACHABLE when such a count could not be read or recorded;
 * QPARTS_OK: go ahead.  Blocking when a queue is added: the supervisor
 * runs it in a short-lived child (reload_check.h).
 */
enum qparts_outcome qparts_reload_check(const struct daemon_conf *old,
                                        const struct daemon_conf *new, char *err,
                                        size_t errlen) __attribute__((warn_unused_result));

#endif
