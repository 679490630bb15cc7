/*
 * ui.c's front door in-process: a real evhttp server (http_admin) on a
 * thread of its own, with this file's pages in place of ui_pages.c, so
 * that a page can answer later, as the ones that ask Redis do.  What the
 * end-to-end test (check_ui_http) cannot reach: a deferred reply whose
 * client went away first (run it under the sanitizers: a freed request
 * touched shows there), the decoded path segments, query and form fields
 * a page is given, and the assets' caching headers.
 */
#include <check.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/admin/host_allow.h"
#include "daemon/admin/http_admin.h"
#include "daemon/admin/ui_ctx.h"
#include "daemon/admin/ui_throttle.h"
#include "daemon/supervisor/admin_socket.h"
#include "daemon/admin/ui.h"
#include "daemon/admin/ui_assets.h"
#include "daemon/admin/ui_auth.h"
#include "daemon/admin/ui_layout.h"
#include "daemon/admin/ui_pages.h"
#include "fixture.h"
#include "http_client.h"
#include "testutil.h"

#define TOKEN "0123456789abcdef-token"
#define BEARER "Authorization: Bearer " TOKEN "\r\n"
#define DEFER_MS 300

static struct event_base *base;
static struct http_admin *server;
static struct ui *dash;
static pthread_t loop_thread;
static int PORT;
static struct queue_conf queue = { .name = "orders", .workers = 2 };
static struct daemon_conf conf = { .queues = &queue, .nqueues = 1, .admin_ui = 1,
                                   .admin_token = TOKEN,
                                   .redis = { .prefix = DQ_DEFAULT_PREFIX } };
static int fills, deferred_done;
static char seen[6][256];    /* what the last page was given */

static void fill(void *arg, struct ui_env *env)
{
    (void)arg;
    __atomic_add_fetch(&fills, 1, __ATOMIC_SEQ_CST);
    env->conf = &conf;
}

/* ---- this file's pages ---- */

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ui_ctx *x = arg;
    const struct ui_env *env = ui_ctx_env(x);   /* safe after the client left */
    ck_assert_ptr_eq(env->conf, &conf);
    ui_ctx_reply(x, 200, "text/plain; charset=utf-8", "later\n", 6);
    __atomic_add_fetch(&deferred_done, 1, __ATOMIC_SEQ_CST);
}

/* The overview answers DEFER_MS later, like a page waiting on Redis. */
void ui_page_overview(struct ui_ctx *x)
{
    struct timeval tv = { 0, DEFER_MS * 1000 };
    ck_assert_int_eq(event_base_once(base, -1, EV_TIMEOUT, on_later, x, &tv), 0);
}

static void record(struct ui_ctx *x, const char *what)
{
    snprintf(seen[0], sizeof seen[0], "%s", what);
    for (size_t i = 0; i < 4; i++) {
        const char *s = ui_ctx_segment(x, i);
        snprintf(seen[1 + i], sizeof seen[1 + i], "%s", s ? s : "(null)");
    }
    const char *q = ui_ctx_query(x, "tab"), *f = ui_ctx_form(x, "back");
    snprintf(seen[5], sizeof seen[5], "tab=%s back=%s", q ? q : "-", f ? f : "-");
    ui_ctx_reply(x, 200, NULL, what, strlen(what));
}

void ui_page_queue(struct ui_ctx *x, const char *q) { (void)q; record(x, "queue"); }
void ui_page_find(struct ui_ctx *x, const char *q) { (void)q; record(x, "find"); }
void ui_page_job(struct ui_ctx *x, const char *q, const char *id)
{
    (void)q;
    (void)id;
    record(x, "job");
}
void ui_action_queue(struct ui_ctx *x, const char *q, const char *a)
{
    (void)q;
    (void)a;
    record(x, "action_queue");
}
void ui_action_job(struct ui_ctx *x, const char *q, const char *id, const char *a)
{
    (void)q;
    (void)id;
    (void)a;
    record(x, "action_job");
}
void ui_page_not_found(struct ui_ctx *x, const char *what)
{
    ui_ctx_reply(x, 404, NULL, what, strlen(what));
}
/* What the login page saw of its request's body: its length and how
 * many of its bytes were not zero (the form's secret must be overwritten
 * where libevent holds it once read). */
