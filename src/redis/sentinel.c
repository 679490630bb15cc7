/*
 * Finding the master through Redis Sentinel (see sentinel.h).
 */
#include "redis/sentinel.h"
#include "redis/redis_io.h"
#include "util/clock.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int sentinel_parse_node(const char *node, char *host, size_t hostlen, int *port,
                        const char **why)
{
    const char *colon = strrchr(node, ':');
    const char *h = node, *h_end = colon;
    if (!colon || colon == node) {
        *why = "expected HOST:PORT";
        return -1;
    }
    if (node[0] == '[') {
        if (colon[-1] != ']' || colon - node < 3) {
            *why = "expected [IPV6]:PORT";
            return -1;
        }
        h = node + 1;
        h_end = colon - 1;
    }
    if ((size_t)(h_end - h) >= hostlen) {
        *why = "the host name is too long";
        return -1;
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || p < 1 || p > 65535) {
        *why = "the port must be a number from 1 to 65535";
        return -1;
    }
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = '\0';
    *port = (int)p;
    return 0;
}

/* Add host:port to the list unless it is there or the list is full.
 * -1 only when memory ran out. */
static int add_node(struct sentinel *s, const char *host, int port)
{
    for (size_t i = 0; i < s->nnodes; i++)
        if (s->nodes[i].port == port && strcmp(s->nodes[i].host, host) == 0)
            return 0;
    if (s->nnodes == SENTINEL_MAX_NODES)
        return 0;
    char *copy = strdup(host);
    if (!copy)
        return -1;
    s->nodes[s->nnodes++] = (struct sentinel_node){ copy, port };
    return 0;
}

struct sentinel *sentinel_new(const dq_options *opt, char *err, size_t errlen)
{
    const dq_sentinel_options *so = &opt->sentinel;
    if (!so->master || !*so->master || so->nnodes == 0) {
        snprintf(err, errlen, "sentinel: a master name and at least one sentinel are needed");
        return NULL;
    }
    struct sentinel *s = calloc(1, sizeof *s);
    if (!s || !(s->master = strdup(so->master))) {
        snprintf(err, errlen, "out of memory");
        sentinel_free(s);
        return NULL;
    }
    for (size_t i = 0; i < so->nnodes; i++) {
        char host[SENTINEL_HOST_MAX];
        int port;
        const char *why;
        if (sentinel_parse_node(so->nodes[i], host, sizeof host, &port, &why) < 0) {
            snprintf(err, errlen, "sentinel '%s': %s", so->nodes[i], why);
            sentinel_free(s);
            return NULL;
        }
        if (add_node(s, host, port) < 0) {
            snprintf(err, errlen, "out of memory");
            sentinel_free(s);
            return NULL;
        }
    }
    /* The caller's settings (timeouts, TLS) with the sentinels' own
     * credentials; a sentinel has no databases. */
    dq_options via = *opt;
    via.unix_path = NULL;
    via.user = so->user;
    via.password = so->password;
    via.db = 0;
    if (via.connect_timeout_ms <= 0 || via.connect_timeout_ms > SENTINEL_TIMEOUT_MS)
        via.connect_timeout_ms = SENTINEL_TIMEOUT_MS;
    if (via.command_timeout_ms <= 0 || via.command_timeout_ms > SENTINEL_TIMEOUT_MS)
        via.command_timeout_ms = SENTINEL_TIMEOUT_MS;
    char why[200];
    if (redis_conn_opts_copy(&s->via, &via, why, sizeof why) < 0) {
        snprintf(err, errlen, "sentinel: %s", why);
        sentinel_free(s);
        return NULL;
    }
    return s;
}

void sentinel_free(struct sentinel *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnodes; i++)
        free(s->nodes[i].host);
    free(s->master);
    redis_conn_opts_free(&s->via);
    free(s);
}

/* The value of `key` in a reply that lists keys and values in turn (what
 * SENTINEL sentinels gives for each sentinel); NULL when absent. */
static const char *field(const redisReply *r, const char *key)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING
            && r->element[i + 1]->type == REDIS_REPLY_STRING
            && strcmp(r->element[i]->str, key) == 0)
            return r->element[i + 1]->str;
    return NULL;
}

/* Step 3: add the sentinels that `rc`'s sentinel knows of.  A failure is
 * not one of the lookup: the list stays as it was. */
static void refresh_nodes(struct sentinel *s, redisContext *rc)
{
    const char *argv[3] = { "SENTINEL", "sentinels", s->master };
    redisReply *r = redis_io_command(rc, 3, argv, NULL);
    if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++) {
            const char *ip = field(r->element[i], "ip");
            const char *port = field(r->element[i], "port");
            int p = port ? atoi(port) : 0;
            if (ip && p > 0 && p <= 65535 && add_node(s, ip, p) < 0)
                break;
        }
    if (r)
        freeReplyObject(r);
}

/* Ask sentinel `i` for the master's address into host/port: 0, or -1 with
 * the reason in err. */
