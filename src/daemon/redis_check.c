#include "daemon/redis_check.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "lib/redis_conn.h"
#include "lib/sentinel.h"
#include "lib/redis_io.h"

#define CHECK_TIMEOUT_MS 2000

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
    const char *argv[2] = { "INFO", "server" };
    redisReply *r = redis_io_command(c, 2, argv, NULL);
    char v[32];
    if (r && r->type == REDIS_REPLY_STRING
        && info_field(r->str, "redis_version:", v, sizeof v) && atoi(v) < 7)
        log_err("redis %s is older than 7.0: delayq's scripts will fail", v);
    if (r)
        freeReplyObject(r);
}

static void check_eviction(redisContext *c)
{
    const char *argv[3] = { "CONFIG", "GET", "maxmemory-policy" };
    redisReply *r = redis_io_command(c, 3, argv, NULL);
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
    dq_options opt;
    redis_conf_to_options(rc, &opt);
    opt.connect_timeout_ms = CHECK_TIMEOUT_MS;
    opt.command_timeout_ms = CHECK_TIMEOUT_MS;
    struct redis_conn_opts o;
    char err[512];
    if (redis_conn_opts_copy(&o, &opt, err, sizeof err) < 0) {
        log_err("redis: %s", err);
        return;
    }
    dq_status st = DQ_ERR_NOMEM;
    struct sentinel *sn = opt.sentinel.master ? sentinel_new(&opt, err, sizeof err) : NULL;
    redisContext *c = sn ? sentinel_connect(sn, &o, &st, err, sizeof err)
                      : opt.sentinel.master ? NULL
                                            : redis_conn_open(&o, &st, err, sizeof err);
    sentinel_free(sn);
    if (!c) {
        redis_conn_opts_free(&o);
        if (st == DQ_ERR_AUTH)
            log_err("%s", err);
        else
            log_warn("redis not reachable at start (%s); workers will keep trying", err);
        return;
    }
    check_version(c);
    check_eviction(c);
    redis_io_free(c);
    redis_conn_opts_free(&o);
}
