/*
 * The redis handler: hand each job's payload on to a Redis list or stream,
 * for consumers that already read one.
 *
 * Settings:
 *   key = "orders:ready";        # required
 *   mode = "list";               # or "stream"
 *   push = "rpush";              # list mode: "rpush" (default) or "lpush"
 *   maxlen = 0;                  # stream mode: XADD MAXLEN ~ N; 0: no trim
 *   host = "127.0.0.1"; port = 6379;   # or unix_socket = "/run/redis.sock"
 *   password = "secret";  db = 0;
 *   timeout = "5s";    # connect and command; default: the type's less a margin
 *
 * List mode runs RPUSH/LPUSH key <payload>; stream mode runs
 * XADD key [MAXLEN ~ N] * payload <payload> id <job id> type <job type>.
 * The connection is made on the first job and again on the job after an
 * error.
 *
 * Result: OK once Redis has the payload.  A WRONGTYPE error (the key holds
 * something else): FAIL.  Any other error: RETRY with Redis's text.
 */
#include <delayq/handler.h>

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REDIS_DEFAULT_TIMEOUT_MS 5000

struct redis_state {
    const dq_host *host;
    char *key, *addr, *unix_socket, *password;
    int port, db, stream, lpush;
    long long maxlen;
    int64_t timeout_ms;
    redisContext *rc;       /* NULL until the first job, and after an error */
};

static void redis_fini(void *state)
{
    struct redis_state *rs = state;
    if (!rs)
        return;
    if (rs->rc)
        redisFree(rs->rc);
    free(rs->key);
    free(rs->addr);
    free(rs->unix_socket);
    free(rs->password);
    free(rs);
}

static char *dup_or_null(const char *s, int *oom)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *oom = 1;
    return d;
}

/* Check mode and push, and take the strings; 0, or -1 with err. */
static int take_settings(struct redis_state *rs, const dq_host *host,
                         const dq_settings *s, char *err, size_t errlen)
{
    const char *key = host->setting_string(s, "key", NULL);
    const char *mode = host->setting_string(s, "mode", "list");
    const char *push = host->setting_string(s, "push", "rpush");
    const char *addr = host->setting_string(s, "host", "127.0.0.1");
    const char *sock = host->setting_string(s, "unix_socket", NULL);
    const char *pass = host->setting_string(s, "password", NULL);
    int64_t port = host->setting_int(s, "port", 6379);
    int64_t db = host->setting_int(s, "db", 0);
    rs->maxlen = host->setting_int(s, "maxlen", 0);
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        return -1;
    }
    if (!key || !*key) {
        snprintf(err, errlen, "redis: key is required: the list or stream to add to");
        return -1;
    }
    if (strcmp(mode, "list") != 0 && strcmp(mode, "stream") != 0) {
        snprintf(err, errlen, "redis: mode \"%s\": expected \"list\" or \"stream\"", mode);
        return -1;
    }
    if (strcasecmp(push, "rpush") != 0 && strcasecmp(push, "lpush") != 0) {
        snprintf(err, errlen, "redis: push \"%s\": expected \"rpush\" or \"lpush\"", push);
        return -1;
    }
    if (port < 1 || port > 65535 || db < 0 || db > 65535 || rs->maxlen < 0) {
        snprintf(err, errlen, "redis: %s out of range", port < 1 || port > 65535 ? "port"
                 : db < 0 || db > 65535 ? "db" : "maxlen");
        return -1;
    }
    rs->stream = strcmp(mode, "stream") == 0;
    rs->lpush = strcasecmp(push, "lpush") == 0;
    rs->port = (int)port;
    rs->db = (int)db;
    int oom = 0;
    rs->key = dup_or_null(key, &oom);
    rs->addr = dup_or_null(addr, &oom);
    rs->unix_socket = dup_or_null(sock, &oom);
    rs->password = dup_or_null(pass, &oom);
    if (oom) {
        snprintf(err, errlen, "redis: out of memory");
        return -1;
    }
    return 0;
}

static int redis_init(const dq_host *host, const dq_settings *s, void **state,
                      char *err, size_t errlen)
{
    struct redis_state *rs = calloc(1, sizeof *rs);
    if (!rs) {
        snprintf(err, errlen, "redis: out of memory");
        return -1;
    }
    rs->host = host;
    int64_t def = REDIS_DEFAULT_TIMEOUT_MS;
    if (host->timeout_ms > 0)
        def = host->timeout_ms - (host->timeout_ms / 10 < 1000 ? host->timeout_ms / 10 : 1000);
    rs->timeout_ms = host->setting_duration_ms(s, "timeout", def);
    if (take_settings(rs, host, s, err, errlen) < 0) {
        redis_fini(rs);
        return -1;
    }
    *state = rs;
    return 0;
}

