/*
 * The dashboard's front door over real HTTP (src/daemon/admin/ui.c, ui_auth.c,
 * http_admin.c): a real delayqd on a real redis-server, spoken to with a
 * raw-socket client (http_client.h) so that every header is the test's
 * choice.  Authentication (bearer, basic, login cookie, logout, sessions
 * across a reload and an admin restart), the POST
 * gates (origin, read_only), the security headers, the limits (body size,
 * connections, a slow client), /metrics and /healthz beside it, and the
 * configuration errors of the admin group.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "fixture.h"
#include "http_client.h"
#include "testutil.h"

#define TOKEN "correct-horse-battery-staple-42"
#define BEARER "Authorization: Bearer " TOKEN "\r\n"
#define BASIC_USER "ops"
#define BASIC_PASS "s3cret:with:colons"
/* base64("ops:s3cret:with:colons") */
#define BASIC "Authorization: Basic b3BzOnMzY3JldDp3aXRoOmNvbG9ucw==\r\n"
#define FORM "Content-Type: application/x-www-form-urlencoded\r\n"
#define SAME "Sec-Fetch-Site: same-origin\r\n"
#define TIMEOUT_MS 10000

static struct harness H;
static int PORT;
static char TOKEN_FILE[256], BASIC_FILE[256];

/* Write `text` to `path` with `mode`. */
static void write_secret(const char *path, const char *text, mode_t mode)
{
    h_write_file(path, text);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static void setup(void)
{
    h_setup(&H);
    PORT = fixture_free_port();
    snprintf(TOKEN_FILE, sizeof TOKEN_FILE, "%s/ui.token", H.fx.dir);
    snprintf(BASIC_FILE, sizeof BASIC_FILE, "%s/ui.basic", H.fx.dir);
    write_secret(TOKEN_FILE, TOKEN "\n", 0600);
    write_secret(BASIC_FILE, BASIC_USER ":" BASIC_PASS "\n", 0640);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Start delayqd with the admin group holding `keys` besides listen. */
static void start(const char *keys)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    char extra[1024];
    snprintf(extra, sizeof extra, "admin = { listen = \"127.0.0.1:%d\"; %s };\n", PORT, keys);
    hc.extra = extra;
    h_write_conf(&H, &hc);
    h_start(&H, 2);
}

/* The usual dashboard: token and basic credentials. */
static void start_ui(void)
{
    char keys[768];
    snprintf(keys, sizeof keys, "ui = true; token_file = \"%s\"; basic_auth_file = \"%s\";",
             TOKEN_FILE, BASIC_FILE);
    start(keys);
}

/* One request; fails the test when no answer came. */
static void req(const char *method, const char *path, const char *headers, const char *body,
                struct http_reply *r)
{
    int rc = http_request(PORT, method, path, headers, body, body ? strlen(body) : 0,
                          TIMEOUT_MS, r);
    ck_assert_msg(rc == 0 && r->status > 0, "%s %s: no answer; log:\n%s", method, path,
                  h_log_tail(&H));
}

/* The status of one request (the reply freed). */
static int status_of(const char *method, const char *path, const char *headers,
                     const char *body)
{
    struct http_reply r;
    req(method, path, headers, body, &r);
    int st = r.status;
    http_reply_free(&r);
    return st;
}

static void assert_header(const struct http_reply *r, const char *name, const char *want)
{
    char v[512];
    const char *got = http_header(r, name, v, sizeof v);
    ck_assert_msg(got != NULL, "no %s header in:\n%s", name, r->head);
    ck_assert_msg(strcmp(got, want) == 0, "%s: '%s', not '%s'", name, got, want);
}

/* The headers every answer under /ui/ carries. */
static void assert_security_headers(const struct http_reply *r)
{
    assert_header(r, "Content-Security-Policy",
                  "default-src 'none'; script-src 'self'; style-src 'self'; "
                  "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                  "frame-ancestors 'none'; base-uri 'none'");
    assert_header(r, "X-Frame-Options", "DENY");
    assert_header(r, "X-Content-Type-Options", "nosniff");
    assert_header(r, "Referrer-Policy", "no-referrer");
    assert_header(r, "Cache-Control", "no-store");
}

/* ---- authentication ---------------------------------------------------- */

START_TEST(unauthenticated_gets_login_page_401)
{
    start_ui();
    struct http_reply r;
    req("GET", "/ui/", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 401);
    assert_header(&r, "WWW-Authenticate", "Bearer realm=\"delayq\"");
    ck_assert_msg(strstr(r.body, "id=\"login\"") && strstr(r.body, "id=\"token\""),
                  "no login form: %s", r.body);
    assert_security_headers(&r);
    http_reply_free(&r);
    ck_assert_int_eq(status_of("GET", "/ui/queues/" H_QUEUE, NULL, NULL), 401);
    ck_assert_int_eq(status_of("POST", "/ui/queues/" H_QUEUE "/pause", SAME FORM, ""), 401);
    /* The login page itself needs no login. */
    ck_assert_int_eq(status_of("GET", "/ui/login", NULL, NULL), 200);
}
END_TEST

START_TEST(bearer_and_basic_are_accepted_wrong_ones_refused)
{
    start_ui();
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", BASIC, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/queues/" H_QUEUE, BEARER, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer " TOKEN "x\r\n", NULL),
                     401);
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer \r\n", NULL), 401);
    /* base64("ops:wrong") and not base64 at all */
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Basic b3BzOndyb25n\r\n", NULL),
                     401);
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Basic !!!\r\n", NULL), 401);
    /* The token is not a password, nor the basic line a token. */
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer " BASIC_USER ":"
                               BASIC_PASS "\r\n", NULL), 401);
}
END_TEST

