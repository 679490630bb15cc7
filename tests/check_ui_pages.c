/*
 * The dashboard's pages and actions (src/daemon/admin/ui_pages.c, ui_page_*.c,
 * ui_actions.c) over HTTP, against the real delayqd and its own
 * redis-server, authenticated with a bearer token: the overview's counts,
 * hostile values escaped on every page that shows them, each action's
 * effect in Redis and its redirect, the confirmation of requeue-all and
 * purge-all (and 409 when more jobs died since), paging, search by id,
 * the type filter, a partitioned queue, and read-only pages without forms.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon_harness.h"
#include "testutil.h"
#include "http_client.h"

#define TOKEN "0123456789abcdef0123456789abcdef"
#define EVIL_ID "<script>alert(1)</script>"
#define EVIL_DEAD_ID "<script>alert(1)</script>dead"
#define EVIL_TYPE "<script>alert(2)</script>"
#define EVIL_PAYLOAD "<script>alert(3)</script>"
#define EVIL_ERROR "<script>alert(4)</script>"
#define ESC_ID "&lt;script&gt;alert(1)&lt;/script&gt;"
#define ESC_TYPE "&lt;script&gt;alert(2)&lt;/script&gt;"
#define ESC_PAYLOAD "&lt;script&gt;alert(3)&lt;/script&gt;"
#define ESC_ERROR "&lt;script&gt;alert(4)&lt;/script&gt;"
#define EN_DASH "\xe2\x80\x93"

static struct harness H;
static int PORT;

/* An answer, as the tests read it. */
struct ui_resp {
    int code;
    const char *body;
    char location[1024];        /* "" when none */
    struct http_reply raw;
};

/* `method` `path` with the bearer token (and for a POST, the form body
 * and the dashboard's own origin); 0, or -1 when nothing came back. */
static int ui_client_request(int port, const char *method, const char *path,
                             const char *token, const char *form, struct ui_resp *r)
{
    char headers[512];
    int post = strcmp(method, "POST") == 0;
    snprintf(headers, sizeof headers, "Authorization: Bearer %s\r\n%s", token,
             post ? "Sec-Fetch-Site: same-origin\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\n" : "");
    memset(r, 0, sizeof *r);
    if (http_request(port, method, path, headers, post ? (form ? form : "") : NULL,
                     post ? strlen(form ? form : "") : 0, 10000, &r->raw) != 0 ||
        r->raw.status == 0) {
        http_reply_free(&r->raw);
        return -1;
    }
    r->code = r->raw.status;
    r->body = r->raw.body ? r->raw.body : "";
    if (!http_header(&r->raw, "Location", r->location, sizeof r->location))
        r->location[0] = '\0';
    return 0;
}

static void ui_resp_free(struct ui_resp *r)
{
    http_reply_free(&r->raw);
}

static void setup(void)
{
    h_setup(&H);
    PORT = 0;
}

static void teardown(void)
{
    h_teardown(&H);
}

/* ---- the daemon with its dashboard ---- */

/* Write the configuration (the dashboard on a free port, the token in a
 * file only we can read) with `partitions`, `read_only`. */
static void write_conf(int partitions, int read_only)
{
    char token[256], extra[512];
    struct h_conf hc;
    snprintf(token, sizeof token, "%s/ui.token", H.fx.dir);
    h_write_file(token, TOKEN "\n");
    ck_assert_int_eq(chmod(token, 0600), 0);
    PORT = tu_free_port();
    snprintf(extra, sizeof extra,
             "admin = { listen = \"127.0.0.1:%d\"; ui = true; token_file = \"%s\";%s };\n",
             PORT, token, read_only ? " read_only = true;" : "");
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.partitions = partitions;
    hc.extra = extra;
    h_write_conf(&H, &hc);
}

/* GET path with the bearer token; fails the test when there is no answer. */
static void get(const char *path, struct ui_resp *r)
{
    ck_assert_msg(ui_client_request(PORT, "GET", path, TOKEN, NULL, r) == 0,
                  "GET %s: no answer\n%s", path, h_log_tail(&H));
}

