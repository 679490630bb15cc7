/*
 * Redis connection options and the blocking handshake (see redis_conn.h).
 */
#include "redis/redis_conn.h"

#include "redis/redis_io.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cmd.h"
#include "redis/cluster_policy.h"
#include "lib/scripts.h"

/* The cluster settings came out of the reserved tail: the struct, and so
 * the soname, stays as it was. */
_Static_assert(offsetof(dq_options, reserved) + sizeof(((dq_options *)0)->reserved)
                   - offsetof(dq_options, cluster) == 8 * sizeof(void *),
               "dq_options keeps its size");

void dq_options_init(dq_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->host = REDIS_CONN_DEFAULT_HOST;
    opt->port = REDIS_CONN_DEFAULT_PORT;
    opt->connect_timeout_ms = REDIS_CONN_DEFAULT_TIMEOUT_MS;
    opt->command_timeout_ms = REDIS_CONN_DEFAULT_TIMEOUT_MS;
    opt->keepalive = 1;
    opt->prefix = DQ_DEFAULT_PREFIX;
    opt->max_payload = DQ_DEFAULT_MAX_PAYLOAD;
    opt->tls.verify = 1;
    opt->durability = DQ_DURABILITY_LOCAL;
    opt->replication_timeout_ms = DQ_DEFAULT_REPLICATION_TIMEOUT_MS;
}

char *redis_conn_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

void redis_conn_free_secret(char *secret)
{
    if (!secret)
        return;
    /* volatile: the wipe of memory about to be freed is not optimised out */
    volatile char *p = secret;
    while (*p)
        *p++ = '\0';
    free(secret);
}

void redis_conn_opts_free(struct redis_conn_opts *o)
{
    free(o->host);
    free(o->unix_path);
    free(o->user);
    redis_conn_free_secret(o->password);
    tls_settings_free(&o->tls);
    memset(o, 0, sizeof *o);
}

int redis_conn_opts_copy(struct redis_conn_opts *o, const dq_options *opt,
                         char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    if (opt->user && !opt->password) {
        snprintf(err, errlen, "an ACL user needs a password");
        return -1;
    }
    o->host = strdup(opt->host ? opt->host : REDIS_CONN_DEFAULT_HOST);
    o->unix_path = redis_conn_dup(opt->unix_path);
    o->user = redis_conn_dup(opt->user);
    o->password = redis_conn_dup(opt->password);
    o->port = opt->port > 0 ? opt->port : REDIS_CONN_DEFAULT_PORT;
    o->db = opt->db;
    o->connect_timeout_ms = opt->connect_timeout_ms > 0 ? opt->connect_timeout_ms
                                                        : REDIS_CONN_DEFAULT_TIMEOUT_MS;
    o->command_timeout_ms = opt->command_timeout_ms > 0 ? opt->command_timeout_ms : 0;
    o->keepalive = opt->keepalive;
    if (tls_settings_copy(&o->tls, &opt->tls) < 0) {
        redis_conn_opts_free(o);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!o->host || (opt->unix_path && !o->unix_path) || (opt->user && !o->user)
        || (opt->password && !o->password)) {
        redis_conn_opts_free(o);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void redis_conn_format_addr(const char *unix_path, const char *host, int port, char *buf,
                            size_t len)
{
    if (unix_path)
        snprintf(buf, len, "%s", unix_path);
    else
        snprintf(buf, len, "%s:%d", host ? host : REDIS_CONN_DEFAULT_HOST, port);
}

void redis_conn_describe(const struct redis_conn_opts *o, char *buf, size_t len)
{
    redis_conn_format_addr(o->unix_path, o->host, o->port, buf, len);
}

int redis_conn_auth_argv(const struct redis_conn_opts *o, const char *argv[3])
{
    if (!o->password)
        return 0;
    argv[0] = "AUTH";
    argv[1] = o->user ? o->user : o->password;
    argv[2] = o->password;
    return o->user ? 3 : 2;
}

int redis_conn_backoff_next(int *backoff_ms, unsigned long r)
{
    int ms = *backoff_ms;
    ms += (int)(r % (unsigned long)(ms / 2 + 1)) - ms / 4;
    *backoff_ms = *backoff_ms * 2 > REDIS_CONN_BACKOFF_MAX_MS ? REDIS_CONN_BACKOFF_MAX_MS
                                                              : *backoff_ms * 2;
    return ms;
}

int redis_conn_is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

int redis_conn_is_failover(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && cluster_error_kind(r->str) == CLUSTER_ERR_DEMOTED;
}

dq_status redis_conn_context_error(const struct redis_conn_opts *o,
                                   const redisContext *rc, const char *what,
                                   char *err, size_t errlen)
{
    int timed_out = rc->err == REDIS_ERR_IO
                    && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT);
    char addr[300];
    redis_conn_describe(o, addr, sizeof addr);
    if (timed_out || strstr(rc->errstr, "timed out")
        || strstr(rc->errstr, "temporarily unavailable")) {
        snprintf(err, errlen, "redis %s: %s timed out", addr, what);
        return DQ_ERR_TIMEOUT;
    }
    if (rc->err == REDIS_ERR_EOF)
        snprintf(err, errlen, "redis %s: connection closed by server", addr);
    else
        snprintf(err, errlen, "redis %s: %s", addr,
                 redis_io_errstr(rc)[0] ? redis_io_errstr(rc) : what);
    return DQ_ERR_CONNECT;
}

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    return tv;
}