/* POST /ui/login with `form`; returns the status, the cookie "dq_session=..."
 * (up to the first ';') in cookie[]. */
static int login(const char *form, char *cookie, size_t len)
{
    struct http_reply r;
    req("POST", "/ui/login", SAME FORM, form, &r);
    int st = r.status;
    char v[512];
    cookie[0] = '\0';
    if (st == 303) {
        ck_assert_ptr_nonnull(http_header(&r, "Set-Cookie", v, sizeof v));
        ck_assert_msg(strlen(v) > 11 + 64 && strncmp(v, "dq_session=", 11) == 0, "%s", v);
        ck_assert_msg(strspn(v + 11, "0123456789abcdef") == 64, "not 64 hex: %s", v);
        ck_assert_str_eq(v + 11 + 64, "; Path=/ui/; HttpOnly; SameSite=Strict");
        snprintf(cookie, len, "%.*s", 11 + 64, v);
        assert_header(&r, "Location", "/ui/");
    }
    http_reply_free(&r);
    return st;
}

START_TEST(login_cookie_and_logout)
{
    start_ui();
    char cookie[128], hdr[200], other[128];
    ck_assert_int_eq(login("token=wrong-token-wrong-token", cookie, sizeof cookie), 401);
    ck_assert_int_eq(login("token=", cookie, sizeof cookie), 401);
    ck_assert_int_eq(login("token=" TOKEN, cookie, sizeof cookie), 303);
    ck_assert_int_eq(login("user=" BASIC_USER "&password=s3cret%3Awith%3Acolons", other,
                           sizeof other), 303);
    ck_assert_str_ne(cookie, other);
    snprintf(hdr, sizeof hdr, "Cookie: theme=dark; %s\r\n", cookie);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", "Cookie: dq_session=0123456789abcdef0123"
                               "456789abcdef0123456789abcdef0123456789abcdef\r\n", NULL), 401);

    char post[300];
    snprintf(post, sizeof post, "%s" SAME FORM, hdr);
    struct http_reply r;
    req("POST", "/ui/logout", post, "", &r);
    ck_assert_int_eq(r.status, 303);
    char v[256];
    ck_assert_ptr_nonnull(http_header(&r, "Set-Cookie", v, sizeof v));
    ck_assert_msg(strstr(v, "dq_session=;") && strstr(v, "Max-Age=0"), "%s", v);
    http_reply_free(&r);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 401);
    /* The other session lives on. */
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", other);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
}
END_TEST