/* POST a form from the dashboard's own origin. */
static void post(const char *path, const char *form, struct ui_resp *r)
{
    ck_assert_msg(ui_client_request(PORT, "POST", path, TOKEN, form, r) == 0,
                  "POST %s: no answer\n%s", path, h_log_tail(&H));
}

/* Start the daemon and wait until its dashboard can ask Redis (a queue
 * page answers 200). */
static void start(void)
{
    struct ui_resp r;
    int code = 0;
    h_start(&H, 1);
    for (int i = 0; i < 500 && code != 200; i++) {
        if (ui_client_request(PORT, "GET", "/ui/queues/" H_QUEUE, TOKEN, NULL, &r) == 0) {
            code = r.code;
            ui_resp_free(&r);
        }
        if (code != 200)
            tu_sleep_ms(20);
    }
    ck_assert_msg(code == 200, "the queue page answers %d\n%s", code, h_log_tail(&H));
}

/* ---- jobs ---- */

static void enqueue(const char *id, const char *type, const char *payload, int64_t delay_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = type, .id = id, .payload = payload,
                           .payload_len = strlen(payload), .delay_ms = delay_ms };
    ck_assert_msg(dq_enqueue(H.c, &req, NULL) == DQ_OK, "enqueue %s: %s", id,
                  dq_errmsg(H.c));
}

/* Make `id` dead with `error` (before the daemon runs: it is claimed here). */
static void make_dead(const char *id, const char *type, const char *payload,
                      const char *error)
{
    dq_claim_result cr;
    enqueue(id, type, payload, 0);
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 1, 60000, &cr), DQ_OK);
    ck_assert_int_eq((int)cr.n, 1);
    ck_assert_str_eq(cr.jobs[0].id, id);
    ck_assert_int_eq(dq_fail(H.c, H_QUEUE, id, cr.jobs[0].fence, error, DQ_FAIL_DEAD, -1,
                             NULL, NULL), DQ_OK);
    dq_claim_result_free(&cr);
}

/* ---- reading pages ---- */

/* The text of the element whose opening tag contains `marker`, after
 * `from` (NULL: the whole body), into buf; NULL when absent. */
static const char *text_of(const char *body, const char *from, const char *marker, char *buf,
                           size_t len)
{
    const char *p = from ? strstr(body, from) : body;
    const char *end;
    if (!p || !(p = strstr(p, marker)) || !(p = strchr(p, '>')))
        return NULL;
    p++;
    end = strchr(p, '<');
    if (!end || (size_t)(end - p) >= len)
        return NULL;
    memcpy(buf, p, (size_t)(end - p));
    buf[end - p] = '\0';
    return buf;
}

