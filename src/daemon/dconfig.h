/*
 * The daemon's configuration file (libconfig syntax; etc/delayqd.conf is
 * the commented example).  Loaded whole at start and on SIGHUP; a file
 * that fails any check is refused with one "FILE:LINE: message" and, on
 * reload, the configuration in force is kept.
 */
#ifndef DQ_DCONFIG_H
#define DQ_DCONFIG_H

#include "daemon/dconfig_types.h"

/* Load and check `path` into `dc` (which it initialises).  Returns 0, or -1
 * with one line in err; `dc` then owns nothing. */
int dconfig_load(struct daemon_conf *dc, const char *path, char *err,
                 size_t errlen) __attribute__((warn_unused_result));

void dconfig_free(struct daemon_conf *dc);

/* The queue of `dc` named "X:<digits>" when `x` is named X: were x
 * partitioned, the two would share the key tag {X:<digits>}.  NULL when
 * there is none. */
const struct queue_conf *dconfig_partition_clash(const struct daemon_conf *dc,
                                                 const struct queue_conf *x);

/* The handler entry for a job type: the exact entry, else the fallback
 * ("*"), else NULL.  A NULL type stands for a type with no entry of its own. */
const struct handler_conf *dconfig_handler_for(const struct daemon_conf *dc,
                                               const char *type);

/*
 * The one rule for how many attempts a job gets, after the job's own limit
 * (which the scripts apply first, when the producer set one): the limit of
 * its type's handler entry (the exact entry, else "*"), else the queue's
 * max_attempts, else the default (5).  The worker, the reaper and the
 * supervisor all ask this; delayqd.conf(5) states it.  A NULL type stands
 * for a type with no entry of its own.
 */
int dconfig_max_attempts(const struct daemon_conf *dc, const struct queue_conf *q,
                         const char *type);

/*
 * The retry policy for a job of `type` on queue `q`: the queue's backoff
 * with dconfig_max_attempts as its default limit.  The one set-up for the
 * worker's failure reports, the reaper's expired leases and the settlement
 * of a dead worker's jobs.
 */
dq_retry_policy dconfig_retry_for(const struct daemon_conf *dc, const struct queue_conf *q,
                                  const char *type);

#endif