START_TEST(basic_only_asks_for_basic)
{
    char keys[512];
    snprintf(keys, sizeof keys, "ui = true; basic_auth_file = \"%s\";", BASIC_FILE);
    start(keys);
    struct http_reply r;
    req("GET", "/ui/", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 401);
    assert_header(&r, "WWW-Authenticate", "Basic realm=\"delayq\"");
    http_reply_free(&r);
    ck_assert_int_eq(status_of("GET", "/ui/", BASIC, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 401);
    char cookie[128];
    ck_assert_int_eq(login("token=" TOKEN, cookie, sizeof cookie), 401);
    ck_assert_int_eq(login("user=" BASIC_USER "&password=nope", cookie, sizeof cookie), 401);
    ck_assert_int_eq(login("user=" BASIC_USER "&password=s3cret%3Awith%3Acolons", cookie,
                           sizeof cookie), 303);
}
END_TEST

/* ---- the POST gates ---------------------------------------------------- */

START_TEST(cross_site_posts_are_refused)
{
    start_ui();
    int st;
    const char *path = "/ui/queues/" H_QUEUE "/pause";
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Sec-Fetch-Site: cross-site\r\n",
                               ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Sec-Fetch-Site: same-site\r\n",
                               ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Sec-Fetch-Site: none\r\n", ""),
                     403);
    /* Sec-Fetch-Site wins over a matching Origin. */
    char hdr[300];
    snprintf(hdr, sizeof hdr, BEARER FORM "Sec-Fetch-Site: cross-site\r\n"
             "Origin: http://127.0.0.1:%d\r\n", PORT);
    ck_assert_int_eq(status_of("POST", path, hdr, ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Origin: http://evil.example\r\n",
                               ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Origin: null\r\n", ""), 403);
    /* What a browser sends with the pages' no-referrer policy. */
    st = status_of("POST", path, BEARER FORM SAME "Origin: null\r\n", "");
    ck_assert_msg(st != 403 && st != 401 && st != 400, "same-origin, Origin null: %d", st);
    snprintf(hdr, sizeof hdr, BEARER FORM SAME "Origin: http://evil.example:%d\r\n", PORT);
    ck_assert_int_eq(status_of("POST", path, hdr, ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM "Origin: http://127.0.0.1.evil"
                               "\r\n", ""), 403);
    ck_assert_int_eq(status_of("POST", path, BEARER FORM, ""), 403);
    /* A forged login form from another site is refused too. */
    ck_assert_int_eq(status_of("POST", "/ui/login", FORM "Sec-Fetch-Site: cross-site\r\n",
                               "token=" TOKEN), 403);

    /* Same origin passes the gate (whatever the page then answers). */
    st = status_of("POST", path, BEARER FORM SAME, "");
    ck_assert_msg(st != 403 && st != 401 && st != 400, "same-origin: %d", st);
    snprintf(hdr, sizeof hdr, BEARER FORM "Origin: http://127.0.0.1:%d\r\n", PORT);
    st = status_of("POST", path, hdr, "");
    ck_assert_msg(st != 403 && st != 401 && st != 400, "matching Origin: %d", st);
}
END_TEST

START_TEST(read_only_refuses_every_action)
{
    char keys[512];
    snprintf(keys, sizeof keys, "ui = true; token_file = \"%s\"; read_only = true;",
             TOKEN_FILE);
    start(keys);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/queues/" H_QUEUE, BEARER, NULL), 200);
    const char *posts[] = { "/ui/queues/" H_QUEUE "/pause", "/ui/queues/" H_QUEUE "/resume",
                            "/ui/queues/" H_QUEUE "/dead/purge-all",
                            "/ui/queues/" H_QUEUE "/jobs/42/requeue" };
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++) {
        struct http_reply r;
        req("POST", posts[i], BEARER FORM SAME, "", &r);
        ck_assert_msg(r.status == 403, "%s: %d", posts[i], r.status);
        ck_assert_msg(strstr(r.body, "read-only dashboard"), "%s: %s", posts[i], r.body);
        assert_security_headers(&r);
        http_reply_free(&r);
    }
    /* Logging in and out still work. */
    char cookie[128];
    ck_assert_int_eq(login("token=" TOKEN, cookie, sizeof cookie), 303);
    ck_assert_int_eq(status_of("POST", "/ui/logout", SAME FORM, ""), 303);
}
END_TEST

/* ---- headers, paths, methods ------------------------------------------- */

START_TEST(security_headers_on_every_answer)
{
    start_ui();
    struct {
        const char *method, *path, *headers;
        int status;
    } cases[] = {
        { "GET", "/ui/", BEARER, 200 },
        { "GET", "/ui/", NULL, 401 },
        { "GET", "/ui/login", NULL, 200 },
        { "GET", "/ui/no/such/page", BEARER, 404 },
        { "GET", "/ui/queues/nosuchqueue", BEARER, 404 },
        { "POST", "/ui/queues/" H_QUEUE "/pause", BEARER FORM, 403 },
        { "POST", "/ui/logout", SAME FORM, 303 },
        { "GET", "/ui/queues/a%00b", BEARER, 400 },
        { "DELETE", "/ui/", BEARER, 405 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct http_reply r;
        req(cases[i].method, cases[i].path, cases[i].headers,
            strcmp(cases[i].method, "POST") == 0 ? "" : NULL, &r);
        ck_assert_msg(r.status == cases[i].status, "%s %s: %d, not %d", cases[i].method,
                      cases[i].path, r.status, cases[i].status);
        assert_security_headers(&r);
        http_reply_free(&r);
    }
}
END_TEST

START_TEST(bad_paths_are_400_and_ui_redirects)
{
    start_ui();
    const char *bad[] = { "/ui/queues/a%00b", "/ui/queues/a%zzb", "/ui/queues/a%4",
                          "/ui/queues/a%", "/ui/queues//x" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = status_of("GET", bad[i], BEARER, NULL);
        ck_assert_msg(st == 400, "%s: %d", bad[i], st);
    }
    /* A decoded '/' stays inside its segment (job ids may hold one). */
    ck_assert_int_eq(status_of("GET", "/ui/queues/a%2Fb", BEARER, NULL), 404);
    /* A well-escaped name is decoded, then looked up. */
    ck_assert_int_eq(status_of("GET", "/ui/queues/%6Frders", BEARER, NULL), 200);
    struct http_reply r;
    req("GET", "/ui", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 301);
    assert_header(&r, "Location", "/ui/");
    http_reply_free(&r);
}
END_TEST

/* ---- limits ------------------------------------------------------------ */

START_TEST(body_over_16k_is_413)
{
    start_ui();
    size_t n = 16 * 1024 + 1;
    char *body = malloc(n + 1);
    ck_assert_ptr_nonnull(body);
    memset(body, 'a', n);
    body[n] = '\0';
    memcpy(body, "x=", 2);
    ck_assert_int_eq(status_of("POST", "/ui/queues/" H_QUEUE "/pause", BEARER FORM SAME,
                               body), 413);
    body[8 * 1024] = '\0';
    int st = status_of("POST", "/ui/queues/" H_QUEUE "/pause", BEARER FORM SAME, body);
    ck_assert_msg(st != 413 && st != 400, "8 KiB: %d", st);
    free(body);
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
}
END_TEST

static int healthz_ok(void *arg)
{
    (void)arg;
    struct http_reply r;
    int ok = http_request(PORT, "GET", "/healthz", NULL, NULL, 0, 2000, &r) == 0
             && r.status == 200;
    http_reply_free(&r);
    return ok;
}

/* 40 idle connections from one address within 200 ms: a burst may take
 * twice the per-address cap (16 by default), then the oldest go; once
 * they have waited half a second, a newcomer brings the address back
 * under the cap, and a request still gets in at once. */
START_TEST(connection_limit_holds)
{
    start_ui();
    enum { N = 40, PER = 16 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = http_connect(PORT);
        ck_assert_msg(fds[i] >= 0, "connect %d failed", i);
        tu_sleep_ms(5);
    }
    int closed = 0, last_closed = -1;
    for (int i = 0; i < N; i++)
        if (http_closed_within(fds[i], i < N - 2 * PER ? 2000 : 50)) {
            closed++;
            last_closed = i;
        }
    printf("connection limit: %d of %d idle connections displaced (last: #%d)\n", closed, N,
           last_closed + 1);
    ck_assert_int_eq(closed, N - 2 * PER);
    ck_assert_int_eq(last_closed, N - 2 * PER - 1);
    /* Half a second on: a request gets in, and the oldest idle ones go
     * until the address is back under its cap. */
    tu_sleep_ms(600);
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    int open = 0;
    for (int i = N - 2 * PER; i < N; i++)
        open += !http_closed_within(fds[i], 100);
    ck_assert_int_eq(open, PER - 1);
    ck_assert_int_eq(http_closed_within(fds[N - PER], 50), 1);
    ck_assert_int_eq(http_closed_within(fds[N - PER + 1], 50), 0);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    ck_assert_msg(h_wait(3000, healthz_ok, NULL), "/healthz not back after the connections "
                  "closed; log:\n%s", h_log_tail(&H));
}
END_TEST

START_TEST(slow_client_is_dropped_and_stalls_nothing)
{
    start_ui();
    int fd = http_connect(PORT);
    ck_assert_int_ge(fd, 0);
    const char *half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    ck_assert_int_eq(write(fd, half, strlen(half)), (ssize_t)strlen(half));
    int64_t t0 = tu_mono_ms();
    /* The others are answered meanwhile. */
    for (int i = 0; i < 5; i++) {
        struct http_reply r;
        req("GET", "/metrics", NULL, NULL, &r);
        ck_assert_int_eq(r.status, 200);
        http_reply_free(&r);
    }
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 200);
    ck_assert_msg(tu_mono_ms() - t0 < 5000, "answers took %lld ms while a client stalled",
                  (long long)(tu_mono_ms() - t0));
    ck_assert_int_eq(http_closed_within(fd, 1000), 0);
    ck_assert_msg(http_closed_within(fd, 14000), "the slow client still connected after "
                  "%lld ms", (long long)(tu_mono_ms() - t0));
    printf("slow client dropped after %lld ms\n", (long long)(tu_mono_ms() - t0));
    close(fd);
}
END_TEST

/* ---- /metrics and /healthz beside the dashboard ------------------------- */

START_TEST(metrics_and_healthz_unchanged)
{
    start_ui();
    /* Healthy once its figures are refreshed (a loaded machine may take a
     * moment after start). */
    ck_assert_msg(h_wait(10000, healthz_ok, NULL), "never healthy; log:\n%s",
                  h_log_tail(&H));
    struct http_reply r;
    req("GET", "/metrics", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    assert_header(&r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_msg(strstr(r.body, "delayq_"), "%s", r.body);
    ck_assert_ptr_null(http_header(&r, "Content-Security-Policy", (char[8]){ 0 }, 8));
    http_reply_free(&r);
    req("GET", "/healthz", NULL, NULL, &r);
    ck_assert_msg(r.status == 200, "/healthz %d: %s", r.status, r.body);
    ck_assert_str_eq(r.body, "ok\n");
    http_reply_free(&r);
    ck_assert_int_eq(status_of("POST", "/metrics", NULL, ""), 405);
    req("GET", "/nothing", NULL, NULL, &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.body, "not found: try /metrics or /healthz\n");
    http_reply_free(&r);
    /* /uix is not the dashboard's. */
    ck_assert_int_eq(status_of("GET", "/uix", BEARER, NULL), 404);
}
END_TEST

START_TEST(no_dashboard_unless_configured)
{
    start("");
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 404);
    ck_assert_int_eq(status_of("GET", "/healthz", NULL, NULL), 200);
    ck_assert_int_eq(h_log_count(&H, "dashboard:"), 0);
}
END_TEST

START_TEST(start_log_says_where)
{
    start_ui();
    char want[128];
    snprintf(want, sizeof want, "dashboard: http://127.0.0.1:%d/ui/", PORT);
    ck_assert_msg(h_log_count(&H, want) == 1, "no '%s' in:\n%s", want, h_log_tail(&H));
}
END_TEST

/* ---- configuration errors ------------------------------------------------ */

/* A configuration whose line 5 opens the admin group and whose lines 6..
 * are `lines` (one setting each). */
static void write_admin_conf(const char *group, const char *lines)
{
    char text[16384];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"orders\"; workers = 1; lease = \"3s\"; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; timeout = \"1s\"; } );\n"
             "%s = {\n  listen = \"127.0.0.1:%d\";\n%s};\n",
             H.fx.sock, H.handler_dir, group, PORT, lines);
    h_write_file(H.conf, text);
}

static void assert_cred_refused(const char *content, mode_t mode, const char *what)
{
    char path[300], lines[600];
    snprintf(path, sizeof path, "%s/bad.token", H.fx.dir);
    write_secret(path, content, mode);
    snprintf(lines, sizeof lines, "  ui = true;\n  token_file = \"%s\";\n", path);
    write_admin_conf("admin", lines);
    h_assert_refused(&H, 8, what);
}

START_TEST(config_errors_exit_78_with_file_and_line)
{
    write_admin_conf("admin", "  ui = true;\n");
    h_assert_refused(&H, 7, "admin.ui: needs token_file or basic_auth_file");
    write_admin_conf("admin", "  ui = true;\n  token_file = \"/nonexistent/ui.token\";\n");
    h_assert_refused(&H, 8, "cannot read '/nonexistent/ui.token'");
    char lines[900];
    snprintf(lines, sizeof lines, "  ui = true;\n  token_file = \"%s\";\n", H.fx.dir);
    write_admin_conf("admin", lines);
    h_assert_refused(&H, 8, "is not a regular file");
    assert_cred_refused(TOKEN "\n", 0644, "accessible by other users");
    assert_cred_refused(TOKEN "\n", 0602, "accessible by other users");
    assert_cred_refused("", 0600, "is empty");
    assert_cred_refused(" \n\n", 0600, "is empty");
    assert_cred_refused("short-token\n", 0600, "shorter than 16 bytes");
    snprintf(lines, sizeof lines, "  ui = true;\n  basic_auth_file = \"%s\";\n", TOKEN_FILE);
    write_admin_conf("admin", lines);
    h_assert_refused(&H, 8, "expected one line 'user:password'");
    /* basic_auth_file: a user name and a password of 12 bytes or more. */
    static const struct { const char *line, *why; } basic[] = {
        { ":\n", "the user name before ':' is empty" },
        { ":" BASIC_PASS "\n", "the user name before ':' is empty" },
        { "admin:\n", "shorter than 12 bytes" },
        { "admin:elevenbytes\n", "shorter than 12 bytes" },
    };
    for (size_t i = 0; i < sizeof basic / sizeof basic[0]; i++) {
        write_secret(BASIC_FILE, basic[i].line, 0600);
        snprintf(lines, sizeof lines, "  ui = true;\n  basic_auth_file = \"%s\";\n",
                 BASIC_FILE);
        write_admin_conf("admin", lines);
        h_assert_refused(&H, 8, basic[i].why);
    }
    write_secret(BASIC_FILE, "admin:twelve-bytes\n", 0600);
    write_admin_conf("admin", lines);
    const char *targs[] = { "-t", "-c", H.conf, NULL };
    char terr[4096];
    ck_assert_msg(h_run_delayqd(targs, terr, sizeof terr) == 0, "%s", terr);
    /* The listener's limits and names. */
    write_admin_conf("admin", "  max_connections = 16;\n  max_connections_per_address = 16;\n");
    h_assert_refused(&H, 8, "not below max_connections");
    write_admin_conf("admin", "  max_connections_per_address = 64;\n");
    h_assert_refused(&H, 7, "not below max_connections (64)");
    write_admin_conf("admin", "  max_connections = 5000;\n");
    h_assert_refused(&H, 7, "admin.max_connections");
    write_admin_conf("admin", "  request_timeout = \"10ms\";\n");
    h_assert_refused(&H, 7, "admin.request_timeout");
    write_admin_conf("admin", "  session_lifetime = \"1s\";\n");
    h_assert_refused(&H, 7, "admin.session_lifetime");
    write_admin_conf("admin", "  hosts = [ \"dq.example.com\",\n    \"evil.example:80\" ];\n");
    h_assert_refused(&H, 8, "admin.hosts: entry 2 is not a host name");
    write_admin_conf("admin", "  hosts = \"dq.example.com\";\n");
    h_assert_refused(&H, 7, "admin.hosts: expected a list");
    write_admin_conf("admin", "  read_only = 1;\n");
    h_assert_refused(&H, 7, "admin.read_only");
    write_admin_conf("metrics", "  ui = \"yes\";\n");
    h_assert_refused(&H, 7, "metrics.ui");
    /* Both names at once. */
    char text[16384];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"orders\"; workers = 1; lease = \"3s\"; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; timeout = \"1s\"; } );\n"
             "admin = { listen = \"127.0.0.1:%d\"; };\n"
             "metrics = { listen = \"127.0.0.1:%d\"; };\n",
             H.fx.sock, H.handler_dir, PORT, PORT);
    h_write_file(H.conf, text);
    h_assert_refused(&H, 6, "'admin'");
    /* The good ones pass. */
    snprintf(lines, sizeof lines, "  ui = true;\n  token_file = \"%s\";\n"
             "  basic_auth_file = \"%s\";\n  read_only = false;\n  request_timeout = \"5s\";\n"
             "  max_connections = 100;\n  max_connections_per_address = 10;\n"
             "  hosts = [ \"dq.example.com\", \"10.0.0.5\", \"[fd00::5]\" ];\n"
             "  session_lifetime = \"1d\";\n", TOKEN_FILE, BASIC_FILE);
    write_admin_conf("metrics", lines);
    const char *args[] = { "-t", "-c", H.conf, NULL };
    char err[4096];
    ck_assert_msg(h_run_delayqd(args, err, sizeof err) == 0, "%s", err);
}
END_TEST