static int count_of(const char *body, const char *needle)
{
    int n = 0;
    for (const char *p = body; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The overview's cell `cls` of the queue's row, once its counts are in
 * and equal `want` (polled: the counts are a cache refreshed by itself). */
static void overview_cell_is(const char *cls, const char *want)
{
    char marker[64], buf[64] = "";
    const char *got = NULL;
    snprintf(marker, sizeof marker, "class=\"num %s", cls);
    for (int i = 0; i < 300; i++) {
        struct ui_resp r;
        get("/ui/", &r);
        ck_assert_int_eq(r.code, 200);
        got = text_of(r.body, "<tr data-queue=\"" H_QUEUE "\"", marker, buf, sizeof buf);
        ui_resp_free(&r);
        if (got && strcmp(got, want) == 0)
            return;
        tu_sleep_ms(20);
    }
    ck_abort_msg("overview td.%s is \"%s\", not %s", cls, got ? got : "(none)", want);
}

START_TEST(overview_shows_the_counts)
{
    char buf[64];
    struct ui_resp r;
    write_conf(0, 0);
    make_dead("d1", "t", "ok", "boom");
    make_dead("d2", "t", "ok", "boom");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "l%d", i);
        enqueue(id, "t", "ok", 3600000);
    }
    start();
    overview_cell_is("delayed", "3");
    overview_cell_is("dead", "2");
    overview_cell_is("due", "0");
    overview_cell_is("processing", "0");
    get("/ui/", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<main id=\"content\" data-refresh=\"3\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "<table id=\"queues\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "<a class=\"queue\" href=\"/ui/queues/" H_QUEUE "\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "<td class=\"state state-running running\">running</td>"));
    ck_assert_ptr_nonnull(strstr(r.body, ">1/1</td>"));
    ck_assert_ptr_nonnull(strstr(r.body, "<section id=\"charts\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "data-series=\"lateness\" data-queue=\"\""));
    ck_assert_ptr_nonnull(strstr(r.body, "<form id=\"logout\""));
    ck_assert_ptr_null(strstr(r.body, "<script>"));
    ui_resp_free(&r);
    /* Paused with a job due: the state says so and the oldest due job has an age. */
    ck_assert_int_eq(dq_pause(H.c, H_QUEUE, NULL), DQ_OK);
    enqueue("due1", "t", "ok", 0);
    overview_cell_is("due", "1");
    tu_sleep_ms(1100);
    get("/ui/", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<td class=\"state state-paused paused\">paused</td>"));
    ck_assert_ptr_nonnull(text_of(r.body, "<tr data-queue=\"" H_QUEUE "\"",
                                  "class=\"num oldest-due",
                                  buf, sizeof buf));
    ck_assert_msg(strcmp(buf, "-") != 0 && strstr(buf, " s"), "oldest due: %s", buf);
    ui_resp_free(&r);
    /* The queue page counts the due job at its priority (5, normal). */
    get("/ui/queues/" H_QUEUE, &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<table id=\"priorities\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "<tr><td class=\"num\">5</td><td class=\"num\">1</td>"));
    ck_assert_int_eq(count_of(strstr(r.body, "<table id=\"priorities\">"), "<tr><td"), 1);
    ui_resp_free(&r);
}
END_TEST

/* `path`'s page holds none of the raw hostile strings and each of `esc`. */
static void escaped_on(const char *path, int code, const char *const *esc)
{
    struct ui_resp r;
    get(path, &r);
    ck_assert_msg(r.code == code, "%s: %d", path, r.code);
    ck_assert_msg(!strstr(r.body, "<script>alert("), "%s shows a raw <script>", path);
    ck_assert_msg(!strstr(r.body, "alert(1)</script>"), "%s shows a raw </script>", path);
    for (size_t i = 0; esc[i]; i++)
        ck_assert_msg(strstr(r.body, esc[i]), "%s: no %s", path, esc[i]);
    ui_resp_free(&r);
}