/* The reply's outcome: OK, or the error in out. */
static dq_handler_result check_reply(struct redis_state *rs, redisReply *r,
                                     dq_handler_outcome *out)
{
    if (!r) {
        snprintf(out->error, sizeof out->error, "redis: %s",
                 rs->rc->errstr[0] ? rs->rc->errstr : "no reply");
        redisFree(rs->rc); /* reconnect on the next job */
        rs->rc = NULL;
        return DQ_HANDLER_RETRY;
    }
    dq_handler_result res = DQ_HANDLER_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(out->error, sizeof out->error, "redis: %.*s", (int)r->len, r->str);
        res = strncmp(r->str, "WRONGTYPE", 9) == 0 ? DQ_HANDLER_FAIL : DQ_HANDLER_RETRY;
    }
    freeReplyObject(r);
    return res;
}

/* Connect, authenticate and select the db; OK or RETRY with out->error. */
static dq_handler_result redis_connect(struct redis_state *rs, dq_handler_outcome *out)
{
    struct timeval tv = { 0, 0 };
    if (rs->timeout_ms > 0) {
        tv.tv_sec = rs->timeout_ms / 1000;
        tv.tv_usec = (rs->timeout_ms % 1000) * 1000;
    }
    int bounded = rs->timeout_ms > 0;
    if (rs->unix_socket)
        rs->rc = bounded ? redisConnectUnixWithTimeout(rs->unix_socket, tv)
                         : redisConnectUnix(rs->unix_socket);
    else
        rs->rc = bounded ? redisConnectWithTimeout(rs->addr, rs->port, tv)
                         : redisConnect(rs->addr, rs->port);
    if (!rs->rc || rs->rc->err) {
        const char *why = rs->rc ? rs->rc->errstr : "out of memory";
        if (rs->unix_socket)
            snprintf(out->error, sizeof out->error, "redis %s: %s", rs->unix_socket, why);
        else
            snprintf(out->error, sizeof out->error, "redis %s:%d: %s", rs->addr,
                     rs->port, why);
        if (rs->rc)
            redisFree(rs->rc);
        rs->rc = NULL;
        return DQ_HANDLER_RETRY;
    }
    if (bounded && redisSetTimeout(rs->rc, tv) != REDIS_OK) {
        snprintf(out->error, sizeof out->error, "redis: cannot set the timeout");
        redisFree(rs->rc);
        rs->rc = NULL;
        return DQ_HANDLER_RETRY;
    }
    dq_handler_result res = DQ_HANDLER_OK;
    if (rs->password)
        res = check_reply(rs, redisCommand(rs->rc, "AUTH %s", rs->password), out);
    if (res == DQ_HANDLER_OK && rs->db)
        res = check_reply(rs, redisCommand(rs->rc, "SELECT %d", rs->db), out);
    if (res != DQ_HANDLER_OK && rs->rc) {
        redisFree(rs->rc);
        rs->rc = NULL;
    }
    return res == DQ_HANDLER_OK ? res : DQ_HANDLER_RETRY;
}

static dq_handler_result redis_handle(void *state, const dq_handler_job *job,
                                      dq_handler_outcome *out)
{
    struct redis_state *rs = state;
    if (!rs->rc && redis_connect(rs, out) != DQ_HANDLER_OK)
        return DQ_HANDLER_RETRY;
    redisReply *r;
    if (!rs->stream)
        r = redisCommand(rs->rc, "%s %s %b", rs->lpush ? "LPUSH" : "RPUSH", rs->key,
                         job->payload, job->payload_len);
    else if (rs->maxlen > 0)
        r = redisCommand(rs->rc, "XADD %s MAXLEN ~ %lld * payload %b id %s type %s",
                         rs->key, rs->maxlen, job->payload, job->payload_len,
                         job->id, job->type);
    else
        r = redisCommand(rs->rc, "XADD %s * payload %b id %s type %s", rs->key,
                         job->payload, job->payload_len, job->id, job->type);
    return check_reply(rs, r, out);
}

DQ_HANDLER_DEFINE("redis", redis_init, redis_handle, redis_fini);
