/*
 * Priorities end to end: the real delayqd, with the test handler, draining
 * a backlog of 10,000 due low jobs when 100 high ones come due.  Each high
 * job must start before the 200th low job that starts after it came due.
 * The library's view of priorities is in check_priority.c; the lateness
 * per level in /metrics is checked in check_metrics.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"

#define BACKLOG 10000
#define HIGH 100

static struct harness H;

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Enqueue `n` jobs due now at `level`, ids PREFIX0.., 1,000 to a call. */
static void enqueue_level(const char *prefix, int n, int level, const char *payload)
{
    dq_enqueue_req *reqs = calloc((size_t)n, sizeof *reqs);
    char (*ids)[32] = calloc((size_t)n, sizeof *ids);
    ck_assert(reqs && ids);
    for (int i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%s%d", prefix, i);
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[i],
                                    .payload = payload, .payload_len = strlen(payload),
                                    .priority = DQ_PRIORITY(level) };
    }
    for (int i = 0; i < n; i += 1000) {
        size_t k = (size_t)(n - i < 1000 ? n - i : 1000);
        ck_assert_msg(dq_enqueue_many(H.c, reqs + i, k, NULL, NULL) == DQ_OK, "%s",
                      dq_errmsg(H.c));
    }
    free(reqs);
    free(ids);
}

static int started_lines(void)
{
    return h_starts(&H);
}

START_TEST(high_jobs_overtake_a_low_backlog)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.batch = 64;
    h_write_conf(&H, &hc);
    /* sleep:1 keeps the backlog draining for seconds, not one. */
    enqueue_level("low", BACKLOG, 9, "sleep:1");
    h_start(&H, hc.workers);
    for (int i = 0; i < 1000 && started_lines() < 300; i++)
        usleep(10000);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    int64_t came_due = st.now_ms;
    enqueue_level("high", HIGH, 0, "ok");
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_msg(st.due_by_priority[9] > 1000, "the backlog drained too soon: %lld left",
                  (long long)st.due_by_priority[9]);
    for (int i = 0; i < HIGH; i++) {
        char id[32];
        snprintf(id, sizeof id, "high%d", i);
        ck_assert_msg(h_wait_record(&H, id, 1, 1, 20000) == 1, "%s never ran; log:\n%s",
                      id, h_log_tail(&H));
    }
    /* In the order the runs started: low starts since the high jobs came due. */
    struct h_run *r;
    size_t n = h_records(&H, &r);
    int low_after = 0, high = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].end != 0)
            continue;
        if (strncmp(r[i].id, "high", 4) == 0) {
            ck_assert_msg(low_after < 200, "%s started after %d low jobs", r[i].id,
                          low_after);
            high++;
        } else if (r[i].ms >= came_due) {
            low_after++;
        }
    }
    free(r);
    ck_assert_int_eq(high, HIGH);

    int status = h_stop(&H, 30000);
    ck_assert_msg(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "delayqd did not stop cleanly; log:\n%s", h_log_tail(&H));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("priority_daemon");
    TCase *tc = tcase_create("backlog");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, high_jobs_overtake_a_low_backlog);
    suite_add_tcase(s, tc);
    return fixture_run_suite(s);
}
