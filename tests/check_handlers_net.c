/*
 * The http handler against a small HTTP server run by the test (a forked
 * accept loop on 127.0.0.1, an ephemeral port), and the redis handler
 * against the fixture's redis-server.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "handler_test.h"

/* ---- the HTTP server --------------------------------------------------- */

struct stub {
    pid_t pid;
    int port;
};

static const char *stub_answer(const char *path)
{
    static const struct { const char *path, *answer; } routes[] = {
        { "/ok", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" },
        { "/missing", "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n" },
        { "/busy", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                   "retry-after:  7\r\n\r\n" },
        { "/throttled", "HTTP/1.1 429 Too Many Requests\r\n\r\n" },
        /* ~285 million years, and more digits than an int64 holds. */
        { "/ages", "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 9000000000000000\r\n\r\n" },
        { "/forever", "HTTP/1.1 429 Too Many Requests\r\n"
                      "Retry-After: 123456789012345678901234567890\r\n\r\n" },
        { "/moved", "HTTP/1.1 301 Moved Permanently\r\nLocation: /ok\r\n\r\n" },
        { "/continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n\r\n" },
        { "/garbage", "SSH-2.0-OpenSSH_9.2\r\n\r\n" },
        { "/conflict", "HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n" },
        { "/drop", "" },
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(path, routes[i].path) == 0)
            return routes[i].answer;
    return "HTTP/1.1 500 Internal Server Error\r\n\r\n";
}

/* Serve one connection: read the request (head and Content-Length body),
 * save it to DIR/request, answer per path. */
static void stub_serve_one(int c)
{
    static char req[1 << 16];
    size_t used = 0;
    char *body = NULL;
    for (;;) {
        ssize_t n = read(c, req + used, sizeof req - 1 - used);
        if (n <= 0)
            return;
        used += (size_t)n;
        req[used] = '\0';
        if (!body && (body = strstr(req, "\r\n\r\n")))
            body += 4;
        if (body) {
            const char *cl = strstr(req, "Content-Length: ");
            size_t want = cl ? (size_t)atol(cl + 16) : 0;
            if (used - (size_t)(body - req) >= want)
                break;
        }
    }
    FILE *f = fopen(ht_path("request.tmp"), "wb");
    if (f) {
        fwrite(req, 1, used, f);
        fclose(f);
        rename(ht_path("request.tmp"), ht_path("request"));
    }
    char path[256] = "";
    sscanf(req, "POST %255s ", path);
    path[strcspn(path, "?")] = '\0';
    if (strcmp(path, "/slow") == 0)
        sleep(3);
    const char *answer = stub_answer(path);
    ssize_t w = write(c, answer, strlen(answer));
    (void)w;
}

static void stub_start(struct stub *st)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    st->port = ntohs(sa.sin_port);
    st->pid = fork();
    ck_assert_int_ge(st->pid, 0);
    if (st->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves nothing behind */
        alarm(30);
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c < 0)
                continue;
            stub_serve_one(c);
            close(c);
        }
    }
    close(fd);
}

static void stub_stop(struct stub *st)
{
    kill(st->pid, SIGKILL);
    waitpid(st->pid, NULL, 0);
}

/* A closed port: bound, then released. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static void open_http(struct ht *t, int port, const char *path, const char *more)
{
    char settings[1024];
    snprintf(settings, sizeof settings, "url = \"http://127.0.0.1:%d%s\";\n%s", port, path,
             more);
    ht_open_ok(t, ht_handler_dir(), "http.so", settings, 0);
}

/* Post "payload" to path; the result, with out filled. */
static dq_handler_result post(int port, const char *path, const char *more,
                              dq_handler_outcome *out)
{
    struct ht t;
    open_http(&t, port, path, more);
    dq_handler_result r = ht_run(&t, "payload", 7, out);
    ht_close(&t);
    return r;
}