START_TEST(hostile_values_are_escaped_everywhere)
{
    const char *delayed_list[] = { ESC_ID, ESC_TYPE, NULL };
    const char *dead_list[] = { ESC_ID "dead", ESC_TYPE, ESC_ERROR, NULL };
    const char *job_delayed[] = { ESC_ID, ESC_TYPE, ESC_PAYLOAD, NULL };
    const char *job_dead[] = { ESC_ID "dead", ESC_TYPE, ESC_PAYLOAD, ESC_ERROR, NULL };
    const char *filtered[] = { ESC_TYPE, ESC_ID, NULL };
    const char *none[] = { NULL };
    struct ui_resp r;
    write_conf(0, 0);
    make_dead(EVIL_DEAD_ID, EVIL_TYPE, EVIL_PAYLOAD, EVIL_ERROR);
    enqueue(EVIL_ID, EVIL_TYPE, EVIL_PAYLOAD, 3600000);
    start();
    escaped_on("/ui/queues/" H_QUEUE "?tab=delayed", 200, delayed_list);
    escaped_on("/ui/queues/" H_QUEUE "?tab=dead", 200, dead_list);
    escaped_on("/ui/queues/" H_QUEUE "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E", 200,
               job_delayed);
    escaped_on("/ui/queues/" H_QUEUE "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3Edead", 200,
               job_dead);
    escaped_on("/ui/queues/" H_QUEUE "?tab=delayed&type=%3Cscript%3Ealert%282%29%3C%2Fscript%3E",
               200, filtered);
    escaped_on("/ui/queues/" H_QUEUE "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3Ex", 404,
               none);
    escaped_on("/ui/", 200, none);
    /* The link to the job's page carries its id percent-encoded. */
    get("/ui/queues/" H_QUEUE "?tab=delayed", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "href=\"/ui/queues/" H_QUEUE
                                         "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""));
    ui_resp_free(&r);
    /* Search answers with a Location of the encoded id, never the raw one. */
    get("/ui/queues/" H_QUEUE "/find?id=%3Cscript%3Ealert%281%29%3C%2Fscript%3E", &r);
    ck_assert_int_eq(r.code, 303);
    ck_assert_str_eq(r.location, "/ui/queues/" H_QUEUE
                                 "/jobs/%3Cscript%3Ealert%281%29%3C%2Fscript%3E");
    ui_resp_free(&r);
}
END_TEST

/* POST `path` and expect a 303 to `location`. */
static void action(const char *path, const char *form, const char *location)
{
    struct ui_resp r;
    post(path, form, &r);
    ck_assert_msg(r.code == 303, "POST %s: %d\n%s", path, r.code, r.body);
    ck_assert_str_eq(r.location, location);
    ui_resp_free(&r);
}

START_TEST(each_action_does_its_work_and_redirects)
{
    char buf[64];
    struct ui_resp r;
    int64_t since;
    write_conf(0, 0);
    make_dead("d1", "t", "ok", "boom");
    make_dead("d2", "t", "ok", "boom");
    enqueue("l1", "t", "ok", 3600000);
    enqueue("l2", "t", "ok", 3600000);
    start();
    action("/ui/queues/" H_QUEUE "/jobs/d1/requeue",
           "back=%2Fui%2Fqueues%2F" H_QUEUE "%3Ftab%3Ddead",
           "/ui/queues/" H_QUEUE "?tab=dead&done=requeued");
    ck_assert_msg(h_wait_record(&H, "d1", 1, 1, 10000) == 1, "d1 did not run after requeue");
    action("/ui/queues/" H_QUEUE "/jobs/d2/delete", "", "/ui/queues/" H_QUEUE "?done=deleted");
    ck_assert_int_eq(h_state(&H, "d2", NULL), -1);
    action("/ui/queues/" H_QUEUE "/jobs/l1/cancel", "back=%2Fui%2Fqueues%2F" H_QUEUE,
           "/ui/queues/" H_QUEUE "?done=cancelled");
    ck_assert_int_eq(h_state(&H, "l1", NULL), -1);
    action("/ui/queues/" H_QUEUE "/jobs/l2/run-now", "back=%2Fui%2Fqueues%2F" H_QUEUE
           "%2Fjobs%2Fl2", "/ui/queues/" H_QUEUE "/jobs/l2?done=ran-now");
    ck_assert_msg(h_wait_record(&H, "l2", 1, 1, 10000) == 1, "l2 did not run now");
    /* The job has run and is gone; its page still lists what this
     * dashboard did to it. */
    for (int i = 0; i < 300; i++) {
        get("/ui/queues/" H_QUEUE "/jobs/l2", &r);
        if (r.code == 404)
            break;
        ui_resp_free(&r);
        tu_sleep_ms(20);
    }
    ck_assert_int_eq(r.code, 404);
    ck_assert_msg(strstr(r.body, "ran-now from this dashboard"), "%s", r.body);
    ui_resp_free(&r);
    /* A job no longer in that state, and a `back` that leaves the dashboard. */
    action("/ui/queues/" H_QUEUE "/jobs/d2/requeue", "back=%2F%2Fevil.example%2Fui%2F",
           "/ui/queues/" H_QUEUE "?failed=notfound");
    action("/ui/queues/" H_QUEUE "/pause", "", "/ui/queues/" H_QUEUE "?done=paused");
    ck_assert_int_eq(dq_paused(H.c, H_QUEUE, &since), DQ_OK);
    ck_assert_int_ge(since, 0);
    /* The page reads the state from the cached counts: soon, not at once. */
    for (int i = 0; i < 300; i++) {
        get("/ui/queues/" H_QUEUE "?done=paused", &r);
        if (strstr(r.body, "<form id=\"resume\""))
            break;
        ui_resp_free(&r);
        tu_sleep_ms(20);
    }
    ck_assert_ptr_nonnull(strstr(r.body, "<p id=\"flash\""));
    ck_assert_ptr_nonnull(
        strstr(r.body, "<span id=\"queue-state\" class=\"state-paused paused\">paused"));
    ck_assert_ptr_nonnull(strstr(r.body, "<form id=\"resume\""));
    ck_assert_ptr_null(strstr(r.body, "<form id=\"pause\""));
    ui_resp_free(&r);
    action("/ui/queues/" H_QUEUE "/resume", "", "/ui/queues/" H_QUEUE "?done=resumed");
    ck_assert_int_eq(dq_paused(H.c, H_QUEUE, &since), DQ_OK);
    ck_assert_int_lt(since, 0);
    /* The job page of a job gone keeps this dashboard's actions on it. */
    get("/ui/queues/" H_QUEUE "/jobs/d1", &r);
    ck_assert_int_eq(r.code, 404);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-state\"", buf, sizeof buf), "notfound");
    ck_assert_ptr_nonnull(strstr(r.body, "requeued from this dashboard"));
    ui_resp_free(&r);
}
END_TEST

