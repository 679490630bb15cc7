/*
 * The dashboard's memory of the last hour (ui_history.c), fed as the
 * supervisor feeds it: running totals from metrics_queue_totals over real
 * shared-memory slots, with a worker exiting and its slot folded.  And the
 * built-in assets (the generated table of build-aux/embed-assets.sh)
 * against the files in src/daemon/admin/assets/.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon/admin/metrics.h"
#include "daemon/slots.h"
#include "daemon/admin/ui_assets.h"
#include "daemon/admin/ui_history.h"
#include "fixture.h"

#define N UI_HISTORY_SECONDS
#define T0 1000000              /* a monotonic ms to start from */

static struct ui_sample S[N];

/* Totals with `ok` successes, `retried`, `dead`, and `late` observations
 * in lateness bucket `bucket`. */
static struct ui_totals totals(uint64_t ok, uint64_t retried, uint64_t dead, int bucket,
                               uint64_t late)
{
    struct ui_totals t = { .succeeded = ok, .retried = retried, .dead = dead };
    t.lateness.counts[bucket] = late;
    return t;
}

/* ---- quantiles -------------------------------------------------------------- */

START_TEST(quantile_empty_is_minus_one)
{
    struct slot_hist h = { 0 };
    ck_assert_int_eq(ui_hist_quantile(&h, 0.5), -1);
    ck_assert_int_eq(ui_hist_quantile(&h, 0.99), -1);
}
END_TEST

START_TEST(quantile_interpolates_within_bucket)
{
    struct slot_hist h = { 0 };
    h.counts[0] = 1;                        /* [0, 1 ms) */
    ck_assert_int_eq(ui_hist_quantile(&h, 0.5), 500);
    memset(&h, 0, sizeof h);
    h.counts[1] = 4;                        /* [1 ms, 5 ms) */
    ck_assert_int_eq(ui_hist_quantile(&h, 0.5), 3000);
    ck_assert_int_eq(ui_hist_quantile(&h, 1.0), 5000);
    /* 99 fast jobs and one slow: p50 fast, p99 at the edge of the fast
     * bucket, p100 in the slow one. */
    memset(&h, 0, sizeof h);
    h.counts[0] = 99;
    h.counts[10] = 1;                       /* [2.5 s, 5 s) */
    ck_assert_int_lt(ui_hist_quantile(&h, 0.5), 1000);
    ck_assert_int_eq(ui_hist_quantile(&h, 0.99), 1000);
    ck_assert_int_eq(ui_hist_quantile(&h, 1.0), 5000000);
}
END_TEST

START_TEST(quantile_in_top_bucket_is_last_bound)
{
    static const int64_t bounds[SLOT_HIST_BOUNDS] = SLOT_HIST_BOUNDS_US;
    struct slot_hist h = { 0 };
    h.counts[SLOT_HIST_BOUNDS] = 10;        /* above 60 s */
    ck_assert_int_eq(ui_hist_quantile(&h, 0.5), bounds[SLOT_HIST_BOUNDS - 1]);
    ck_assert_int_eq(ui_hist_quantile(&h, 0.99), bounds[SLOT_HIST_BOUNDS - 1]);
}
END_TEST

/* ---- samples ---------------------------------------------------------------- */

START_TEST(first_reading_sets_base_then_deltas)
{
    struct ui_history *h = ui_history_new();
    ck_assert_ptr_nonnull(h);
    struct ui_totals t = totals(100, 10, 5, 0, 50);     /* from before */
    ui_history_sample(h, "q", T0, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 0);
    ck_assert_uint_eq(S[N - 1].done, 0);
    ck_assert_int_eq(S[N - 1].p50_us, -1);
    t = totals(105, 12, 6, 0, 58);
    ui_history_sample(h, "q", T0 + 1000, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 1);
    ck_assert_uint_eq(S[N - 1].done, 8);
    ck_assert_uint_eq(S[N - 1].failed, 3);
    ck_assert_int_eq(S[N - 1].p50_us, 500);
    ck_assert_uint_eq(S[N - 2].done, 0);
    ck_assert_int_eq(S[N - 2].p99_us, -1);
    /* Nothing happened: a zero second, no lateness. */
    ui_history_sample(h, "q", T0 + 2000, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 2);
    ck_assert_uint_eq(S[N - 1].done, 0);
    ck_assert_int_eq(S[N - 1].p50_us, -1);
    ck_assert_uint_eq(S[N - 2].done, 8);
    /* A shorter window ends at the same second. */
    struct ui_sample few[3];
    ck_assert_uint_eq(ui_history_series(h, "q", few, 3), 2);
    ck_assert_uint_eq(few[1].done, 8);
    ck_assert_uint_eq(few[2].done, 0);
    ui_history_free(h);
}
END_TEST