START_TEST(http_posts_the_job)
{
    struct stub st;
    stub_start(&st);
    struct ht t;
    open_http(&t, st.port, "/ok?src=dq", "content_type = \"application/json\";\n"
              "headers = [\"Authorization: Bearer x\", \"X-Extra: 1\"];");
    dq_handler_outcome out;
    const char *json = "{\"order\":42}";
    ck_assert_int_eq(ht_run(&t, json, strlen(json), &out), DQ_HANDLER_OK);
    ht_close(&t);
    char *req = ht_read(ht_path("request"), NULL);
    ck_assert_ptr_nonnull(req);
    char host[64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", st.port);
    const char *expect[] = {
        host, "\r\nContent-Type: application/json\r\n", "\r\nContent-Length: 12\r\n",
        "\r\nX-Delayq-Job-Id: j-42\r\n", "\r\nX-Delayq-Job-Type: order.cancel\r\n",
        "\r\nX-Delayq-Attempt: 2\r\n", "\r\nX-Delayq-Queue: q1\r\n",
        "\r\nX-Delayq-Fence: 4242\r\n", "\r\nIdempotency-Key: q1/j-42/1767225500000\r\n",
        "\r\nAuthorization: Bearer x\r\n", "\r\nX-Extra: 1\r\n",
    };
    ck_assert_msg(strncmp(req, "POST /ok?src=dq HTTP/1.1\r\n", 26) == 0, "%s", req);
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg(strstr(req, expect[i]) != NULL, "no %s in %s", expect[i], req);
    const char *body = strstr(req, "\r\n\r\n");
    ck_assert_str_eq(body + 4, json);
    free(req);

    /* Defaults: octet-stream; an interim 100 answer is skipped. */
    ck_assert_int_eq(post(st.port, "/continue", "", &out), DQ_HANDLER_OK);
    req = ht_read(ht_path("request"), NULL);
    ck_assert_ptr_nonnull(strstr(req, "\r\nContent-Type: application/octet-stream\r\n"));
    ck_assert_str_eq(strstr(req, "\r\n\r\n") + 4, "payload");
    free(req);
    stub_stop(&st);
}
END_TEST

/* The request of one run of job (as ht_job, with attempt and fence). */
static char *request_of(struct ht *t, int attempt, int64_t fence)
{
    dq_handler_job job;
    dq_handler_outcome out;
    ht_job(&job, "p", 1);
    job.attempt = attempt;
    job.fence = fence;
    ck_assert_int_eq(handler_run(&t->lh, &job, &out), DQ_HANDLER_OK);
    char *req = ht_read(ht_path("request"), NULL);
    ck_assert_ptr_nonnull(req);
    return req;
}

/* Every attempt of a job sends the same idempotency key (the job's) and
 * its own fence, which grows: the receiver can store the key with the
 * effect and refuse a second one, and refuse an attempt older than one it
 * has seen.  The key's header can be renamed or left out. */
START_TEST(http_sends_the_fence_and_one_idempotency_key_per_job)
{
    struct stub st;
    stub_start(&st);
    struct ht t;
    open_http(&t, st.port, "/ok", "");
    char *a1 = request_of(&t, 1, 1001), *a2 = request_of(&t, 2, 1734);
    ht_close(&t);
    ck_assert_msg(strstr(a1, "\r\nIdempotency-Key: q1/j-42/1767225500000\r\n")
                  && strstr(a2, "\r\nIdempotency-Key: q1/j-42/1767225500000\r\n"),
                  "attempt 1:\n%s\nattempt 2:\n%s", a1, a2);
    ck_assert_msg(strstr(a1, "\r\nX-Delayq-Fence: 1001\r\n")
                  && strstr(a2, "\r\nX-Delayq-Fence: 1734\r\n")
                  && strstr(a2, "\r\nX-Delayq-Attempt: 2\r\n"), "%s\n%s", a1, a2);
    free(a1);
    free(a2);

    open_http(&t, st.port, "/ok", "idempotency_header = \"X-Request-Key\";");
    a1 = request_of(&t, 1, 7);
    ht_close(&t);
    ck_assert_msg(strstr(a1, "\r\nX-Request-Key: q1/j-42/1767225500000\r\n")
                  && !strstr(a1, "Idempotency-Key"), "%s", a1);
    free(a1);

    open_http(&t, st.port, "/ok", "idempotency_header = \"\";");
    a1 = request_of(&t, 1, 7);
    ht_close(&t);
    ck_assert_msg(!strstr(a1, "Idempotency-Key") && !strstr(a1, "q1/j-42/"), "%s", a1);
    ck_assert_msg(strstr(a1, "\r\nX-Delayq-Fence: 7\r\n") != NULL, "%s", a1);
    free(a1);

    /* 409 is the answer to a key whose earlier attempt the receiver still
     * holds: a retry then; without a key, a conflict like any 4xx. */
    dq_handler_outcome out;
    ck_assert_int_eq(post(st.port, "/conflict", "", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "HTTP 409 Conflict");
    ck_assert_int_eq(post(st.port, "/conflict", "idempotency_header = \"\";", &out),
                     DQ_HANDLER_FAIL);
    stub_stop(&st);
}
END_TEST

START_TEST(http_maps_status_codes)
{
    struct stub st;
    stub_start(&st);
    dq_handler_outcome out;
    ck_assert_int_eq(post(st.port, "/missing", "", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "HTTP 404 Not Found");
    ck_assert_int_eq(post(st.port, "/moved", "", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "HTTP 301 Moved Permanently");
    ck_assert_int_eq(post(st.port, "/busy", "", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "HTTP 503 Service Unavailable");
    ck_assert_int_eq(out.retry_delay_ms, 7000);
    ck_assert_int_eq(post(st.port, "/throttled", "", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "HTTP 429 Too Many Requests");
    ck_assert_int_eq(out.retry_delay_ms, -1);
    /* A huge Retry-After is read as 100 years, without overflow (the fail
     * script then caps it at the queue's backoff cap). */
    ck_assert_int_eq(post(st.port, "/ages", "", &out), DQ_HANDLER_RETRY);
    ck_assert_int_eq(out.retry_delay_ms, INT64_C(3153600000) * 1000);
    ck_assert_int_eq(post(st.port, "/forever", "", &out), DQ_HANDLER_RETRY);
    ck_assert_int_eq(out.retry_delay_ms, INT64_C(3153600000) * 1000);
    ck_assert_int_eq(post(st.port, "/elsewhere", "", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "HTTP 500 Internal Server Error");
    char exp[256];
    ck_assert_int_eq(post(st.port, "/garbage", "", &out), DQ_HANDLER_RETRY);
    snprintf(exp, sizeof exp, "not an HTTP answer (http://127.0.0.1:%d/garbage)", st.port);
    ck_assert_str_eq(out.error, exp);
    ck_assert_int_eq(post(st.port, "/drop", "", &out), DQ_HANDLER_RETRY);
    snprintf(exp, sizeof exp, "connection closed before an answer "
             "(http://127.0.0.1:%d/drop)", st.port);
    ck_assert_str_eq(out.error, exp);
    stub_stop(&st);
}
END_TEST

START_TEST(http_gives_up_in_time)
{
    struct stub st;
    stub_start(&st);
    dq_handler_outcome out;
    int64_t t0 = tu_mono_ms();
    ck_assert_int_eq(post(st.port, "/slow", "timeout = \"300ms\";", &out), DQ_HANDLER_RETRY);
    int64_t took = tu_mono_ms() - t0;
    char exp[256];
    snprintf(exp, sizeof exp, "timeout after 300 ms waiting for the answer "
             "(http://127.0.0.1:%d/slow)", st.port);
    ck_assert_str_eq(out.error, exp);
    ck_assert_msg(took >= 290 && took < 1000, "took %lld ms", (long long)took);
    stub_stop(&st);

    int port = closed_port();
    ck_assert_int_eq(post(port, "/", "", &out), DQ_HANDLER_RETRY);
    snprintf(exp, sizeof exp, "connect to 127.0.0.1:%d: Connection refused "
             "(http://127.0.0.1:%d/)", port, port);
    ck_assert_str_eq(out.error, exp);
}
END_TEST

/* The test's cancel service: says yes once its time has come. */
static int64_t cancel_at_ms;
static int cancelled_by_then(const dq_handler_job *job)
{
    (void)job;
    return tu_mono_ms() >= cancel_at_ms;
}

/* A request whose job is cancelled while it waits for the answer is
 * abandoned at once, well before its timeout. */
START_TEST(http_abandons_a_cancelled_request)
{
    struct stub st;
    stub_start(&st);
    struct ht t;
    open_http(&t, st.port, "/slow", "timeout = \"5s\";");
    t.host.cancelled = cancelled_by_then;   /* the handler keeps &t.host */
    dq_handler_outcome out;
    int64_t t0 = tu_mono_ms();
    cancel_at_ms = t0 + 200;
    ck_assert_int_eq(ht_run(&t, "payload", 7, &out), DQ_HANDLER_FAIL);
    int64_t took = tu_mono_ms() - t0;
    ht_close(&t);
    char exp[256];
    snprintf(exp, sizeof exp, "cancelled waiting for the answer (http://127.0.0.1:%d/slow)",
             st.port);
    ck_assert_str_eq(out.error, exp);
    ck_assert_msg(took >= 190 && took < 400, "took %lld ms", (long long)took);
    stub_stop(&st);
}
END_TEST

START_TEST(http_refuses_bad_settings)
{
    static const struct { const char *settings, *why; } cases[] = {
        { "", "http: url is required, such as url = \"http://127.0.0.1:8080/jobs\"" },
        { "url = \"https://example.com/\";", "http: url \"https://example.com/\": https "
          "is not supported; put a TLS proxy (stunnel, nginx, haproxy) on this host and "
          "post to it over http, or use the exec handler with curl" },
        { "url = \"ftp://example.com/\";",
          "http: url \"ftp://example.com/\": expected http://HOST[:PORT][/PATH]" },
        { "url = \"http://example.com:99999/\";", "http: bad port \"99999\" in url" },
        { "url = \"http://u:p@example.com/\";", "http: a user or password in the url is "
          "not supported; use headers = [\"Authorization: ...\"]" },
        { "url = \"http://example.com/\"; headers = [\"NoColon\"];",
          "http: header \"NoColon\": expected \"Name: value\" on one line" },
        { "url = \"http://example.com/\"; headers = [\"X-A: 1\\nX-B: 2\"];",
          "http: header \"X-A: 1\nX-B: 2\": expected \"Name: value\" on one line" },
        { "url = \"http://example.com/\"; idempotency_header = \"Idempotency Key\";",
          "http: idempotency_header \"Idempotency Key\" is not a header name (letters, "
          "digits and !#$%&'*+-.^_`|~), or \"\" for none" },
        { "url = \"http://example.com/\"; headers = [\"idempotency-key: mine\"];",
          "http: headers sets Idempotency-Key, which the handler sends with each job's "
          "idempotency key: remove it, or set idempotency_header = \"\"" },
        { "url = \"http://example.com/\"; idempotency_header = \"Key:\";",
          "http: idempotency_header \"Key:\" is not a header name (letters, "
          "digits and !#$%&'*+-.^_`|~), or \"\" for none" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ht t;
        char err[1024], exp[1024];
        ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "http.so", cases[i].settings, 0,
                                 err, sizeof err), -1);
        snprintf(exp, sizeof exp, "handler %s/http.so: %s", ht_handler_dir(), cases[i].why);
        ck_assert_str_eq(err, exp);
    }
}
END_TEST

void add_http_tcase(Suite *s)
{
    TCase *tc = fixture_tcase(s, "http", 20, NULL, NULL, ht_tmp_setup, ht_tmp_teardown);
    tcase_add_test(tc, http_posts_the_job);
    tcase_add_test(tc, http_sends_the_fence_and_one_idempotency_key_per_job);
    tcase_add_test(tc, http_maps_status_codes);
    tcase_add_test(tc, http_gives_up_in_time);
    tcase_add_test(tc, http_abandons_a_cancelled_request);
    tcase_add_test(tc, http_refuses_bad_settings);
}

/* ---- redis --------------------------------------------------------------- */

static struct redis_fixture rf;

static void redis_setup(void)
{
    fixture_redis_start(&rf);
}

static void redis_teardown(void)
{
    fixture_redis_stop(&rf);
}

static void redis_test_setup(void)
{
    ht_tmp_setup();
    fixture_redis_flush(&rf);
    signal(SIGPIPE, SIG_IGN); /* as in the daemon */
}

static void redis_test_teardown(void)
{
    signal(SIGPIPE, SIG_DFL);
    ht_tmp_teardown();
}

/* A command on the fixture; the reply is the caller's. */
static redisReply *rcmd(const char *fmt, ...)
{
    redisContext *rc = fixture_redis_connect(&rf);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    redisFree(rc);
    ck_assert_ptr_nonnull(r);
    return r;
}

static void open_redis(struct ht *t, const char *more)
{
    char settings[1024];
    snprintf(settings, sizeof settings, "unix_socket = \"%s\";\n%s", rf.sock, more);
    ht_open_ok(t, ht_handler_dir(), "redis.so", settings, 0);
}

/* Expect the list `key` to hold exactly the n strings given. */
static void list_is(const char *key, size_t n, ...)
{
    redisReply *r = rcmd("LRANGE %s 0 -1", key);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, n);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(r->element[i]->str, va_arg(ap, const char *));
    va_end(ap);
    freeReplyObject(r);
}

START_TEST(redis_pushes_to_a_list)
{
    struct ht t;
    dq_handler_outcome out;
    open_redis(&t, "key = \"ready\";");
    ck_assert_int_eq(ht_run(&t, "p1", 2, &out), DQ_HANDLER_OK);
    ck_assert_int_eq(ht_run(&t, "p2", 2, &out), DQ_HANDLER_OK);
    static const char binary[] = { 'a', 0, 'b', 0 };
    ck_assert_int_eq(ht_run(&t, binary, 3, &out), DQ_HANDLER_OK);
    ht_close(&t);
    redisReply *r = rcmd("LINDEX ready 2");
    ck_assert_uint_eq(r->len, 3);
    ck_assert_int_eq(memcmp(r->str, binary, 3), 0);
    freeReplyObject(r);
    freeReplyObject(rcmd("RPOP ready"));
    list_is("ready", 2, "p1", "p2");

    open_redis(&t, "key = \"stack\"; push = \"lpush\"; db = 2;");
    ck_assert_int_eq(ht_run(&t, "p1", 2, &out), DQ_HANDLER_OK);
    ck_assert_int_eq(ht_run(&t, "p2", 2, &out), DQ_HANDLER_OK);
    ht_close(&t);
    ck_assert_int_eq(fixture_redis_int(&rf, "EXISTS stack"), 0); /* not in db 0 */
    redisContext *rc = fixture_redis_connect(&rf);
    freeReplyObject(redisCommand(rc, "SELECT 2"));
    r = redisCommand(rc, "LRANGE stack 0 -1");
    redisFree(rc);
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 2);
    ck_assert_str_eq(r->element[0]->str, "p2");
    ck_assert_str_eq(r->element[1]->str, "p1");
    freeReplyObject(r);
}
END_TEST

START_TEST(redis_adds_to_a_stream)
{
    struct ht t;
    dq_handler_outcome out;
    open_redis(&t, "key = \"events\"; mode = \"stream\"; maxlen = 1000;");
    ck_assert_int_eq(ht_run(&t, "{\"order\":42}", 12, &out), DQ_HANDLER_OK);
    ht_close(&t);
    redisReply *r = rcmd("XRANGE events - +");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(r->elements, 1);
    redisReply *fields = r->element[0]->element[1];
    ck_assert_uint_eq(fields->elements, 6);
    const char *want[] = { "payload", "{\"order\":42}", "id", "j-42", "type", "order.cancel" };
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(fields->element[i]->str, want[i]);
    freeReplyObject(r);
}
END_TEST

START_TEST(redis_maps_errors_and_reconnects)
{
    struct ht t;
    dq_handler_outcome out;
    freeReplyObject(rcmd("SET plain value"));
    open_redis(&t, "key = \"plain\";");
    ck_assert_int_eq(ht_run(&t, "p", 1, &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "redis: WRONGTYPE Operation against a key holding the "
                                "wrong kind of value");
    ht_close(&t);

    /* The connection dies between jobs: that job is retried, the next one
     * reconnects. */
    open_redis(&t, "key = \"ready\";");
    ck_assert_int_eq(ht_run(&t, "p1", 2, &out), DQ_HANDLER_OK);
    redisReply *r = rcmd("CLIENT KILL TYPE normal");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    ck_assert_int_eq(ht_run(&t, "p2", 2, &out), DQ_HANDLER_RETRY);
    ck_assert_msg(strncmp(out.error, "redis: ", 7) == 0, "%s", out.error);
    ck_assert_int_eq(ht_run(&t, "p3", 2, &out), DQ_HANDLER_OK);
    ht_close(&t);
    list_is("ready", 2, "p1", "p3");

    /* No server there: RETRY with the reason. */
    char settings[512], exp[600];
    snprintf(settings, sizeof settings, "unix_socket = \"%s\"; key = \"k\";", ht_path("none.sock"));
    ht_open_ok(&t, ht_handler_dir(), "redis.so", settings, 0);
    snprintf(exp, sizeof exp, "redis %s: No such file or directory", ht_path("none.sock"));
    ck_assert_int_eq(ht_run(&t, "p", 1, &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, exp);
    ht_close(&t);

    /* A password: right, and wrong. */
    freeReplyObject(rcmd("CONFIG SET requirepass sekrit"));
    open_redis(&t, "key = \"locked\"; password = \"sekrit\";");
    ck_assert_int_eq(ht_run(&t, "p", 1, &out), DQ_HANDLER_OK);
    ht_close(&t);
    open_redis(&t, "key = \"locked\"; password = \"guess\";");
    ck_assert_int_eq(ht_run(&t, "p", 1, &out), DQ_HANDLER_RETRY);
    ck_assert_msg(strncmp(out.error, "redis: WRONGPASS", 16) == 0, "%s", out.error);
    ht_close(&t);
    redisContext *rc = fixture_redis_connect(&rf);
    freeReplyObject(redisCommand(rc, "AUTH sekrit"));
    r = redisCommand(rc, "LLEN locked");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    freeReplyObject(redisCommand(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
}
END_TEST

START_TEST(redis_refuses_bad_settings)
{
    static const struct { const char *settings, *why; } cases[] = {
        { "", "redis: key is required: the list or stream to add to" },
        { "key = \"k\"; mode = \"set\";", "redis: mode \"set\": expected \"list\" or \"stream\"" },
        { "key = \"k\"; push = \"append\";",
          "redis: push \"append\": expected \"rpush\" or \"lpush\"" },
        { "key = \"k\"; port = 70000;", "redis: port out of range" },
        { "key = \"k\"; db = -1;", "redis: db out of range" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ht t;
        char err[1024], exp[1024];
        ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "redis.so", cases[i].settings, 0,
                                 err, sizeof err), -1);
        snprintf(exp, sizeof exp, "handler %s/redis.so: %s", ht_handler_dir(), cases[i].why);
        ck_assert_str_eq(err, exp);
    }
}
END_TEST

void add_redis_tcase(Suite *s)
{
    TCase *tc = fixture_tcase(s, "redis", 20, redis_setup, redis_teardown, redis_test_setup,
                              redis_test_teardown);
    tcase_add_test(tc, redis_pushes_to_a_list);
    tcase_add_test(tc, redis_adds_to_a_stream);
    tcase_add_test(tc, redis_maps_errors_and_reconnects);
    tcase_add_test(tc, redis_refuses_bad_settings);
}