static int64_t dead_now(void)
{
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    return st.dead;
}

START_TEST(requeue_all_and_purge_all_ask_to_confirm_the_count)
{
    char buf[32];
    struct ui_resp r;
    write_conf(0, 0);
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%d", i);
        make_dead(id, "t", "ok", "boom");
    }
    start();
    post("/ui/queues/" H_QUEUE "/dead/requeue-all", "", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(text_of(r.body, "id=\"confirm-text\"", "id=\"confirm-count\"", buf,
                             sizeof buf), "3");
    ck_assert_ptr_nonnull(strstr(r.body, "name=\"expect\" value=\"3\""));
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"confirm-button\""));
    ui_resp_free(&r);
    ck_assert_int_eq(dead_now(), 3);
    /* One more dies before the confirmation. */
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = "d3", .payload = "fail",
                           .payload_len = 4, .max_attempts = 1 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_OK);
    ck_assert(h_wait_state(&H, "d3", DQ_STATE_DEAD, 10000));
    post("/ui/queues/" H_QUEUE "/dead/requeue-all", "expect=3", &r);
    ck_assert_int_eq(r.code, 409);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"confirm-count\"", buf, sizeof buf), "4");
    ui_resp_free(&r);
    ck_assert_int_eq(dead_now(), 4);
    action("/ui/queues/" H_QUEUE "/dead/requeue-all", "expect=4",
           "/ui/queues/" H_QUEUE "?done=requeued-all");
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "d%d", i);
        ck_assert_msg(h_wait_record(&H, id, 1, 1, 10000) == 1, "%s did not run", id);
    }
    ck_assert(h_wait_state(&H, "d3", DQ_STATE_DEAD, 10000));
    post("/ui/queues/" H_QUEUE "/dead/purge-all", "", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"confirm-count\"", buf, sizeof buf), "1");
    ui_resp_free(&r);
    action("/ui/queues/" H_QUEUE "/dead/purge-all", "expect=1",
           "/ui/queues/" H_QUEUE "?done=purged-all");
    ck_assert_int_eq(dead_now(), 0);
    ck_assert_int_eq(h_state(&H, "d3", NULL), -1);
}
END_TEST

static void due_in_order(int i, void *arg, const char **payload, int64_t *at_ms)
{
    *payload = "ok";
    *at_ms = *(int64_t *)arg + (int64_t)i * 1000;
}