START_TEST(late_round_skips_seconds_and_early_call_merges)
{
    struct ui_history *h = ui_history_new();
    struct ui_totals t = totals(0, 0, 0, 0, 0);
    ui_history_sample(h, "q", T0, &t);
    t.succeeded = 4;
    ui_history_sample(h, "q", T0 + 1000, &t);
    /* The next round comes 5 s late: four empty seconds, then the delta. */
    t.succeeded = 10;
    ui_history_sample(h, "q", T0 + 6000, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 6);
    ck_assert_uint_eq(S[N - 1].done, 6);
    for (int i = 2; i <= 5; i++)
        ck_assert_uint_eq(S[N - i].done, 0);
    ck_assert_uint_eq(S[N - 6].done, 4);
    /* A call 200 ms later (timer jitter) is the same second: added to it. */
    t.succeeded = 11;
    ui_history_sample(h, "q", T0 + 6200, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 6);
    ck_assert_uint_eq(S[N - 1].done, 7);
    /* A round 1.3 s after the last one began is one second on. */
    t.succeeded = 12;
    ui_history_sample(h, "q", T0 + 7300, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 7);
    ck_assert_uint_eq(S[N - 1].done, 1);
    ck_assert_uint_eq(S[N - 2].done, 7);
    ui_history_free(h);
}
END_TEST

START_TEST(ring_wraps_past_an_hour)
{
    struct ui_history *h = ui_history_new();
    struct ui_totals t = totals(0, 0, 0, 0, 0);
    ui_history_sample(h, "q", T0, &t);
    /* Second k (1..N+100) ends k % 7 jobs. */
    int rounds = N + 100;
    for (int k = 1; k <= rounds; k++) {
        t.succeeded += (uint64_t)(k % 7);
        ui_history_sample(h, "q", T0 + (int64_t)k * 1000, &t);
    }
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), N);
    for (int i = 0; i < N; i++) {
        int k = rounds - (N - 1) + i;
        ck_assert_msg(S[i].done == (uint32_t)(k % 7), "second %d: %u, expected %d", i,
                      S[i].done, k % 7);
    }
    /* After more than an hour without a round (the dashboard was off),
     * the queue starts afresh: its growth meanwhile is not one second's. */
    int64_t later = T0 + (int64_t)(rounds + 2 * N) * 1000;
    t.succeeded += 1000;
    ui_history_sample(h, "q", later, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 0);
    for (int i = 0; i < N; i++)
        ck_assert_uint_eq(S[i].done, 0);
    t.succeeded += 2;
    ui_history_sample(h, "q", later + 1000, &t);
    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 1);
    ck_assert_uint_eq(S[N - 1].done, 2);
    ck_assert_uint_eq(S[N - 2].done, 0);
    ui_history_free(h);
}
END_TEST

START_TEST(queue_gone_for_a_while_shows_zeros_then_resumes)
{
    struct ui_history *h = ui_history_new();
    struct ui_totals a = totals(0, 0, 0, 0, 0), b = a;
    ui_history_sample(h, "a", T0, &a);
    ui_history_sample(h, "b", T0, &b);
    a.succeeded = 1;
    ui_history_sample(h, "a", T0 + 1000, &a);
    ui_history_sample(h, "b", T0 + 1000, &b);
    /* "a" leaves the configuration for 10 s (b goes on), then returns with
     * totals that grew meanwhile (kept by metrics): the growth lands in
     * its first second back. */
    for (int k = 2; k <= 11; k++)
        ui_history_sample(h, "b", T0 + k * 1000, &b);
    a.succeeded = 3;
    ui_history_sample(h, "a", T0 + 12000, &a);
    ck_assert_uint_eq(ui_history_series(h, "a", S, N), 12);
    ck_assert_uint_eq(S[N - 1].done, 2);
    for (int i = 2; i <= 11; i++)
        ck_assert_uint_eq(S[N - i].done, 0);
    ck_assert_uint_eq(S[N - 12].done, 1);
    /* While it is gone, its series ends at the others' second, in zeros. */
    for (int k = 13; k <= 15; k++)
        ui_history_sample(h, "b", T0 + k * 1000, &b);
    ui_history_series(h, "a", S, N);
    ck_assert_uint_eq(S[N - 1].done, 0);
    ck_assert_uint_eq(S[N - 4].done, 2);
    ui_history_free(h);
}
END_TEST