static size_t login_body_len, login_body_nonzero;

void ui_page_login(struct ui_ctx *x, int code, const char *error)
{
    (void)error;
    struct evbuffer *in = evhttp_request_get_input_buffer(x->req);
    login_body_len = evbuffer_get_length(in);
    login_body_nonzero = 0;
    unsigned char *p = evbuffer_pullup(in, -1);
    for (size_t i = 0; p && i < login_body_len; i++)
        login_body_nonzero += p[i] != 0;
    ui_ctx_reply(x, code, NULL, "login", 5);
}
void ui_api_history(struct ui_ctx *x)
{
    record(x, "history");
}

static const struct ui_asset css = { "app.css", "text/css; charset=utf-8", "main{}", 6,
                                     "\"abc123\"" };

const struct ui_asset *ui_asset_find(const char *name)
{
    return strcmp(name, css.name) == 0 ? &css : NULL;
}

/* ---- the server ---- */

static int route_healthz(FILE *out, struct http_admin_header *extra, void *arg)
{
    (void)extra;
    (void)arg;
    fputs("ok\n", out);
    return 200;
}

static const struct http_admin_route routes[] = {
    { "/healthz", "text/plain; charset=utf-8", route_healthz },
};

static void on_request(struct evhttp_request *req, void *arg)
{
    ui_handle(arg, req);
}

static void on_close(struct evhttp_connection *evcon, void *arg)
{
    ui_connection_closed(arg, evcon);
}

/* Stop the loop from its own thread (no libevent locking here). */
static int stop_pipe[2];
static struct event *stop_ev;

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    event_base_loopbreak(base);
}

static void *run_loop(void *arg)
{
    (void)arg;
    event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
    return NULL;
}

