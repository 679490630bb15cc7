/*
 * The protocol's common part: the claim batch's bounds, freeing a job, and
 * the element readers the other protocol modules use (lib/sched.c).  The
 * scripts' arguments and replies are in proto_produce.c (enqueue),
 * proto_consume.c (claim, ack, fail, renew, release, recover, reap),
 * proto_admin.c (cancel, run_now, stats, pause, show, the dead letters)
 * and proto_fsck.c.
 */
#include "lib/proto.h"
#include "lib/proto_int.h"

#include <stdlib.h>
#include <string.h>

int proto_claim_batch(int max)
{
    if (max < 1)
        return 1;
    return max > DQ_CLAIM_MAX ? DQ_CLAIM_MAX : max;
}

void proto_job_free(dq_job *j)
{
    free(j->id);
    free(j->type);
    free(j->payload);
    free(j->last_error);
    memset(j, 0, sizeof *j);
}

int64_t proto_elem_int(const redisReply *r, size_t i)
{
    return elem_int(r, i);
}

int proto_elem_is(const redisReply *r, size_t i, const char *s)
{
    return elem_is(r, i, s);
}

char *proto_elem_dup(const redisReply *r, size_t i, size_t *len)
{
    return elem_dup(r, i, len);
}