START_TEST(unknown_queue_is_empty)
{
    struct ui_history *h = ui_history_new();
    ck_assert_uint_eq(ui_history_series(h, "nope", S, N), 0);
    ck_assert_uint_eq(ui_history_series(h, NULL, S, N), 0);
    struct ui_totals t = totals(5, 0, 0, 0, 5);
    ui_history_sample(h, "q", T0, &t);
    t.succeeded = 9;
    ui_history_sample(h, "q", T0 + 1000, &t);
    ck_assert_uint_eq(ui_history_series(h, "nope", S, N), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(S[i].done, 0);
        ck_assert_uint_eq(S[i].failed, 0);
        ck_assert_int_eq(S[i].p50_us, -1);
        ck_assert_int_eq(S[i].p99_us, -1);
    }
    double rate = -1;
    int64_t p50 = 0, p99 = 0;
    ui_history_minute(h, "nope", &rate, &p50, &p99);
    ck_assert(rate == 0.0);
    ck_assert_int_eq(p50, -1);
    ck_assert_int_eq(p99, -1);
    ui_history_free(h);
}
END_TEST

/* ---- the minute and the sum ---------------------------------------------------- */

START_TEST(minute_figures)
{
    struct ui_history *h = ui_history_new();
    struct ui_totals t = totals(0, 0, 0, 0, 0);
    ui_history_sample(h, "q", T0, &t);
    double rate;
    int64_t p50, p99;
    ui_history_minute(h, "q", &rate, &p50, &p99);
    ck_assert(rate == 0.0);
    ck_assert_int_eq(p50, -1);
    /* 10 s in: 3 jobs a second, over the 10 s there are (not 60). */
    for (int k = 1; k <= 10; k++) {
        t.succeeded += 3;
        t.lateness.counts[1] += 3;          /* [1 ms, 5 ms) */
        ui_history_sample(h, "q", T0 + k * 1000, &t);
    }
    ui_history_minute(h, "q", &rate, &p50, &p99);
    ck_assert_msg(rate > 2.99 && rate < 3.01, "rate %f", rate);
    ck_assert_int_eq(p50, 3000);
    ck_assert_int_ge(p99, 4900);
    ck_assert_int_le(p99, 5000);
    /* Then 100 s of 2 jobs a second, all later than 60 s: the minute sees
     * only those. */
    for (int k = 11; k <= 110; k++) {
        t.succeeded += 1;
        t.dead += 1;
        t.lateness.counts[SLOT_HIST_BOUNDS] += 2;
        ui_history_sample(h, "q", T0 + k * 1000, &t);
    }
    ui_history_minute(h, "q", &rate, &p50, &p99);
    ck_assert_msg(rate > 1.99 && rate < 2.01, "rate %f", rate);
    ck_assert_int_eq(p50, 60000000);
    ck_assert_int_eq(p99, 60000000);
    ui_history_series(h, "q", S, N);
    ck_assert_uint_eq(S[N - 1].failed, 1);
    /* A minute of nothing: no rate, no lateness. */
    for (int k = 111; k <= 170; k++)
        ui_history_sample(h, "q", T0 + k * 1000, &t);
    ui_history_minute(h, "q", &rate, &p50, &p99);
    ck_assert(rate == 0.0);
    ck_assert_int_eq(p50, -1);
    ck_assert_int_eq(p99, -1);
    ui_history_free(h);
}
END_TEST