START_TEST(paging_search_and_type_filter)
{
    char buf[64];
    struct ui_resp r;
    int64_t base = tu_now_ms() + 3600000;
    write_conf(0, 0);
    h_enqueue_numbered(&H, 250, "p", due_in_order, &base);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        enqueue(id, "special", "ok", 7200000);
    }
    start();
    get("/ui/queues/" H_QUEUE "?tab=delayed", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"page-info\"", buf, sizeof buf),
                     "1" EN_DASH "50 of 255");
    ck_assert_int_eq(count_of(r.body, "<tr data-job="), 50);
    ck_assert_ptr_nonnull(strstr(r.body, "<tr data-job=\"p0\""));
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"page-next\""));
    ck_assert_ptr_null(strstr(r.body, "id=\"page-prev\""));
    ck_assert_ptr_nonnull(strstr(r.body, "<a id=\"tab-delayed\" class=\"current\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "?tab=delayed&page=2", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"page-info\"", buf, sizeof buf),
                     "51" EN_DASH "100 of 255");
    ck_assert_ptr_nonnull(strstr(r.body, "<tr data-job=\"p50\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "?tab=delayed&page=6", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"page-info\"", buf, sizeof buf),
                     "251" EN_DASH "255 of 255");
    ck_assert_int_eq(count_of(r.body, "<tr data-job="), 5);
    ck_assert_ptr_null(strstr(r.body, "id=\"page-next\""));
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"page-prev\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "?tab=delayed&type=special", &r);
    ck_assert_int_eq(count_of(r.body, "<tr data-job="), 5);
    ck_assert_int_eq(count_of(r.body, "<tr data-job=\"s"), 5);
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/find?id=p7", &r);
    ck_assert_int_eq(r.code, 303);
    ck_assert_str_eq(r.location, "/ui/queues/" H_QUEUE "/jobs/p7");
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/jobs/p7", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-state\"", buf, sizeof buf), "delayed");
    ck_assert_ptr_nonnull(strstr(r.body, "<form id=\"run-now\""));
    ck_assert_ptr_nonnull(strstr(r.body, "<form id=\"cancel\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/find?id=nope", &r);
    ck_assert_int_eq(r.code, 404);
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"not-found\""));
    ui_resp_free(&r);
}
END_TEST

START_TEST(a_partitioned_queue_lists_every_partition)
{
    char buf[64];
    struct ui_resp r;
    write_conf(3, 0);
    start();
    for (int i = 0; i < 30; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        enqueue(id, "t", "ok", 3600000 + i * 1000);
    }
    get("/ui/queues/" H_QUEUE "?tab=delayed", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"page-info\"", buf, sizeof buf),
                     "1" EN_DASH "30 of 30");
    ck_assert_int_eq(count_of(r.body, "<tr data-job="), 30);
    /* Merged by due time: q0 first, q29 last. */
    ck_assert(strstr(r.body, "data-job=\"q0\"") < strstr(r.body, "data-job=\"q1\""));
    ck_assert(strstr(r.body, "data-job=\"q28\"") < strstr(r.body, "data-job=\"q29\""));
    ui_resp_free(&r);
    for (int i = 0; i < 30; i += 7) {
        char path[64];
        snprintf(path, sizeof path, "/ui/queues/" H_QUEUE "/jobs/q%d", i);
        get(path, &r);
        ck_assert_msg(r.code == 200, "%s: %d", path, r.code);
        ui_resp_free(&r);
    }
    action("/ui/queues/" H_QUEUE "/jobs/q3/cancel", "", "/ui/queues/" H_QUEUE "?done=cancelled");
    ck_assert_int_eq(h_state(&H, "q3", NULL), -1);
}
END_TEST

START_TEST(read_only_pages_show_no_action_forms)
{
    const char *paths[] = { "/ui/", "/ui/queues/" H_QUEUE "?tab=dead",
                            "/ui/queues/" H_QUEUE "?tab=delayed",
                            "/ui/queues/" H_QUEUE "/jobs/d1", "/ui/queues/" H_QUEUE "/jobs/l1" };
    write_conf(0, 1);
    make_dead("d1", "t", "ok", "boom");
    enqueue("l1", "t", "ok", 3600000);
    start();
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct ui_resp r;
        get(paths[i], &r);
        ck_assert_msg(r.code == 200, "%s: %d", paths[i], r.code);
        ck_assert_msg(!strstr(r.body, "method=\"post\" action=\"/ui/queues"),
                      "%s has an action form", paths[i]);
        ck_assert_msg(strstr(r.body, "<form id=\"logout\""), "%s: no logout", paths[i]);
        ui_resp_free(&r);
    }
}
END_TEST