/* A reload reads the files again: a new token works, the old one and its
 * sessions end. */
/* The admin process serving now (the dashboard's process), waiting up to
 * 5 s for one; after a reload or a kill, the one that replaced `old`. */
static pid_t admin_after(pid_t old)
{
    int64_t end = tu_mono_ms() + 5000;
    pid_t p = tu_admin_pid(H.pid);
    while ((!p || p == old || (old && tu_process_running(old))) && tu_mono_ms() < end) {
        tu_sleep_ms(10);
        p = tu_admin_pid(H.pid);
    }
    ck_assert_msg(p && p != old, "no new admin process; log:\n%s", h_log_tail(&H));
    return p;
}

START_TEST(reload_rereads_the_token_file)
{
    start_ui();
    char cookie[128], hdr[200];
    ck_assert_int_eq(login("token=" TOKEN, cookie, sizeof cookie), 303);
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    pid_t admin = admin_after(0);
    write_secret(TOKEN_FILE, "a-brand-new-token-of-enough-length\n", 0600);
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_msg(h_wait_log(&H, "reloaded", 1, 5000) == 1, "no reload:\n%s",
                  h_log_tail(&H));
    /* The previous configuration's admin process ends within a second. */
    admin_after(admin);
    ck_assert_int_eq(status_of("GET", "/ui/", BEARER, NULL), 401);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 401);
    ck_assert_int_eq(status_of("GET", "/ui/", "Authorization: Bearer "
                               "a-brand-new-token-of-enough-length\r\n", NULL), 200);
    /* Basic credentials did not change: still good. */
    ck_assert_int_eq(status_of("GET", "/ui/", BASIC, NULL), 200);
}
END_TEST

