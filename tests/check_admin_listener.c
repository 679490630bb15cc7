/*
 * The admin listener under hostile clients (src/daemon/admin/http_conns.c,
 * host_allow.c, ui_throttle.c): a real delayqd on a real redis-server,
 * spoken to over raw sockets.  Clients that trickle a byte every 4 s (32,
 * then 100 of them, reconnecting when closed) while /healthz is asked ten
 * times a second; the deadline of a whole request; the caps per address
 * and in all (from several loopback addresses); the dashboard's share
 * with Redis stopped; the Host check against a DNS-rebinding request; and
 * failed logins, throttled and logged.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
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

#define TOKEN "correct-horse-battery-staple-42"
#define BEARER "Authorization: Bearer " TOKEN "\r\n"
#define FORM "Content-Type: application/x-www-form-urlencoded\r\n"
#define SAME "Sec-Fetch-Site: same-origin\r\n"

static struct harness H;
static int PORT;
static char TOKEN_FILE[256];

static void setup(void)
{
    h_setup(&H);
    PORT = fixture_free_port();
    snprintf(TOKEN_FILE, sizeof TOKEN_FILE, "%s/ui.token", H.fx.dir);
    h_write_file(TOKEN_FILE, TOKEN "\n");
    ck_assert_int_eq(chmod(TOKEN_FILE, 0600), 0);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Write the configuration: the dashboard on and `keys` in the admin group. */
static void write_conf(const char *keys)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    char extra[1024];
    snprintf(extra, sizeof extra, "admin = { listen = \"127.0.0.1:%d\"; ui = true; "
             "token_file = \"%s\"; %s };\n", PORT, TOKEN_FILE, keys);
    hc.extra = extra;
    h_write_conf(&H, &hc);
}

static void start(const char *keys)
{
    write_conf(keys);
    h_start(&H, 2);
}

/* The status of one request, 0 when none came within 5 s. */
static int status_of(const char *method, const char *path, const char *headers,
                     const char *body)
{
    struct http_reply r;
    int rc = http_request(PORT, method, path, headers, body, body ? strlen(body) : 0, 5000,
                          &r);
    int st = rc == 0 ? r.status : 0;
    http_reply_free(&r);
    return st;
}

/* A connection to the listener from loopback address 127.0.0.`host`. */
static int connect_from(int host)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)host);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    a.sin_port = htons((uint16_t)PORT);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect from "
                  "127.0.0.%d: %s", host, strerror(errno));
    return fd;
}