START_TEST(all_queues_add_up)
{
    struct ui_history *h = ui_history_new();
    struct ui_totals a = totals(0, 0, 0, 0, 0), b = a;
    ui_history_sample(h, "a", T0, &a);
    ui_history_sample(h, "b", T0, &b);
    for (int k = 1; k <= 5; k++) {
        a.succeeded += 3;
        a.lateness.counts[0] += 3;          /* < 1 ms */
        b.retried += 1;
        b.lateness.counts[13] += 1;         /* [30 s, 60 s) */
        ui_history_sample(h, "a", T0 + k * 1000, &a);
        ui_history_sample(h, "b", T0 + k * 1000 + 3, &b);
    }
    ck_assert_uint_eq(ui_history_series(h, NULL, S, N), 5);
    ck_assert_uint_eq(S[N - 1].done, 4);
    ck_assert_uint_eq(S[N - 1].failed, 1);
    /* Quantiles of the jobs of both queues, not of the queues' figures. */
    ck_assert_int_eq(S[N - 1].p50_us, 666);
    ck_assert_int_ge(S[N - 1].p99_us, 58799999);    /* 30 s + 0.96 * 30 s */
    ck_assert_int_le(S[N - 1].p99_us, 58800000);
    ck_assert_uint_eq(S[N - 6].done, 0);
    double rate;
    int64_t p50, p99;
    ui_history_minute(h, NULL, &rate, &p50, &p99);
    ck_assert_msg(rate > 3.99 && rate < 4.01, "rate %f", rate);
    ck_assert_int_eq(p50, 666);
    ui_history_minute(h, "a", &rate, &p50, &p99);
    ck_assert_msg(rate > 2.99 && rate < 3.01, "rate %f", rate);
    ck_assert_int_ge(p99, 989);                        /* 0.99 * 1 ms */
    ck_assert_int_le(p99, 990);
    ui_history_free(h);
}
END_TEST

/* ---- from the slots, through a worker's exit ---------------------------------- */

/* A worker of queue "q" ran `ok` jobs of type "email", each `late_us` late. */
static void worker_runs(struct worker_slot *slot, uint64_t ok, uint64_t failed,
                        int64_t late_us)
{
    struct slot_type *e = slot_type_entry(slot, "email");
    slot_add(&e->counters.succeeded, ok);
    slot_add(&e->counters.retried, failed);
    for (uint64_t i = 0; i < ok + failed; i++)
        slot_hist_observe(&e->lateness, late_us);
}

/* The running totals of "q" as the admin process reads them: a snapshot
 * of the shared totals with the live slots added. */
static void totals_of_q(const struct metrics *m, const struct worker_slot *slots,
                        struct ui_totals *t)
{
    struct metrics_snap *snap = metrics_snap_take(m, slots);
    ck_assert_ptr_nonnull(snap);
    metrics_queue_totals(snap, "q", t);
    metrics_snap_free(snap);
}

START_TEST(worker_exit_keeps_totals)
{
    struct metrics *m = metrics_new();
    struct worker_slot *slots = slots_create(3);
    struct ui_history *h = ui_history_new();
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(slots);
    metrics_post_child(m, 0, MR_WORKER, 100, 1, "q");
    metrics_post_child(m, 1, MR_WORKER, 101, 1, "other");
    metrics_post_child(m, 2, MR_REAPER, 102, 1, NULL);
    struct ui_totals t;
    totals_of_q(m, slots, &t);
    ui_history_sample(h, "q", T0, &t);

    worker_runs(&slots[0], 7, 2, 3000);
    worker_runs(&slots[1], 100, 0, 0);      /* another queue's */
    totals_of_q(m, slots, &t);
    ck_assert_uint_eq(t.succeeded, 7);
    ck_assert_uint_eq(t.retried, 2);
    ck_assert_uint_eq(t.lateness.counts[1], 9);
    ui_history_sample(h, "q", T0 + 1000, &t);

    /* The worker exits as children_collect sees it: its slot folded into
     * the totals, then zeroed for the next child; the supervisor fails
     * its running job (an orphan, retried). */
    metrics_begin(m);
    metrics_fold_slot(m, "q", &slots[0]);
    slot_reset(&slots[0]);
    metrics_post_child(m, 0, MR_WORKER, 0, 1, "q");
    metrics_end(m);
    metrics_count_orphan(m, "q", "email", 0);
    totals_of_q(m, slots, &t);
    ck_assert_uint_eq(t.succeeded, 7);
    ck_assert_uint_eq(t.retried, 3);
    ui_history_sample(h, "q", T0 + 2000, &t);

    /* Its replacement runs 4 more. */
    metrics_post_child(m, 0, MR_WORKER, 103, 1, "q");
    worker_runs(&slots[0], 4, 0, 100);
    totals_of_q(m, slots, &t);
    ck_assert_uint_eq(t.succeeded, 11);
    ui_history_sample(h, "q", T0 + 3000, &t);

    ck_assert_uint_eq(ui_history_series(h, "q", S, N), 3);
    ck_assert_uint_eq(S[N - 3].done, 9);
    ck_assert_uint_eq(S[N - 3].failed, 2);
    ck_assert_int_eq(S[N - 3].p50_us, 1000 + 4000 / 2);
    ck_assert_uint_eq(S[N - 2].done, 1);    /* the orphan, not a drop */
    ck_assert_uint_eq(S[N - 2].failed, 1);
    ck_assert_uint_eq(S[N - 1].done, 4);
    ck_assert_uint_eq(S[N - 1].failed, 0);
    ck_assert_int_lt(S[N - 1].p99_us, 1000);
    ui_history_free(h);
    slots_destroy(slots, 3);
    metrics_free(m);
}
END_TEST