static void setup(void)
{
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    ck_assert_int_eq(pipe(stop_pipe), 0);
    stop_ev = event_new(base, stop_pipe[0], EV_READ, on_stop, NULL);
    ck_assert_int_eq(event_add(stop_ev, NULL), 0);
    server = http_admin_new(base, routes, 1, NULL);
    ck_assert_ptr_nonnull(server);
    struct ui_host host = { fill, NULL, NULL };
    dash = ui_new(&host);
    ck_assert_ptr_nonnull(dash);
    ui_set_conf(dash, &conf);
    http_admin_set_prefix(server, "/ui/", on_request, on_close, dash);
    PORT = fixture_free_port();
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    char err[200];
    int fd = admin_socket_bind((struct sockaddr *)&a, sizeof a, err, sizeof err);
    ck_assert_msg(fd >= 0, "%s", err);
    ck_assert_int_eq(http_admin_adopt(server, fd), 0);
    ck_assert_int_eq(pthread_create(&loop_thread, NULL, run_loop, NULL), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(write(stop_pipe[1], "x", 1), 1);
    pthread_join(loop_thread, NULL);
    event_free(stop_ev);
    http_admin_free(server);
    ui_free(dash);
    event_base_free(base);
}

static int get(const char *method, const char *path, const char *headers, const char *body,
               struct http_reply *r)
{
    int rc = http_request(PORT, method, path, headers, body, body ? strlen(body) : 0, 5000,
                          r);
    ck_assert_msg(rc == 0 && r->status > 0, "%s %s: no answer", method, path);
    return r->status;
}

static int status_of(const char *method, const char *path, const char *headers,
                     const char *body)
{
    struct http_reply r;
    int st = get(method, path, headers, body, &r);
    http_reply_free(&r);
    return st;
}

/* Poll cond(arg) every 10 ms for timeout_ms at most; its last value. */
static int wait_for(int timeout_ms, int (*cond)(void *), void *arg)
{
    int64_t end = tu_mono_ms() + timeout_ms;
    while (!cond(arg) && tu_mono_ms() < end)
        tu_sleep_ms(10);
    return cond(arg);
}

static int deferred_n(void *arg)
{
    return __atomic_load_n(&deferred_done, __ATOMIC_SEQ_CST) >= *(int *)arg;
}

START_TEST(deferred_reply_reaches_the_client)
{
    struct http_reply r;
    int64_t t0 = tu_mono_ms();
    ck_assert_int_eq(get("GET", "/ui/", BEARER, NULL, &r), 200);
    ck_assert_str_eq(r.body, "later\n");
    ck_assert_int_ge(tu_mono_ms() - t0, DEFER_MS - 50);
    char v[64];
    ck_assert_ptr_nonnull(http_header(&r, "X-Frame-Options", v, sizeof v));
    http_reply_free(&r);
}
END_TEST

/* The client leaves before the page answers: the reply is dropped, the
 * server goes on.  Each way of leaving: a close after the whole request,
 * a reset, and a half-close (shutdown of its writing side). */
START_TEST(deferred_reply_after_the_client_left)
{
    const char *reqs = "GET /ui/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" BEARER "\r\n";
    for (int way = 0; way < 3; way++) {
        int fd = http_connect(PORT);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, reqs, strlen(reqs)), (ssize_t)strlen(reqs));
        tu_sleep_ms(50);        /* the page has it */
        if (way == 1) {
            struct linger lg = { 1, 0 };
            ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        }
        if (way == 2)
            ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        else
            close(fd);
        int want = way + 1;
        ck_assert_msg(wait_for(2000, deferred_n, &want), "the page did not answer");
        if (way == 2)
            close(fd);
        ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
        ck_assert_int_eq(status_of("GET", "/ui/queues/orders", BEARER, NULL), 200);
    }
    /* Many at once (within the dashboard's share of one address's
     * connections, http_conns.h), all gone before their answers. */
    int fds[10];
    for (int i = 0; i < 10; i++) {
        fds[i] = http_connect(PORT);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(write(fds[i], reqs, strlen(reqs)), (ssize_t)strlen(reqs));
    }
    tu_sleep_ms(50);
    for (int i = 0; i < 10; i++)
        close(fds[i]);
    int want = 13;
    ck_assert_msg(wait_for(3000, deferred_n, &want), "not every page answered");
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
}
END_TEST

START_TEST(pages_get_decoded_segments_query_and_form)
{
    ck_assert_int_eq(status_of("GET", "/ui/queues/orders/jobs/a%20b%3C%3E?tab=dead&x=1",
                               BEARER, NULL), 200);
    ck_assert_str_eq(seen[0], "job");
    ck_assert_str_eq(seen[1], "queues");
    ck_assert_str_eq(seen[2], "orders");
    ck_assert_str_eq(seen[3], "jobs");
    ck_assert_str_eq(seen[4], "a b<>");
    ck_assert_str_eq(seen[5], "tab=dead back=-");
    /* A job id may hold a '/': escaped, it stays in its segment. */
    ck_assert_int_eq(status_of("GET", "/ui/queues/orders/jobs/a%2Fb%2F..", BEARER, NULL), 200);
    ck_assert_str_eq(seen[4], "a/b/..");
    ck_assert_int_eq(status_of("POST", "/ui/queues/orders/jobs/7/requeue",
                               BEARER "Sec-Fetch-Site: same-origin\r\n"
                               "Content-Type: application/x-www-form-urlencoded\r\n",
                               "back=%2Fui%2Fqueues%2Forders%3Ftab%3Ddead&y=2"), 200);
    ck_assert_str_eq(seen[0], "action_job");
    ck_assert_str_eq(seen[5], "tab=- back=/ui/queues/orders?tab=dead");
    /* A form that is not urlencoded is refused. */
    ck_assert_int_eq(status_of("POST", "/ui/queues/orders/pause",
                               BEARER "Sec-Fetch-Site: same-origin\r\n"
                               "Content-Type: text/plain\r\n", "back=x"), 400);
    ck_assert_int_eq(status_of("POST", "/ui/queues/orders/dead/purge-all",
                               BEARER "Sec-Fetch-Site: same-origin\r\n", ""), 200);
    ck_assert_str_eq(seen[0], "action_queue");
    ck_assert_int_eq(status_of("GET", "/ui/api/history?tab=q", BEARER, NULL), 200);
    ck_assert_str_eq(seen[0], "history");
    /* Routes that do not exist, or with the wrong method. */
    ck_assert_int_eq(status_of("GET", "/ui/queues/orders/pause", BEARER, NULL), 404);
    ck_assert_int_eq(status_of("GET", "/ui/queues/other", BEARER, NULL), 404);
    ck_assert_int_eq(status_of("GET", "/ui/queues/orders/jobs/1/2/3/4/5/6", BEARER, NULL),
                     400);
    ck_assert_int_eq(status_of("PUT", "/ui/queues/orders", BEARER, NULL), 405);
}
END_TEST

