#include "daemon/redis_check.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

/* The value of `field` in an INFO section, or NULL. */
static const char *info_field(const char *info, const char *field, char *buf, size_t len)
{
    const char *p = strstr(info, field);
    if (!p)
        return NULL;
    p += strlen(field);
    size_t n = strcspn(p, "\r\n");
    if (n >= len)
        n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

static void check_version(redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO server");
    char v[32];
    if (r && r->type == REDIS_REPLY_STRING
        && info_field(r->str, "redis_version:", v, sizeof v) && atoi(v) < 7)
        log_err("redis %s is older than 7.0: delayq's scripts will fail", v);
    if (r)
        freeReplyObject(r);
}

static void check_eviction(redisContext *c)
{
    redisReply *r = redisCommand(c, "CONFIG GET maxmemory-policy");
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[1]->type == REDIS_REPLY_STRING
        && strcmp(r->element[1]->str, "noeviction") != 0)
        log_warn("redis maxmemory-policy is %s: Redis may evict keys and so delete jobs; "
                 "set maxmemory-policy noeviction", r->element[1]->str);
    if (r)
        freeReplyObject(r);
}

void redis_check_server(const struct redis_conf *rc)
{
    struct timeval tv = { 2, 0 };
    redisContext *c = rc->unix_socket
        ? redisConnectUnixWithTimeout(rc->unix_socket, tv)
        : redisConnectWithTimeout(rc->host ? rc->host : "127.0.0.1", rc->port, tv);
    if (!c || c->err) {
        log_warn("redis not reachable at start (%s); workers will keep trying",
                 c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return;
    }
    redisSetTimeout(c, tv);
    int ok = 1;
    if (rc->password) {
        redisReply *r = rc->user ? redisCommand(c, "AUTH %s %s", rc->user, rc->password)
                                 : redisCommand(c, "AUTH %s", rc->password);
        ok = r && r->type != REDIS_REPLY_ERROR;
        if (r && r->type == REDIS_REPLY_ERROR)
            log_err("redis refused AUTH: %s", r->str);
        if (r)
            freeReplyObject(r);
    }
    if (ok) {
        check_version(c);
        check_eviction(c);
    }
    redisFree(c);
}