START_TEST(payloads_as_text_hex_or_cut)
{
    static char big[70001];
    char buf[128];
    struct ui_resp r;
    dq_enqueue_req bin = { .queue = H_QUEUE, .type = "t", .id = "bin", .payload = "\x01\xff\x00z",
                           .payload_len = 4, .delay_ms = 3600000 };
    write_conf(0, 0);
    memset(big, 'a', sizeof big - 1);
    enqueue("big", "t", big, 3600000);
    ck_assert_int_eq(dq_enqueue(H.c, &bin, NULL), DQ_OK);
    start();
    get("/ui/queues/" H_QUEUE "/jobs/big", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"payload-cut\"", buf, sizeof buf),
                     "showing 65536 of 70000 bytes");
    ck_assert_ptr_nonnull(strstr(r.body, "<pre id=\"job-payload\">aaaa"));
    ck_assert_ptr_nonnull(strstr(r.body, "aaaa</pre>"));
    ck_assert_ptr_null(strstr(r.body, big + sizeof big - 1 - 65537));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/jobs/bin", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(text_of(r.body, NULL, "<pre id=\"job-payload\" class=\"hex\"", buf,
                             sizeof buf), "01 ff 00 7a");
    ck_assert_ptr_null(strstr(r.body, "id=\"payload-cut\""));
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-attempts\"", buf, sizeof buf), "0 of 5");
    ui_resp_free(&r);
}
END_TEST

/* A job's expiry and dedupe window are shown; a job done within its window
 * shows when, and until when its id is kept, and nothing to act on. */
START_TEST(expiries_windows_and_done_jobs)
{
    char buf[128];
    struct ui_resp r;
    dq_enqueue_req x = { .queue = H_QUEUE, .type = "t", .id = "x", .delay_ms = 3600000,
                         .ttl_ms = 60000, .unique_for_ms = 3600000 };
    dq_enqueue_req u = { .queue = H_QUEUE, .type = "t", .id = "u", .unique_for_ms = 3600000 };
    write_conf(0, 0);
    ck_assert_int_eq(dq_enqueue(H.c, &x, NULL), DQ_OK);
    ck_assert_int_eq(dq_enqueue(H.c, &u, NULL), DQ_OK);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "u"), DQ_OK);
    start();
    get("/ui/queues/" H_QUEUE "/jobs/x", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"job-expires\""));
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-on-expire\"", buf, sizeof buf), "to dead");
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"job-unique\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/jobs/u", &r);
    ck_assert_int_eq(r.code, 200);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-state\"", buf, sizeof buf), "done");
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"job-unique-until\""));
    ck_assert_ptr_null(strstr(r.body, "class=\"action\""));
    ck_assert_ptr_null(strstr(r.body, "id=\"job-payload\""));
    ui_resp_free(&r);
}
END_TEST

