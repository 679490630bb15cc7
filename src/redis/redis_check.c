#include "redis/redis_check.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "redis/cluster_map.h"
#include "redis/redis_conn.h"
#include "redis/sentinel.h"
#include "redis/redis_io.h"

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

static void check_version(redisContext *c, const char *where)
{
    const char *argv[2] = { "INFO", "server" };
    redisReply *r = redis_io_command(c, 2, argv, NULL);
    char v[32];
    if (r && r->type == REDIS_REPLY_STRING
        && info_field(r->str, "redis_version:", v, sizeof v) && atoi(v) < 7)
        log_err("redis%s%s %s is older than 7.0: delayq's scripts will fail",
                *where ? " " : "", where, v);
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

/* With cluster-require-full-coverage yes (Redis's default), every master
 * refuses commands (CLUSTERDOWN) once one master is marked failed and no
 * replica took its slots: the partitions on the masters still up stop
 * too.  Said once per master at start, as a notice: it is the operator's
 * choice. */
static void check_coverage(redisContext *c, const char *where)
{
    const char *argv[3] = { "CONFIG", "GET", "cluster-require-full-coverage" };
    redisReply *r = redis_io_command(c, 3, argv, NULL);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
        && r->element[1]->type == REDIS_REPLY_STRING && strcmp(r->element[1]->str, "yes") == 0)
        log_info("redis cluster master %s: cluster-require-full-coverage yes: a master down "
                 "without a replica to promote stops every master's partitions; with no, "
                 "only its own wait", where);
    if (r)
        freeReplyObject(r);
}

/* A blocking connection to HOST:PORT under `o`'s other settings, or NULL
 * with the reason in err. */
static redisContext *open_node(const struct redis_conn_opts *o, const char *host, int port,
                               char *err, size_t errlen)
{
    struct redis_conn_opts at = *o;
    at.host = (char *)host;
    at.port = port;
    dq_status st;
    return redis_conn_open(&at, &st, err, errlen);
}

/* The first seed that answers, its address in host/port; NULL after a
 * warning naming the last failure. */
static redisContext *open_seed(const struct redis_conn_opts *o, const dq_options *opt,
                               char *host, size_t hostlen, int *port)
{
    char err[400] = "no seed node";
    for (size_t i = 0; i < (opt->nnodes ? opt->nnodes : 1); i++) {
        const char *why;
        if (opt->nnodes)
            (void)sentinel_parse_node(opt->nodes[i], host, hostlen, port, &why);
        else {
            snprintf(host, hostlen, "%s", o->host);
            *port = o->port;
        }
        redisContext *c = open_node(o, host, *port, err, sizeof err);
        if (c)
            return c;
    }
    log_warn("redis cluster: no seed node answers at start (%s); workers will keep trying",
             err);
    return NULL;
}

/* CLUSTER INFO says cluster_state:ok; else one error line. */
static void check_cluster_state(redisContext *c, const char *where)
{
    const char *argv[2] = { "CLUSTER", "INFO" };
    redisReply *r = redis_io_command(c, 2, argv, NULL);
    char state[32];
    if (!r || r->type != REDIS_REPLY_STRING)
        log_err("redis cluster %s: CLUSTER INFO failed (%s): is it a cluster node?", where,
                r && r->type == REDIS_REPLY_ERROR ? r->str : redis_io_errstr(c));
    else if (!info_field(r->str, "cluster_state:", state, sizeof state)
             || strcmp(state, "ok") != 0)
        log_err("redis cluster %s: cluster_state is %s, not ok: some slots are not served",
                where, info_field(r->str, "cluster_state:", state, sizeof state) ? state : "?");
    if (r)
        freeReplyObject(r);
}

/* Every master of the seed's slot map: its version, eviction policy and
 * coverage rule. */
static void check_masters(const struct redis_conn_opts *o, redisContext *seed,
                          const char *seed_host)
{
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    redisReply *r = redis_io_command(seed, 2, argv, NULL);
    struct cluster_map map;
    cluster_map_init(&map);
    char err[400];
    if (cluster_map_load(&map, r, seed_host, err, sizeof err) < 0)
        log_err("redis cluster: %s", err);
    for (size_t i = 0; i < map.nnodes; i++) {
        char where[300];
        snprintf(where, sizeof where, "%s:%d", map.nodes[i].host, map.nodes[i].port);
        redisContext *c = open_node(o, map.nodes[i].host, map.nodes[i].port, err, sizeof err);
        if (!c) {
            log_warn("redis cluster: master %s does not answer (%s)", where, err);
            continue;
        }
        check_version(c, where);
        check_eviction(c);
        check_coverage(c, where);
        redis_io_free(c);
    }
    cluster_map_free(&map);
    if (r)
        freeReplyObject(r);
}

/* Cluster mode: a seed answers, the cluster is ok, every master is 7.0 or
 * newer. */
static void check_cluster(const struct redis_conn_opts *o, const dq_options *opt)
{
    char host[CLUSTER_HOST_MAX], where[300];
    int port;
    redisContext *c = open_seed(o, opt, host, sizeof host, &port);
    if (!c)
        return;
    snprintf(where, sizeof where, "%s:%d", host, port);
    check_cluster_state(c, where);
    check_masters(o, c, host);
    redis_io_free(c);
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
    if (opt.cluster) {
        check_cluster(&o, &opt);
        redis_conn_opts_free(&o);
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
    check_version(c, "");
    check_eviction(c);
    redis_io_free(c);
    redis_conn_opts_free(&o);
}
