/*
 * What a reply means to the blocking client, on one server or over a
 * cluster (client.c and client_cluster.c both judge with these): the
 * call's one-line error, an error reply as a status, WAIT's answer, and
 * loading a script.
 */
#include "lib/client_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "redis/redis_io.h"
#include "lib/scripts.h"

dq_status client_fail(dq_client *c, dq_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return st;
}

dq_status client_script_load(dq_client *c, redisContext *rc, enum dq_script_id s)
{
    const char *argv[3] = { "SCRIPT", "LOAD", dq_scripts[s].text };
    redisReply *r = redis_io_command(rc, 3, argv, NULL);
    if (!r)
        return DQ_ERR_CONNECT;
    dq_status st = DQ_OK;
    if (r->type == REDIS_REPLY_ERROR)
        st = client_fail(c, DQ_ERR_REDIS, "redis refused the %s script: %s",
                         dq_scripts[s].name, r->str);
    freeReplyObject(r);
    return st;
}

dq_status client_check_reply(dq_client *c, const redisReply *r, const char *what)
{
    if (r->type != REDIS_REPLY_ERROR)
        return DQ_OK;
    if (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0)
        return client_fail(c, DQ_ERR_AUTH, "redis: %s", r->str);
    return client_fail(c, DQ_ERR_REDIS, "redis error in %s: %s", what, r->str);
}

int client_wants_wait(const dq_client *c, int s)
{
    return c->durability == DQ_DURABILITY_REPLICATED && redis_conn_script_writes(s);
}

dq_status client_check_wait(dq_client *c, const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 1)
        return DQ_OK;
    if (r->type == REDIS_REPLY_ERROR)
        return client_fail(c, DQ_ERR_REDIS, "redis error in WAIT: %s", r->str);
    return client_fail(c, DQ_ERR_TIMEOUT,
                       "not replicated within %d ms (the write is on the master only)",
                       c->replication_timeout_ms);
}