/* Whether the server closed fd already (no waiting). */
static int closed_now(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- trickling clients ---------------------------------------------------- */

struct trickler {
    int fd;
    int sent;           /* bytes of the request sent on this connection */
    int64_t next_ms;    /* its next byte */
};

static const char TRICKLE[] = "GET /ui/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" BEARER
                              "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";

/* Send t's next byte, first reconnecting if the server closed it;
 * returns 1 when it had to reconnect. */
static int trickle_step(struct trickler *t, int64_t now)
{
    int again = t->fd < 0 || closed_now(t->fd);
    if (again) {
        if (t->fd >= 0)
            close(t->fd);
        t->fd = http_connect(PORT);
        t->sent = 0;
    }
    if (t->fd >= 0 && t->sent < (int)sizeof TRICKLE - 1
        && send(t->fd, TRICKLE + t->sent, 1, MSG_NOSIGNAL) == 1)
        t->sent++;
    t->next_ms = now + 4000;
    return again;
}

/* `n` clients trickle a byte every 4 s (spread over the 4 s) for `ms`
 * while /healthz is asked every 100 ms: every probe must get 200. */
static void trickle_and_probe(int n, int64_t ms)
{
    struct trickler *t = calloc((size_t)n, sizeof *t);
    ck_assert_ptr_nonnull(t);
    int64_t t0 = tu_mono_ms();
    for (int i = 0; i < n; i++) {
        t[i].fd = -1;
        t[i].next_ms = t0 + (int64_t)i * 4000 / n;
    }
    int probes = 0, slow = 0, reconnects = 0;
    int64_t worst = 0;
    for (int64_t now = t0; now - t0 < ms; now = tu_mono_ms()) {
        for (int i = 0; i < n; i++)
            if (now >= t[i].next_ms)
                reconnects += trickle_step(&t[i], now);
        int64_t p0 = tu_mono_ms();
        struct http_reply r;
        int rc = http_request(PORT, "GET", "/healthz", NULL, NULL, 0, 3000, &r);
        int64_t took = tu_mono_ms() - p0;
        ck_assert_msg(rc == 0 && r.status == 200, "/healthz: %d after %lld ms with %d "
                      "trickling clients: %s", rc == 0 ? r.status : -1, (long long)took, n,
                      rc == 0 && r.body ? r.body : "");
        http_reply_free(&r);
        probes++;
        slow += took >= 100;
        worst = took > worst ? took : worst;
        tu_sleep_ms(100);
    }
    printf("%d trickling clients: %d /healthz probes, %d at 100 ms or more, worst %lld ms; "
           "%d reconnects of trickling clients\n", n, probes, slow, (long long)worst,
           reconnects);
    /* Under 100 ms: one probe may miss it on a loaded machine, never by a
     * second (a probe that waited for a slot would wait for seconds). */
    ck_assert_msg(slow <= 1 && worst < 1000, "%d of %d probes took 100 ms or more (worst "
                  "%lld ms)", slow, probes, (long long)worst);
    for (int i = 0; i < n; i++)
        if (t[i].fd >= 0)
            close(t[i].fd);
    free(t);
}

static int healthy(void *arg)
{
    (void)arg;
    return status_of("GET", "/healthz", NULL, NULL) == 200;
}

START_TEST(healthz_answers_through_32_then_100_trickling_clients)
{
    start("");
    /* Healthy first (its figures refreshed once): from then on only the
     * listener could make a probe fail. */
    ck_assert_msg(h_wait(10000, healthy, NULL), "never healthy; log:\n%s", h_log_tail(&H));
    trickle_and_probe(32, 10000);
    trickle_and_probe(100, 10000);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    /* Hundreds of connections closed: summed up, a line a minute at most. */
    ck_assert_msg(h_log_count(&H, "admin: connections closed") == 1, "%s", h_log_tail(&H));
}
END_TEST

/* A client that is never idle for long is still closed at the deadline
 * of its whole request. */
START_TEST(whole_request_deadline)
{
    start("request_timeout = \"2s\";");
    int fd = http_connect(PORT);
    ck_assert_int_ge(fd, 0);
    int64_t t0 = tu_mono_ms();
    int sent = 0;
    while (!closed_now(fd) && tu_mono_ms() - t0 < 8000) {
        if (send(fd, TRICKLE + sent % 20, 1, MSG_NOSIGNAL) == 1)
            sent++;
        tu_sleep_ms(250);
    }
    int64_t took = tu_mono_ms() - t0;
    printf("a client sending a byte every 250 ms was closed after %lld ms (%d bytes)\n",
           (long long)took, sent);
    ck_assert_msg(closed_now(fd), "still open after %lld ms", (long long)took);
    ck_assert_msg(took >= 1800 && took < 4000, "closed after %lld ms", (long long)took);
    close(fd);
    /* A whole request in time is answered, and one on the same connection
     * after its answer gets a new deadline. */
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
}
END_TEST

/* The global cap, from three addresses: the oldest waiting connections
 * make room, whoever they are, once they have waited half a second; the
 * per-address cap keeps one address to its share.  Then a burst from a
 * fourth address, younger than half a second: it may take twice the cap
 * before its own oldest go. */
START_TEST(caps_per_address_and_in_all)
{
    start("max_connections = 12; max_connections_per_address = 6;");
    int a[8], b[6], c[6];
    for (int i = 0; i < 8; i++) {
        a[i] = connect_from(2);
        tu_sleep_ms(i == 5 ? 600 : 20);     /* the first 6 wait past the grace */
    }
    tu_sleep_ms(200);
    int closed_a = 0;
    for (int i = 0; i < 8; i++)
        closed_a += closed_now(a[i]);
    ck_assert_msg(closed_a == 2 && closed_now(a[0]) && closed_now(a[1]),
                  "127.0.0.2 over its cap of 6: %d closed", closed_a);
    for (int i = 0; i < 6; i++) {
        b[i] = connect_from(3);
        tu_sleep_ms(20);
    }
    tu_sleep_ms(600);
    for (int i = 0; i < 6; i++) {
        c[i] = connect_from(4);
        tu_sleep_ms(20);
    }
    tu_sleep_ms(200);
    int open_a = 0, open_b = 0, open_c = 0;
    for (int i = 0; i < 6; i++) {
        open_a += !closed_now(a[i + 2]);
        open_b += !closed_now(b[i]);
        open_c += !closed_now(c[i]);
    }
    printf("caps: open after 20 connections from 3 addresses: %d, %d, %d\n", open_a, open_b,
           open_c);
    ck_assert_int_eq(open_a, 0);    /* the oldest made room */
    ck_assert_int_eq(open_b, 6);
    ck_assert_int_eq(open_c, 6);
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
    int d[14], open_d = 0;
    for (int i = 0; i < 14; i++)
        d[i] = connect_from(5);
    tu_sleep_ms(200);
    for (int i = 0; i < 14; i++)
        open_d += !closed_now(d[i]);
    printf("caps: a burst of 14 from one address with a cap of 6: %d open\n", open_d);
    ck_assert_int_eq(open_d, 12);
    ck_assert(closed_now(d[0]) && closed_now(d[1]));
    for (int i = 0; i < 14; i++)
        close(d[i]);
    for (int i = 0; i < 6; i++) {
        close(b[i]);
        close(c[i]);
    }
    for (int i = 0; i < 8; i++)
        close(a[i]);
}
END_TEST

/* Dashboard requests stuck on a stopped Redis hold at most their share
 * (12 of one address's 16): the 13th is 503 at once, and /healthz is
 * answered meanwhile. */
START_TEST(dashboard_share_leaves_room_for_probes)
{
    start("");
    const char *page = "GET /ui/queues/" H_QUEUE " HTTP/1.1\r\nHost: 127.0.0.1\r\n" BEARER
                       "\r\n";
    ck_assert_int_eq(kill(H.fx.pid, SIGSTOP), 0);
    enum { N = 14 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = http_connect(PORT);
        ck_assert_int_ge(fds[i], 0);
        ck_assert_int_eq(send(fds[i], page, strlen(page), MSG_NOSIGNAL),
                         (ssize_t)strlen(page));
        tu_sleep_ms(30);
    }
    tu_sleep_ms(300);
    int busy = 0;
    for (int i = 0; i < N; i++) {
        char buf[64] = "";
        ssize_t n = recv(fds[i], buf, sizeof buf - 1, MSG_DONTWAIT);
        if (n > 0 && strncmp(buf, "HTTP/1.1 503", 12) == 0)
            busy++;
    }
    int64_t t0 = tu_mono_ms();
    int st = status_of("GET", "/healthz", NULL, NULL);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_int_eq(kill(H.fx.pid, SIGCONT), 0);
    printf("dashboard share: %d of %d stuck page requests answered 503; /healthz %d in "
           "%lld ms\n", busy, N, st, (long long)took);
    ck_assert_int_eq(busy, N - 12);
    ck_assert_int_eq(st, 200);
    ck_assert_msg(took < 1000, "/healthz took %lld ms", (long long)took);
    for (int i = 0; i < N; i++)
        close(fds[i]);
}
END_TEST

/* ---- Host and Origin ------------------------------------------------------ */

#define REBIND "Host: evil.example:%d\r\nOrigin: http://evil.example:%d\r\n" \
               "Sec-Fetch-Site: same-origin\r\n"

START_TEST(rebinding_requests_are_421_before_anything)
{
    start("hosts = [ \"dq.example.com\", \"[::1]\" ];");
    char hdr[512];
    snprintf(hdr, sizeof hdr, REBIND, PORT, PORT);
    ck_assert_int_eq(status_of("GET", "/metrics", hdr, NULL), 421);
    ck_assert_int_eq(status_of("GET", "/healthz", hdr, NULL), 421);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 421);
    snprintf(hdr, sizeof hdr, REBIND FORM, PORT, PORT);
    ck_assert_int_eq(status_of("POST", "/ui/login", hdr, "token=" TOKEN), 421);
    /* Even with the right token: before authentication. */
    snprintf(hdr, sizeof hdr, REBIND BEARER, PORT, PORT);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 421);
    ck_assert_int_eq(status_of("GET", "/nothing", hdr, NULL), 421);
    /* Said once (a minute), with the name, for an operator to list it. */
    ck_assert_msg(h_log_count(&H, "answered 421, the last for Host 'evil.example:") == 1,
                  "%s", h_log_tail(&H));
    /* The names of this server pass, with or without a port. */
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: localhost\r\n", NULL), 200);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: LOCALHOST:1\r\n", NULL), 200);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: dq.example.com\r\n", NULL), 200);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: [::1]:9464\r\n", NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", "Host: 127.0.0.1\r\n" BEARER, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: dq.example.com.evil\r\n", NULL), 421);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: 127.0.0.1.nip.io\r\n", NULL), 421);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: 0.0.0.0\r\n", NULL), 421);
    /* No Host at all (HTTP/1.0): no browser, let through. */
    int fd = http_connect(PORT);
    ck_assert_int_ge(fd, 0);
    const char *old_req = "GET /healthz HTTP/1.0\r\n\r\n";
    ck_assert_int_eq(send(fd, old_req, strlen(old_req), MSG_NOSIGNAL), (ssize_t)strlen(old_req));
    char buf[64] = "";
    ck_assert_int_gt(recv(fd, buf, sizeof buf - 1, 0), 12);
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0,
                  "%s", buf);
    close(fd);
    /* The Origin of a POST is compared with these names, not with Host. */
    snprintf(hdr, sizeof hdr, "Host: 127.0.0.1:%d\r\nOrigin: http://evil.example:%d\r\n"
             FORM, PORT, PORT);
    ck_assert_int_eq(status_of("POST", "/ui/login", hdr, "token=" TOKEN), 403);
    ck_assert_int_eq(status_of("POST", "/ui/login", "Host: 127.0.0.1\r\nOrigin: "
                               "http://dq.example.com\r\n" FORM, "token=" TOKEN), 303);
    ck_assert_int_eq(status_of("POST", "/ui/login", "Host: localhost\r\nOrigin: "
                               "https://dq.example.com:8443\r\n" FORM, "token=" TOKEN), 303);
    /* A reload takes new names, and drops the old. */
    write_conf("hosts = [ \"jobs.example.org\" ];");
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reloaded", 1, 5000) == 1, "no reload:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: jobs.example.org\r\n", NULL), 200);
    ck_assert_int_eq(status_of("GET", "/metrics", "Host: dq.example.com\r\n", NULL), 421);
}
END_TEST