/* Run a handshake command (AUTH, SELECT, PING) on a fresh context. */
static dq_status handshake(const struct redis_conn_opts *o, redisContext *rc, int argc,
                           const char **argv, char *err, size_t errlen)
{
    redisReply *r = redis_io_command(rc, argc, argv, NULL);
    if (!r)
        return redis_conn_context_error(o, rc, argv[0], err, errlen);
    dq_status st = DQ_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis refused %s: %s", argv[0], r->str);
        st = DQ_ERR_AUTH;
    }
    freeReplyObject(r);
    return st;
}

/* The TLS handshake on a fresh context (under the connect timeout, which
 * hiredis left on the socket).  On failure the context is freed, *st and
 * err say why, and 0 is returned. */
static int start_tls(const struct redis_conn_opts *o, redisContext *rc, dq_status *st,
                     char *err, size_t errlen)
{
    char why[400];
    struct timeval tv = ms_to_tv(o->connect_timeout_ms);
    *st = redisSetTimeout(rc, tv) == REDIS_OK
          ? redis_io_start_tls(rc, &o->tls, o->host, why, sizeof why) : DQ_ERR_CONNECT;
    if (*st == DQ_ERR_CONNECT && rc->err)
        snprintf(why, sizeof why, "%s", rc->errstr);
    if (*st == DQ_OK)
        return 1;
    char addr[300];
    redis_conn_describe(o, addr, sizeof addr);
    snprintf(err, errlen, "cannot connect to redis at %s: %s", addr, why);
    redisFree(rc);
    return 0;
}

redisContext *redis_conn_open(const struct redis_conn_opts *o, dq_status *st,
                              char *err, size_t errlen)
{
    struct timeval ctv = ms_to_tv(o->connect_timeout_ms);
    redisContext *rc = o->unix_path ? redisConnectUnixWithTimeout(o->unix_path, ctv)
                                    : redisConnectWithTimeout(o->host, o->port, ctv);
    if (!rc) {
        snprintf(err, errlen, "out of memory connecting to redis");
        *st = DQ_ERR_NOMEM;
        return NULL;
    }
    if (rc->err) {
        *st = redis_conn_context_error(o, rc, "connect", err, errlen);
        if (*st == DQ_ERR_CONNECT) {
            char addr[300];
            redis_conn_describe(o, addr, sizeof addr);
            snprintf(err, errlen, "cannot connect to redis at %s: %s", addr, rc->errstr);
        }
        redisFree(rc);
        return NULL;
    }
    if (o->tls.enable && !o->unix_path && !start_tls(o, rc, st, err, errlen))
        return NULL;
    /* (After TLS the connect timeout is on the socket: 0 undoes it.) */
    if (o->command_timeout_ms > 0 || (o->tls.enable && !o->unix_path))
        redisSetTimeout(rc, ms_to_tv(o->command_timeout_ms));
    if (o->keepalive && !o->unix_path)
        redisEnableKeepAlive(rc);
    const char *argv[3];
    int argc = redis_conn_auth_argv(o, argv);
    *st = argc ? handshake(o, rc, argc, argv, err, errlen) : DQ_OK;
    if (*st == DQ_OK && o->db != 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", o->db);
        const char *sel[2] = { "SELECT", db };
        *st = handshake(o, rc, 2, sel, err, errlen);
    } else if (*st == DQ_OK && !argc) {
        const char *ping[1] = { "PING" };
        *st = handshake(o, rc, 1, ping, err, errlen);
    }
    if (*st != DQ_OK) {
        redis_io_free(rc);
        return NULL;
    }
    return rc;
}

int redis_conn_script_writes(int script)
{
    static const char ro[] = "#!lua flags=no-writes";
    return script >= 0 && script < DQ_SCRIPT_COUNT
           && strncmp(dq_scripts[script].text, ro, sizeof ro - 1) != 0;
}

void redis_conn_wait_cmd(struct cmd *w, int timeout_ms)
{
    cmd_init(w);
    cmd_push_str(w, "WAIT");
    cmd_push_str(w, "1");
    cmd_push_i64(w, timeout_ms);
}