/* A login's form, once read, is overwritten where libevent holds it. */
START_TEST(login_form_secret_is_overwritten)
{
    const char *form = "token=a-wrong-but-secret-looking-token";
    ck_assert_int_eq(status_of("POST", "/ui/login", "Sec-Fetch-Site: same-origin\r\n"
                               "Content-Type: application/x-www-form-urlencoded\r\n",
                               form), 401);
    ck_assert_uint_eq(login_body_len, strlen(form));
    ck_assert_uint_eq(login_body_nonzero, 0);
}
END_TEST

START_TEST(assets_need_no_login_and_cache)
{
    struct http_reply r;
    ck_assert_int_eq(get("GET", "/ui/assets/app.css", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.body, "main{}");
    char v[128];
    ck_assert_str_eq(http_header(&r, "ETag", v, sizeof v), "\"abc123\"");
    ck_assert_str_eq(http_header(&r, "Cache-Control", v, sizeof v), "private, max-age=300");
    ck_assert_str_eq(http_header(&r, "Content-Type", v, sizeof v), "text/css; charset=utf-8");
    ck_assert_ptr_nonnull(http_header(&r, "Content-Security-Policy", v, sizeof v));
    http_reply_free(&r);
    ck_assert_int_eq(status_of("GET", "/ui/assets/app.css", "If-None-Match: \"abc123\"\r\n",
                               NULL), 304);
    ck_assert_int_eq(status_of("GET", "/ui/assets/nope.js", NULL, NULL), 404);
    ck_assert_int_eq(status_of("GET", "/ui/assets/app.css/x", NULL, NULL), 404);
}
END_TEST

/* Failures cost nothing 5 times, then a wait that doubles up to a
 * minute; refused attempts do not lengthen it; the right secret clears
 * the address; a line a second at most is logged. */
START_TEST(throttle_grows_and_forgets)
{
    struct ui_throttle *t = ui_throttle_new();
    ck_assert_ptr_nonnull(t);
    struct ui_throttle_report rep;
    int64_t now = 5000;
    for (int i = 0; i < UI_THROTTLE_FREE - 1; i++) {
        ui_throttle_failed(t, "10.0.0.1", 0, now, &rep);
        ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now), 0);
        ck_assert_int_eq(rep.log, i == 0);
    }
    ui_throttle_failed(t, "10.0.0.1", 0, now, &rep);
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now), 1000);
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.2", now), 0);
    ui_throttle_failed(t, "10.0.0.1", 1, now + 500, &rep);       /* refused */
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now + 500), 500);
    ui_throttle_failed(t, "10.0.0.1", 0, now + 1000, &rep);
    ck_assert_int_eq(rep.log, 1);
    ck_assert_int_eq(rep.failures, UI_THROTTLE_FREE + 1);      /* since the first line */
    ck_assert_int_eq(rep.refused, 1);
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now + 1000), 2000);
    for (int i = 0; i < 20; i++)
        ui_throttle_failed(t, "10.0.0.1", 0, now + 1000, &rep);
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now + 1000), UI_THROTTLE_MAX_WAIT_MS);
    ui_throttle_passed(t, "10.0.0.1");
    ck_assert_int_eq(ui_throttle_wait(t, "10.0.0.1", now + 1000), 0);
    /* More addresses than the table holds: bounded, the newest kept. */
    char addr[32];
    for (int i = 0; i < UI_THROTTLE_ADDRS + 50; i++) {
        snprintf(addr, sizeof addr, "10.1.%d.%d", i / 256, i % 256);
        for (int k = 0; k < UI_THROTTLE_FREE; k++)
            ui_throttle_failed(t, addr, 0, now + i, &rep);
    }
    ck_assert_int_gt(ui_throttle_wait(t, addr, now + UI_THROTTLE_ADDRS + 50), 0);
    ck_assert_int_eq(ui_throttle_wait(t, "10.1.0.0", now + UI_THROTTLE_ADDRS + 50), 0);
    ui_throttle_free(t);
}
END_TEST

