/*
 * Dedupe windows: for a while after a job finished, its id stays taken.
 * First through libdelayq against a real redis-server (each way a job can
 * finish starts the window, and only for that job; the reaper deletes
 * what is left when it ends), then end to end with the real delayqd and
 * the command line: add, run, add again within the window (refused, exit
 * 1) and after it (accepted, and run).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "daemon_harness.h"
#include "testutil.h"

static struct harness H;

static void setup(void)
{
    h_setup(&H);
    cli_run_socket(H.fx.sock);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* Enqueue `id` due now with a window of `window_ms`; the status. */
static dq_status add_window(const char *id, int64_t window_ms, bool ok, dq_enqueued *out)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id,
                           .unique_for_ms = window_ms, .unique_ok = ok };
    dq_enqueued tmp;
    return dq_enqueue(H.c, &req, out ? out : &tmp);
}

/* Claim the one job due and ack it. */
static void run_one(const char *id)
{
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    ck_assert_str_eq(res.jobs[0].id, id);
    ck_assert_int_eq(dq_ack(H.c, H_QUEUE, id, res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
}

static long long redis_int(const char *fmt, const char *id)
{
    return fixture_redis_int(&H.fx, fmt, id);
}

/* ---- libdelayq and the scripts -------------------------------------------- */

/* Acked: an add within the window is refused, saying when the job finished
 * and when the window ends, or with unique_ok answered without adding;
 * show says done; after the window the id is free. */
START_TEST(an_acked_job_keeps_its_id_for_its_window)
{
    ck_assert_int_eq(add_window("w", 1500, false, NULL), DQ_OK);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "w", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.unique_ms, 1500);
    dq_job_info_free(&info);
    int64_t before = tu_now_ms();
    run_one("w");
    dq_enqueued out;
    ck_assert_int_eq(add_window("w", 1500, false, &out), DQ_ERR_UNIQUE);
    ck_assert(out.finished);
    ck_assert_int_ge(out.finished_ms, before - 50);
    ck_assert_int_eq(out.unique_until_ms, out.finished_ms + 1500);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "dedupe window"));
    h_enqueue(&H, NULL, "t", "", 0, 0);         /* other jobs go on */
    dq_enqueue_req plain = { .queue = H_QUEUE, .type = "t", .id = "w", .replace = true };
    ck_assert_int_eq(dq_enqueue(H.c, &plain, &out), DQ_ERR_UNIQUE);
    ck_assert_int_eq(add_window("w", 1500, true, &out), DQ_OK);
    ck_assert(out.finished);
    ck_assert_str_eq(out.id, "w");
    ck_assert_int_eq(h_state(&H, "w", &info), DQ_STATE_DONE);
    ck_assert_int_eq(info.unique_until_ms, out.unique_until_ms);
    dq_job_info_free(&info);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(H.c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.due, 1);                /* the one without an id */

    /* From the window's end the id is free. */
    tu_sleep_ms(out.unique_until_ms - tu_now_ms() + 100);
    ck_assert_int_eq(dq_enqueue(H.c, &plain, &out), DQ_OK);
    ck_assert(!out.finished);
    ck_assert_int_eq(h_state(&H, "w", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.unique_ms, 0);
    dq_job_info_free(&info);
    /* Without a window of its own, this one leaves nothing behind. */
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(dq_ack_many(H.c, H_QUEUE, res.jobs, res.n, NULL), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(h_state(&H, "w", NULL), -1);
    ck_assert_int_eq(add_window("w", 1500, false, NULL), DQ_OK);
}
END_TEST

/* A cancel and a drop at the expiry start the window; a dead job's runs
 * from its death once it is purged. */
START_TEST(each_way_of_finishing_starts_the_window)
{
    ck_assert_int_eq(add_window("c", 60000, false, NULL), DQ_OK);
    ck_assert_int_eq(dq_cancel(H.c, H_QUEUE, "c"), DQ_OK);
    ck_assert_int_eq(add_window("c", 60000, false, NULL), DQ_ERR_UNIQUE);

    dq_enqueue_req x = { .queue = H_QUEUE, .type = "t", .id = "x", .ttl_ms = 50,
                         .on_expire = DQ_EXPIRE_DROP, .unique_for_ms = 60000 };
    ck_assert_int_eq(dq_enqueue(H.c, &x, NULL), DQ_OK);
    tu_sleep_ms(150);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 0);
    dq_claim_result_free(&res);
    ck_assert_int_eq(h_state(&H, "x", NULL), DQ_STATE_DONE);

    ck_assert_int_eq(add_window("d", 1000, false, NULL), DQ_OK);
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 1);
    dq_fail_result fr;
    ck_assert_int_eq(dq_fail(H.c, H_QUEUE, "d", res.jobs[0].fence, "no", DQ_FAIL_DEAD, 0, NULL,
                             &fr), DQ_OK);
    dq_claim_result_free(&res);
    ck_assert_int_eq(add_window("d", 1000, false, NULL), DQ_ERR_EXISTS);  /* dead */
    ck_assert_int_eq(dq_purge(H.c, H_QUEUE, "d"), DQ_OK);
    dq_enqueued out;
    ck_assert_int_eq(add_window("d", 1000, false, &out), DQ_ERR_UNIQUE);
    ck_assert_int_eq(out.finished_ms, fr.at_ms);  /* from its death */
    tu_sleep_ms(out.unique_until_ms - tu_now_ms() + 100);
    ck_assert_int_eq(add_window("d", 1000, false, NULL), DQ_OK);
}
END_TEST

/* The reaper deletes the tombstones whose window ended; fsck counts a
 * tombstone in no set as no orphan. */