START_TEST(sessions_outlive_a_reload_and_an_admin_restart)
{
    start_ui();
    char cookie[128], hdr[200];
    ck_assert_int_eq(login("token=" TOKEN, cookie, sizeof cookie), 303);
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    pid_t admin = admin_after(0);
    /* A reload that keeps the credentials keeps the sessions. */
    ck_assert_int_eq(kill(H.pid, SIGHUP), 0);
    ck_assert_int_eq(h_wait_log(&H, "reloaded", 1, 5000), 1);
    admin = admin_after(admin);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    /* So does a crash of the admin process. */
    ck_assert_int_eq(kill(admin, SIGKILL), 0);
    admin_after(admin);
    ck_assert_int_eq(status_of("GET", "/ui/", hdr, NULL), 200);
    ck_assert_int_eq(status_of("GET", "/ui/", "Cookie: dq_session=0123456789abcdef0123"
                               "456789abcdef0123456789abcdef0123456789abcdef\r\n", NULL), 401);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_http");
    TCase *tc = fixture_tcase(s, "auth", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, unauthenticated_gets_login_page_401);
    tcase_add_test(tc, bearer_and_basic_are_accepted_wrong_ones_refused);
    tcase_add_test(tc, login_cookie_and_logout);
    tcase_add_test(tc, basic_only_asks_for_basic);
    tcase_add_test(tc, cross_site_posts_are_refused);
    tcase_add_test(tc, read_only_refuses_every_action);
    tcase_add_test(tc, reload_rereads_the_token_file);
    tcase_add_test(tc, sessions_outlive_a_reload_and_an_admin_restart);
    tc = fixture_tcase(s, "http", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, security_headers_on_every_answer);
    tcase_add_test(tc, bad_paths_are_400_and_ui_redirects);
    tcase_add_test(tc, metrics_and_healthz_unchanged);
    tcase_add_test(tc, no_dashboard_unless_configured);
    tcase_add_test(tc, start_log_says_where);
    tc = fixture_tcase(s, "limits", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, body_over_16k_is_413);
    tcase_add_test(tc, connection_limit_holds);
    tcase_add_test(tc, slow_client_is_dropped_and_stalls_nothing);
    tc = fixture_tcase(s, "config", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, config_errors_exit_78_with_file_and_line);
    return fixture_run_suite(s);
}