/* ---- the assets ---------------------------------------------------------------- */

static const char *const ASSETS[] = { "app.js", "app.css" };

/* The bytes of src/daemon/admin/assets/NAME; the caller frees. */
static char *read_source(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", UI_SRCDIR, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char *buf = malloc(1 << 20);
    ck_assert_ptr_nonnull(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* The first 20 hex digits of the file's digest, as the generator made it. */
static void source_digest(const char *name, char *out, size_t n)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "if command -v sha1sum >/dev/null 2>&1; then sha1sum '%s/%s'; "
             "else md5sum '%s/%s'; fi", UI_SRCDIR, name, UI_SRCDIR, name);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[200] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof line, p));
    ck_assert_int_eq(pclose(p), 0);
    snprintf(out, n, "\"%.20s\"", line);
}

START_TEST(assets_found_with_types_and_contents)
{
    for (size_t i = 0; i < sizeof ASSETS / sizeof ASSETS[0]; i++) {
        const struct ui_asset *a = ui_asset_find(ASSETS[i]);
        ck_assert_msg(a != NULL, "%s not found", ASSETS[i]);
        ck_assert_str_eq(a->name, ASSETS[i]);
        const char *want = strstr(ASSETS[i], ".js") ? "text/javascript; charset=utf-8"
                                                    : "text/css; charset=utf-8";
        ck_assert_str_eq(a->type, want);
        size_t len;
        char *src = read_source(ASSETS[i], &len);
        ck_assert_uint_eq(a->len, len);
        ck_assert_uint_eq(strlen(a->data), a->len);
        ck_assert(memcmp(a->data, src, len) == 0);
        free(src);
    }
    ck_assert_ptr_null(ui_asset_find("nope.js"));
    ck_assert_ptr_null(ui_asset_find("../app.js"));
    ck_assert_ptr_null(ui_asset_find(""));
}
END_TEST

START_TEST(asset_etags_stable_and_distinct)
{
    const struct ui_asset *js = ui_asset_find("app.js"), *css = ui_asset_find("app.css");
    ck_assert_ptr_nonnull(js);
    ck_assert_ptr_nonnull(css);
    ck_assert_str_ne(js->etag, css->etag);
    char want[64];
    source_digest("app.js", want, sizeof want);
    ck_assert_str_eq(js->etag, want);
    source_digest("app.css", want, sizeof want);
    ck_assert_str_eq(css->etag, want);
    ck_assert_ptr_eq(ui_asset_find("app.js"), js);
}
END_TEST

/* app.js parses (node --check), where node is installed. */
START_TEST(app_js_syntax)
{
    if (system("node --version >/dev/null 2>&1") != 0) {
        printf("node is not installed: app.js syntax not checked\n");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "node --check '%s/app.js'", UI_SRCDIR);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node --check app.js failed");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ui_history");
    TCase *tc = fixture_tcase(s, "quantiles", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, quantile_empty_is_minus_one);
    tcase_add_test(tc, quantile_interpolates_within_bucket);
    tcase_add_test(tc, quantile_in_top_bucket_is_last_bound);
    tc = fixture_tcase(s, "samples", 30, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, first_reading_sets_base_then_deltas);
    tcase_add_test(tc, late_round_skips_seconds_and_early_call_merges);
    tcase_add_test(tc, ring_wraps_past_an_hour);
    tcase_add_test(tc, queue_gone_for_a_while_shows_zeros_then_resumes);
    tcase_add_test(tc, unknown_queue_is_empty);
    tcase_add_test(tc, minute_figures);
    tcase_add_test(tc, all_queues_add_up);
    tcase_add_test(tc, worker_exit_keeps_totals);
    tc = fixture_tcase(s, "assets", 30, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, assets_found_with_types_and_contents);
    tcase_add_test(tc, asset_etags_stable_and_distinct);
    tcase_add_test(tc, app_js_syntax);
    return fixture_run_suite(s);
}