START_TEST(the_reaper_deletes_ended_windows)
{
    ck_assert_int_eq(add_window("r1", 200, false, NULL), DQ_OK);
    ck_assert_int_eq(add_window("r2", 60000, false, NULL), DQ_OK);
    dq_claim_result res;
    ck_assert_int_eq(dq_claim(H.c, H_QUEUE, 10, 30000, &res), DQ_OK);
    ck_assert_int_eq(res.n, 2);
    ck_assert_int_eq(dq_ack_many(H.c, H_QUEUE, res.jobs, res.n, NULL), DQ_OK);
    dq_claim_result_free(&res);
    dq_fsck_result fr;
    ck_assert_int_eq(dq_fsck(H.c, H_QUEUE, true, 1000, &fr), DQ_OK);
    ck_assert_int_eq(fr.records, 0);
    dq_fsck_result_free(&fr);
    tu_sleep_ms(300);
    dq_reap_result rr;
    ck_assert_int_eq(dq_reap(H.c, H_QUEUE, 100, NULL, &rr), DQ_OK);
    ck_assert_int_eq(redis_int("HEXISTS dq:{" H_QUEUE "}:jobs %s", "r1"), 0);
    ck_assert_int_eq(redis_int("HEXISTS dq:{" H_QUEUE "}:jobs %s", "r2"), 1);
    ck_assert_int_eq(redis_int("ZCARD dq:{" H_QUEUE "}:unique_until%s", ""), 1);
    ck_assert_int_eq(redis_int("EXISTS dq:{" H_QUEUE "}:unique%s", ""), 0);
}
END_TEST

/* dq_enqueue_many: windows sent and honoured per job. */
START_TEST(enqueue_many_carries_windows)
{
    ck_assert_int_eq(add_window("m1", 60000, false, NULL), DQ_OK);
    run_one("m1");
    dq_enqueue_req reqs[3] = {
        { .queue = H_QUEUE, .type = "t", .id = "m1", .unique_for_ms = 60000 },
        { .queue = H_QUEUE, .type = "t", .id = "m1", .unique_for_ms = 60000,
          .unique_ok = true, .delay_ms = 5 },
        { .queue = H_QUEUE, .type = "t", .id = "m2", .unique_for_ms = 60000 },
    };
    dq_enqueued out[3];
    dq_status st[3];
    ck_assert_int_eq(dq_enqueue_many(H.c, reqs, 3, out, st), DQ_ERR_UNIQUE);
    ck_assert_int_eq(st[0], DQ_ERR_UNIQUE);
    ck_assert_int_eq(st[1], DQ_OK);
    ck_assert(out[1].finished);
    ck_assert_int_eq(st[2], DQ_OK);
    ck_assert(!out[2].finished);
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "m2", &info), DQ_STATE_DELAYED);
    ck_assert_int_eq(info.unique_ms, 60000);
    dq_job_info_free(&info);
}
END_TEST

/* A window needs an id of the producer's; bad ones are refused before
 * anything is written. */
START_TEST(bad_windows_are_refused)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .unique_for_ms = 1000 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(H.c), "needs the job's id"));
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .unique_for_ms = -5 };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    req = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = "b", .unique_ok = true };
    ck_assert_int_eq(dq_enqueue(H.c, &req, NULL), DQ_ERR_INVALID);
    ck_assert_int_eq(h_state(&H, "b", NULL), -1);
}
END_TEST

/* ---- the daemon and the command line ---------------------------------------- */

/* Add, run, add again within the window (exit 1, saying when it was done
 * and for how long the id is kept) and after it (accepted, and run). */
START_TEST(add_run_add_again_within_and_after_the_window)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    h_start(&H, 2);
    assert_ok(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "order:7", "--unique-for", "5s",
                  "ok"));
    ck_assert_int_eq(h_wait_record(&H, "order:7", 1, 1, 10000), 1);
    ck_assert(h_wait_state(&H, "order:7", DQ_STATE_DONE, 5000));
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "order:7", "ok"), 1,
                 "job order:7 in queue " H_QUEUE ": done ");
    struct run_result *r = CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "order:7",
                               "--unique-for", "5s", "--unique-ok", "ok");
    assert_ok(r);
    ck_assert_str_eq(r->out, "order:7\n");
    r = CLI("show", "-q", H_QUEUE, "order:7");
    assert_ok(r);
    ck_assert_ptr_nonnull(strstr(r->out, "state: done"));
    ck_assert_ptr_nonnull(strstr(r->out, "id taken until: "));
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "order:7", &info), DQ_STATE_DONE);
    dq_job_info_free(&info);
    tu_sleep_ms(info.unique_until_ms - tu_now_ms() + 100);
    assert_ok(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "order:7", "ok"));
    ck_assert_int_eq(h_wait_record(&H, "order:7", 1, 2, 10000), 2);
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--unique-for", "1s"), 2,
                 "--unique-for needs --id");
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "o", "--unique-ok"), 2,
                 "--unique-ok needs --unique-for");
    assert_fails(CLI("add", "-q", H_QUEUE, "-t", "t", "--id", "o", "--unique-for", "0"), 2,
                 "bad --unique-for '0'");
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("unique");
    TCase *tc = fixture_tcase(s, "scripts", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, an_acked_job_keeps_its_id_for_its_window);
    tcase_add_test(tc, each_way_of_finishing_starts_the_window);
    tcase_add_test(tc, the_reaper_deletes_ended_windows);
    tcase_add_test(tc, enqueue_many_carries_windows);
    tcase_add_test(tc, bad_windows_are_refused);
    TCase *td = fixture_tcase(s, "daemon", 60, NULL, NULL, setup, teardown);
    tcase_add_test(td, add_run_add_again_within_and_after_the_window);
    return fixture_run_suite(s);
}
