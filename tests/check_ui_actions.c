/*
 * The dashboard's actions whose outcome cannot be known
 * (src/daemon/admin/ui_actions.c, ui_data.c): a real delayqd on a real
 * redis-server.  A resume is sent while Redis is stopped (SIGSTOP for
 * 3 s) and the daemon reloads (SIGHUP) meanwhile: the dashboard's
 * connection closes with the script sent and unanswered, so the page must
 * say "sent; the outcome is unknown", never "failed", and the queue is
 * indeed resumed once Redis runs again.
 */
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "fixture.h"
#include "http_client.h"
#include "testutil.h"

#define TOKEN "0123456789abcdef0123456789abcdef"
#define BEARER "Authorization: Bearer " TOKEN "\r\n"

static struct harness H;
static int PORT;

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Start delayqd with the dashboard (the given command timeout) and wait
 * until a queue page answers 200. */
static void start(const char *command_timeout)
{
    char token[256], extra[512], redis[512];
    snprintf(token, sizeof token, "%s/ui.token", H.fx.dir);
    h_write_file(token, TOKEN "\n");
    ck_assert_int_eq(chmod(token, 0600), 0);
    PORT = tu_free_port();
    snprintf(extra, sizeof extra, "admin = { listen = \"127.0.0.1:%d\"; ui = true; "
             "token_file = \"%s\"; };\n", PORT, token);
    snprintf(redis, sizeof redis, "unix_socket = \"%s\"; command_timeout = \"%s\";",
             H.fx.sock, command_timeout);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.extra = extra;
    hc.redis = redis;
    h_write_conf(&H, &hc);
    h_start(&H, 1);
    int code = 0;
    for (int i = 0; i < 500 && code != 200; i++) {
        struct http_reply r;
        if (http_request(PORT, "GET", "/ui/queues/" H_QUEUE, BEARER, NULL, 0, 5000, &r) == 0)
            code = r.status;
        http_reply_free(&r);
        if (code != 200)
            tu_sleep_ms(20);
    }
    ck_assert_msg(code == 200, "the dashboard never answered 200\n%s", h_log_tail(&H));
}

/* Send a POST of `path` (the dashboard's own form) on a new connection,
 * without waiting for the answer; the socket. */
static int post_async(const char *path)
{
    char req[1024];
    int len = snprintf(req, sizeof req,
                       "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" BEARER
                       "Sec-Fetch-Site: same-origin\r\n"
                       "Content-Type: application/x-www-form-urlencoded\r\n"
                       "Content-Length: 0\r\nConnection: close\r\n\r\n", path, PORT);
    int fd = http_connect(PORT);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(send(fd, req, (size_t)len, MSG_NOSIGNAL), len);
    return fd;
}

/* Read fd's answer into buf until EOF or `until_ms` (monotonic); the
 * bytes read. */
static size_t read_answer(int fd, char *buf, size_t len, size_t have, int64_t until_ms)
{
    while (have < len - 1) {
        int64_t left = until_ms - tu_mono_ms();
        struct pollfd p = { fd, POLLIN, 0 };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf + have, len - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    return have;
}

static int resumed(void *arg)
{
    (void)arg;
    int64_t since = 0;
    return dq_paused(H.c, H_QUEUE, &since) == DQ_OK && since < 0;
}

/* Resume sent, Redis stopped for 3 s, a reload meanwhile. */
START_TEST(resume_in_flight_over_a_reload_is_unknown_not_failed)
{
    start("10s");
    int64_t since = 0;
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, &since), DQ_OK);
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    int64_t t0 = tu_mono_ms();
    int fd = post_async("/ui/queues/" H_QUEUE "/resume");
    tu_sleep_ms(300);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    char buf[8192];
    size_t n = read_answer(fd, buf, sizeof buf, 0, t0 + 3000);
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    n = read_answer(fd, buf, sizeof buf, n, tu_mono_ms() + 10000);
    close(fd);
    printf("resume over a reload answered after %lld ms: %.*s\n",
           (long long)(tu_mono_ms() - t0), (int)strcspn(buf, "\r"), buf);
    ck_assert_msg(strncmp(buf, "HTTP/1.1 303", 12) == 0, "%s\nlog:\n%s", buf,
                  h_log_tail(&H));
    ck_assert_msg(strstr(buf, "\r\nLocation: /ui/queues/" H_QUEUE "?sent=unknown\r\n"),
                  "%s\nlog:\n%s", buf, h_log_tail(&H));
    ck_assert_ptr_null(strstr(buf, "failed="));
    /* It ran. */
    ck_assert_msg(h_wait(5000, resumed, NULL), "the queue was not resumed");
    ck_assert_int_ge(h_log_count(&H, "the outcome is unknown"), 1);
    /* The page says so in words, not as a failure. */
    struct http_reply r;
    ck_assert_int_eq(http_request(PORT, "GET", "/ui/queues/" H_QUEUE "?sent=unknown", BEARER,
                                  NULL, 0, 5000, &r), 0);
    ck_assert_msg(strstr(r.body, "<p id=\"flash\" class=\"unknown\">Sent; the outcome is "
                                 "unknown, look at the queue.</p>"), "%s", r.body);
    ck_assert_ptr_null(strstr(r.body, "Not done"));
    http_reply_free(&r);
}
END_TEST

/* The same by a command timeout, without a reload. */
START_TEST(resume_past_the_command_timeout_is_unknown)
{
    start("1s");
    int64_t since = 0;
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, &since), DQ_OK);
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    int64_t t0 = tu_mono_ms();
    int fd = post_async("/ui/queues/" H_QUEUE "/resume");
    char buf[8192];
    size_t n = read_answer(fd, buf, sizeof buf, 0, t0 + 3000);
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    read_answer(fd, buf, sizeof buf, n, tu_mono_ms() + 10000);
    close(fd);
    ck_assert_msg(strstr(buf, "\r\nLocation: /ui/queues/" H_QUEUE "?sent=unknown\r\n"),
                  "%s\nlog:\n%s", buf, h_log_tail(&H));
    ck_assert_msg(h_wait(5000, resumed, NULL), "the queue was not resumed");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_actions");
    TCase *tc = fixture_tcase(s, "unknown", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, resume_in_flight_over_a_reload_is_unknown_not_failed);
    tcase_add_test(tc, resume_past_the_command_timeout_is_unknown);
    return fixture_run_suite(s);
}