START_TEST(schedules_and_processing_tabs)
{
    char buf[128];
    struct ui_resp r;
    dq_schedule_req sr = { .queue = H_QUEUE, .name = "nightly", .type = EVIL_TYPE,
                           .expr = "@daily", .payload = "ok", .payload_len = 2 };
    const char *esc[] = { ESC_TYPE, "nightly", "@daily", NULL };
    write_conf(0, 0);
    ck_assert_int_eq(dq_schedule_add(H.c, &sr, NULL), DQ_OK);
    start();
    escaped_on("/ui/queues/" H_QUEUE "?tab=schedules", 200, esc);
    get("/ui/queues/" H_QUEUE "?tab=schedules", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<table id=\"schedules\">"));
    ck_assert_ptr_nonnull(strstr(r.body, "<a id=\"tab-schedules\" class=\"current\""));
    ck_assert_ptr_null(strstr(r.body, "paused since"));
    ui_resp_free(&r);
    /* A paused schedule says so where its next tick would be. */
    ck_assert_int_eq(dq_schedule_pause(H.c, H_QUEUE, "nightly", NULL), DQ_OK);
    get("/ui/queues/" H_QUEUE "?tab=schedules", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<td class=\"at paused\">paused since "));
    ui_resp_free(&r);
    /* A job running now: the processing tab names this host's worker. */
    enqueue("slow", "t", "watch:3000", 0);
    ck_assert(h_wait_state(&H, "slow", DQ_STATE_PROCESSING, 10000));
    get("/ui/queues/" H_QUEUE "?tab=processing", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "<tr data-job=\"slow\""));
    ck_assert_ptr_nonnull(strstr(r.body, "<td class=\"num worker\">pid "));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/jobs/slow", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-state\"", buf, sizeof buf), "processing");
    ck_assert_ptr_nonnull(strstr(r.body, "<dd id=\"job-worker\">pid "));
    /* Its one action is Cancel, which ends it at once: the page then
     * shows it cancelled, with the fence of the run stopped. */
    ck_assert_ptr_nonnull(strstr(r.body, "<form id=\"cancel\""));
    ck_assert_ptr_null(strstr(r.body, "<form id=\"run-now\""));
    ui_resp_free(&r);
    action("/ui/queues/" H_QUEUE "/jobs/slow/cancel",
           "back=%2Fui%2Fqueues%2F" H_QUEUE "%2Fjobs%2Fslow",
           "/ui/queues/" H_QUEUE "/jobs/slow?done=cancelled");
    get("/ui/queues/" H_QUEUE "/jobs/slow", &r);
    ck_assert_str_eq(text_of(r.body, NULL, "id=\"job-state\"", buf, sizeof buf), "cancelled");
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"job-fence\""));
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"job-unique-until\""));
    ck_assert_ptr_null(strstr(r.body, "class=\"action\""));
    ui_resp_free(&r);
    ck_assert_msg(h_wait_record(&H, "slow", 1, 1, 1000) == 1,
                  "the running job's handler did not return within 1 s of the cancel");
}
END_TEST

START_TEST(redis_down_is_a_clear_503)
{
    struct ui_resp r;
    write_conf(0, 0);
    start();
    tu_stop_process(H.fx.pid, 5000);
    H.fx.pid = 0;
    get("/ui/queues/" H_QUEUE, &r);
    ck_assert_int_eq(r.code, 503);
    ck_assert_ptr_nonnull(strstr(r.body, "id=\"unavailable\""));
    ui_resp_free(&r);
    get("/ui/queues/" H_QUEUE "/jobs/x", &r);
    ck_assert_int_eq(r.code, 503);
    ui_resp_free(&r);
    post("/ui/queues/" H_QUEUE "/pause", "", &r);
    ck_assert_msg(r.code == 503 || (r.code == 303 && strstr(r.location, "failed=error")),
                  "pause with Redis down: %d %s", r.code, r.location);
    ui_resp_free(&r);
    get("/ui/", &r);
    ck_assert_int_eq(r.code, 200);
    ui_resp_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_pages");
    TCase *tc = tcase_create("pages");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, overview_shows_the_counts);
    tcase_add_test(tc, hostile_values_are_escaped_everywhere);
    tcase_add_test(tc, each_action_does_its_work_and_redirects);
    tcase_add_test(tc, requeue_all_and_purge_all_ask_to_confirm_the_count);
    tcase_add_test(tc, paging_search_and_type_filter);
    tcase_add_test(tc, a_partitioned_queue_lists_every_partition);
    tcase_add_test(tc, read_only_pages_show_no_action_forms);
    tcase_add_test(tc, payloads_as_text_hex_or_cut);
    tcase_add_test(tc, expiries_windows_and_done_jobs);
    tcase_add_test(tc, schedules_and_processing_tabs);
    tcase_add_test(tc, redis_down_is_a_clear_503);
    suite_add_tcase(s, tc);
    return fixture_run_suite(s);
}