/* ---- failed logins -------------------------------------------------------- */

START_TEST(failed_logins_are_throttled_and_logged)
{
    start("");
    char cookie[160] = "";
    struct http_reply r;
    ck_assert_int_eq(http_request(PORT, "POST", "/ui/login", SAME FORM, "token=" TOKEN,
                                  strlen("token=" TOKEN), 5000, &r), 0);
    ck_assert_int_eq(r.status, 303);
    char v[200], hdr[256];
    ck_assert_ptr_nonnull(http_header(&r, "Set-Cookie", v, sizeof v));
    snprintf(cookie, sizeof cookie, "%.*s", (int)strcspn(v, ";"), v);
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    http_reply_free(&r);

    /* Five free failures, by each way; then the address waits. */
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer nope-nope-nope\r\n",
                               NULL), 401);
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Basic b3BzOndyb25n\r\n", NULL),
                     401);
    ck_assert_int_eq(status_of("POST", "/ui/login", SAME FORM, "token=wrong"), 401);
    ck_assert_int_eq(status_of("POST", "/ui/login", SAME FORM, "user=a&password=b"), 401);
    int64_t t5 = tu_mono_ms();
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer x\r\n", NULL), 401);
    int n429 = 0;
    for (int i = 0; i < 50; i++)
        n429 += status_of("GET", "/ui/", "Authorization: Bearer guess\r\n", NULL) == 429;
    ck_assert_int_eq(n429, 50);
    /* Waiting, the right token is not even checked ... */
    ck_assert_int_eq(http_request(PORT, "GET", "/ui/", BEARER, NULL, 0, 5000, &r), 0);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_nonnull(http_header(&r, "Retry-After", v, sizeof v));
    ck_assert_str_eq(v, "1");
    http_reply_free(&r);
    ck_assert_int_eq(status_of("POST", "/ui/login", SAME FORM, "token=" TOKEN), 429);
    /* ... but a session already open goes on, and no one is locked out:
     * after the wait, the right token gets in at once. */
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    while (tu_mono_ms() - t5 < 1100)
        tu_sleep_ms(50);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    /* Logged, a line a second at most, with the count. */
    int lines = h_log_count(&H, "failed login");
    printf("failed logins: %d log lines for 57 failures in %lld ms\n", lines,
           (long long)(tu_mono_ms() - t5));
    ck_assert_msg(lines >= 1 && lines <= 3, "%d lines:\n%s", lines, h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "failed login") > 0
                      && h_log_count(&H, "from 127.0.0.1") > 0, "%s", h_log_tail(&H));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("admin_listener");
    TCase *tc = fixture_tcase(s, "hostile", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, healthz_answers_through_32_then_100_trickling_clients);
    tcase_add_test(tc, whole_request_deadline);
    tcase_add_test(tc, caps_per_address_and_in_all);
    tcase_add_test(tc, dashboard_share_leaves_room_for_probes);
    tc = fixture_tcase(s, "names", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, rebinding_requests_are_421_before_anything);
    tc = fixture_tcase(s, "logins", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, failed_logins_are_throttled_and_logged);
    return fixture_run_suite(s);
}