static int ask_one(struct sentinel *s, size_t i, char *host, size_t hostlen, int *port,
                   char *err, size_t errlen)
{
    struct redis_conn_opts o = s->via;
    o.host = s->nodes[i].host;
    o.port = s->nodes[i].port;
    dq_status st;
    redisContext *rc = redis_conn_open(&o, &st, err, errlen);
    if (!rc)
        return -1;
    const char *argv[3] = { "SENTINEL", "get-master-addr-by-name", s->master };
    redisReply *r = redis_io_command(rc, 3, argv, NULL);
    int rv = -1;
    if (!r)
        redis_conn_context_error(&o, rc, "SENTINEL", err, errlen);
    else if (r->type == REDIS_REPLY_ERROR)
        snprintf(err, errlen, "sentinel %s:%d: %s", o.host, o.port, r->str);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2
             || r->element[0]->type != REDIS_REPLY_STRING
             || r->element[1]->type != REDIS_REPLY_STRING)
        snprintf(err, errlen, "sentinel %s:%d does not know master '%s'", o.host, o.port,
                 s->master);
    else if (strlen(r->element[0]->str) >= hostlen || (*port = atoi(r->element[1]->str)) < 1
             || *port > 65535)
        snprintf(err, errlen, "sentinel %s:%d gave a bad address for '%s'", o.host, o.port,
                 s->master);
    else {
        snprintf(host, hostlen, "%s", r->element[0]->str);
        rv = 0;
    }
    if (r)
        freeReplyObject(r);
    if (rv == 0)
        refresh_nodes(s, rc);
    redis_io_free(rc);
    return rv;
}

int sentinel_resolve(struct sentinel *s, struct redis_conn_opts *conn, char *err,
                     size_t errlen)
{
    char host[SENTINEL_HOST_MAX];
    int port = 0;
    char why[300] = "no sentinel listed";
    size_t i = 0;
    for (; i < s->nnodes; i++)
        if (ask_one(s, i, host, sizeof host, &port, why, sizeof why) == 0)
            break;
    if (i == s->nnodes) {
        snprintf(err, errlen, "no sentinel gave the address of master '%s' (last: %s)",
                 s->master, why);
        return -1;
    }
    /* Step 1's reordering: the one that answered is asked first next time. */
    struct sentinel_node first = s->nodes[i];
    memmove(&s->nodes[1], &s->nodes[0], i * sizeof s->nodes[0]);
    s->nodes[0] = first;
    if (!conn->unix_path && conn->port == port && strcmp(conn->host, host) == 0)
        return 0;
    char *copy = strdup(host);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(conn->host);
    free(conn->unix_path);
    conn->unix_path = NULL;
    conn->host = copy;
    conn->port = port;
    return 1;
}

int sentinel_is_master(redisContext *rc, const struct redis_conn_opts *conn, char *err,
                       size_t errlen)
{
    const char *argv[1] = { "ROLE" };
    redisReply *r = redis_io_command(rc, 1, argv, NULL);
    if (!r) {
        redis_conn_context_error(conn, rc, "ROLE", err, errlen);
        return -1;
    }
    int master = r->type == REDIS_REPLY_ARRAY && r->elements > 0
                 && r->element[0]->type == REDIS_REPLY_STRING
                 && strcmp(r->element[0]->str, "master") == 0;
    if (!master) {
        char addr[300];
        redis_conn_describe(conn, addr, sizeof addr);
        snprintf(err, errlen, "redis %s, named master by the sentinels, says ROLE %s", addr,
                 r->type == REDIS_REPLY_ARRAY && r->elements > 0
                         && r->element[0]->type == REDIS_REPLY_STRING
                     ? r->element[0]->str
                     : r->type == REDIS_REPLY_ERROR ? r->str : "(unexpected reply)");
    }
    freeReplyObject(r);
    return master;
}

int sentinel_locate(struct sentinel *s, struct redis_conn_opts *conn, char *err,
                    size_t errlen)
{
    int changed = sentinel_resolve(s, conn, err, errlen);
    if (changed < 0)
        return -1;
    struct redis_conn_opts quick = *conn;
    if (quick.connect_timeout_ms > SENTINEL_TIMEOUT_MS)
        quick.connect_timeout_ms = SENTINEL_TIMEOUT_MS;
    if (quick.command_timeout_ms <= 0 || quick.command_timeout_ms > SENTINEL_TIMEOUT_MS)
        quick.command_timeout_ms = SENTINEL_TIMEOUT_MS;
    dq_status st;
    redisContext *rc = redis_conn_open(&quick, &st, err, errlen);
    if (!rc)
        return -1;
    int master = sentinel_is_master(rc, conn, err, errlen);
    redis_io_free(rc);
    return master == 1 ? changed : -1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

redisContext *sentinel_connect(struct sentinel *s, struct redis_conn_opts *conn,
                               dq_status *st, char *err, size_t errlen)
{
    int64_t deadline = clock_mono_ms() + conn->connect_timeout_ms;
    int wait_ms = REDIS_CONN_BACKOFF_MIN_MS;
    for (;;) {
        redisContext *rc = NULL;
        *st = DQ_ERR_CONNECT;
        if (sentinel_resolve(s, conn, err, errlen) >= 0
            && (rc = redis_conn_open(conn, st, err, errlen)) != NULL) {
            int master = sentinel_is_master(rc, conn, err, errlen);
            if (master == 1)
                return rc;
            redis_io_free(rc);
        }
        /* Only a lost master is worth waiting for: a refused password or
         * no memory will not get better. */
        if (*st == DQ_ERR_AUTH || *st == DQ_ERR_NOMEM)
            return NULL;
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            *st = DQ_ERR_CONNECT;
            return NULL;
        }
        sleep_ms(wait_ms < left ? wait_ms : (int)left);
        wait_ms = wait_ms * 2 > REDIS_CONN_BACKOFF_MAX_MS ? REDIS_CONN_BACKOFF_MAX_MS
                                                          : wait_ms * 2;
    }
}