/* The names a Host or an Origin may give (no connection: fd -1). */
START_TEST(host_names_and_origins)
{
    char *names[] = { "jobs.example.com", "fd00::5" };
    struct sockaddr_storage listen = { 0 };
    struct sockaddr_in *v4 = (struct sockaddr_in *)&listen;
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(0x0a000005);    /* 10.0.0.5 */
    struct host_allow set = { names, 2, &listen };
    const char *good[] = { "localhost", "LocalHost:80", "10.0.0.5", "10.0.0.5:9464",
                           "jobs.example.com", "JOBS.example.com:443", "[fd00::5]",
                           "[fd00::5]:9464" };
    const char *bad[] = { "", ":80", "evil.example", "jobs.example.com.evil",
                          "10.0.0.5.nip.io", "10.0.0.6", "localhost:x", "localhost:80:80",
                          "fd00::5", "[fd00::5", "[fd00::5]x", "0.0.0.0", "[::1]" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(host_allow_host(&set, -1, good[i]), "refused %s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!host_allow_host(&set, -1, bad[i]), "allowed %s", bad[i]);
    ck_assert(host_allow_origin(&set, -1, "http://jobs.example.com"));
    ck_assert(host_allow_origin(&set, -1, "https://jobs.example.com:8443"));
    ck_assert(!host_allow_origin(&set, -1, "http://jobs.example.com/x"));
    ck_assert(!host_allow_origin(&set, -1, "ftp://jobs.example.com"));
    ck_assert(!host_allow_origin(&set, -1, "null"));
    ck_assert(!host_allow_origin(&set, -1, "http://evil.example"));
    /* A wildcard listen address names nothing. */
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    ck_assert(!host_allow_host(&set, -1, "0.0.0.0:9464"));
}
END_TEST

START_TEST(equal_is_exact)
{
    ck_assert(ui_auth_equal("abc", 3, "abc", 3));
    ck_assert(!ui_auth_equal("abc", 3, "abd", 3));
    ck_assert(!ui_auth_equal("abc", 3, "abc", 2));
    ck_assert(!ui_auth_equal("ab", 2, "abc", 3));
    ck_assert(!ui_auth_equal("abc\0", 4, "abc", 3));
    ck_assert(ui_auth_equal("", 0, "", 0));
}
END_TEST

/* A request carrying `cookie` ("dq_session=..."), for ui_auth_check. */
static struct evhttp_request *with_cookie(const char *cookie)
{
    struct evhttp_request *req = evhttp_request_new(NULL, NULL);
    ck_assert_ptr_nonnull(req);
    char hdr[128];
    snprintf(hdr, sizeof hdr, "%.*s", (int)strcspn(cookie, ";"), cookie);
    ck_assert_int_eq(evhttp_add_header(evhttp_request_get_input_headers(req), "Cookie", hdr),
                     0);
    return req;
}

static int cookie_ok(struct ui_auth *a, const char *cookie, int64_t now)
{
    struct evhttp_request *req = with_cookie(cookie);
    int ok = ui_auth_check(a, req, now);
    evhttp_request_free(req);
    return ok;
}

/* A session used every 11 hours still ends at its absolute lifetime. */
START_TEST(sessions_end_at_their_lifetime_however_used)
{
    struct ui_auth *a = ui_auth_new(NULL);
    ck_assert_ptr_nonnull(a);
    const int64_t hour = 3600 * 1000, life = 72 * hour;
    struct daemon_conf dc = { .admin_token = TOKEN, .admin_session_lifetime_ms = life };
    ui_auth_set_conf(a, &dc);
    char cookie[160];
    ck_assert_int_eq(ui_auth_login(a, TOKEN, 1000, cookie, sizeof cookie), 0);
    int64_t t = 1000;
    for (; t <= 1000 + life; t += 11 * hour)
        ck_assert_msg(cookie_ok(a, cookie, t), "ended at %lld h", (long long)(t / hour));
    ck_assert(cookie_ok(a, cookie, 1000 + life));
    ck_assert(!cookie_ok(a, cookie, 1000 + life + 1));
    ui_auth_free(a);
}
END_TEST

START_TEST(sessions_are_bounded_and_expire)
{
    struct ui_auth *a = ui_auth_new(NULL);
    ck_assert_ptr_nonnull(a);
    struct daemon_conf dc = { .admin_token = TOKEN };
    ui_auth_set_conf(a, &dc);
    static char cookies[UI_SESSIONS_MAX + 1][160];
    ck_assert_int_eq(ui_auth_login(a, "wrong", 1000, cookies[0], sizeof cookies[0]), -1);
    for (int i = 0; i <= UI_SESSIONS_MAX; i++)
        ck_assert_int_eq(ui_auth_login(a, TOKEN, 1000 + i, cookies[i], sizeof cookies[i]), 0);
    /* One more than the table holds: the oldest went. */
    int64_t now = 1000 + UI_SESSIONS_MAX + 1;
    ck_assert(!cookie_ok(a, cookies[0], now));
    for (int i = 1; i <= UI_SESSIONS_MAX; i++)
        ck_assert_msg(cookie_ok(a, cookies[i], now), "session %d lost", i);
    /* Idle too long: gone; used: kept. */
    ck_assert(cookie_ok(a, cookies[1], now + UI_SESSION_IDLE_MS - 1));
    ck_assert(!cookie_ok(a, cookies[2], now + UI_SESSION_IDLE_MS + 1));
    /* The same credentials again keep the sessions; new ones end them. */
    ui_auth_set_conf(a, &dc);
    ck_assert(cookie_ok(a, cookies[1], now));
    struct daemon_conf dc2 = { .admin_token = TOKEN "-new" };
    ui_auth_set_conf(a, &dc2);
    ck_assert(!cookie_ok(a, cookies[1], now));
    ui_auth_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_front");
    TCase *tc = fixture_tcase(s, "front", 30, NULL, NULL, setup, teardown);
    tcase_add_test(tc, deferred_reply_reaches_the_client);
    tcase_add_test(tc, deferred_reply_after_the_client_left);
    tcase_add_test(tc, pages_get_decoded_segments_query_and_form);
    tcase_add_test(tc, assets_need_no_login_and_cache);
    tcase_add_test(tc, login_form_secret_is_overwritten);
    tc = fixture_tcase(s, "auth", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, equal_is_exact);
    tcase_add_test(tc, host_names_and_origins);
    tcase_add_test(tc, sessions_are_bounded_and_expire);
    tcase_add_test(tc, sessions_end_at_their_lifetime_however_used);
    tcase_add_test(tc, throttle_grows_and_forgets);
    return fixture_run_suite(s);
}
