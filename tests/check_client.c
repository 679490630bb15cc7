/*
 * libdelayq against a real redis-server, the
 * connection (src/lib/client.c): connecting, authenticating, timeouts, and
 * the scripts loaded again after SCRIPT FLUSH or a restart.
 *
 * Fixtures, helpers and main() are in client_test.c.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"

/* ---- scripts vanish, Redis restarts ------------------------------------- */

static void script_flush(void)
{
    ck_assert_int_eq(fixture_redis_int(fx, "SCRIPT FLUSH"), 0);
}

START_TEST(scripts_reload_after_script_flush)
{
    script_flush();
    enq("a", "x", 0, 0);
    script_flush();
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    script_flush();
    ck_assert_int_eq(dq_ack(cl, Q, "a", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);
    script_flush();
    dq_stats s = stats();
    ck_assert_int_eq(s.due + s.processing, 0);
    script_flush();
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "a", &info), DQ_ERR_NOTFOUND);
    script_flush();
    make_dead("d");
    script_flush();
    ck_assert_int_eq(dq_requeue(cl, Q, "d"), DQ_OK);
}
END_TEST

START_TEST(pipeline_reloads_after_script_flush)
{
    dq_enqueue_req reqs[50];
    dq_status sts[50];
    for (int i = 0; i < 50; i++)
        reqs[i] = req_make(NULL, "x", 0, 0);
    script_flush();
    ck_assert_int_eq(dq_enqueue_many(cl, reqs, 50, NULL, sts), DQ_OK);
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(sts[i], DQ_OK);
    ck_assert_int_eq(stats().due, 50);
}
END_TEST

START_TEST(client_recovers_after_redis_restart)
{
    enq("before", "x", 0, 0);
    restart_server();

    /* The call that meets the dead connection may fail; the next works. */
    dq_stats s;
    dq_status st = dq_stats_get(cl, Q, &s);
    if (st != DQ_OK) {
        ck_assert_msg(st == DQ_ERR_CONNECT, "after restart: %s", dq_errmsg(cl));
        ck_assert_str_ne(dq_errmsg(cl), "");
        st = dq_stats_get(cl, Q, &s);
    }
    ck_assert_msg(st == DQ_OK, "no recovery: %s", dq_errmsg(cl));
    ck_assert_int_eq(s.due, 0);   /* no persistence: the job is gone */

    /* A new server has no scripts loaded: every path loads its own. */
    enq("after", "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, "after");
    ck_assert_int_eq(dq_ack(cl, Q, "after", res.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&res);

    /* Same again, with the pipeline being the first to meet the break. */
    restart_server();
    dq_enqueue_req reqs[3] = { req_make("p1", "x", 0, 0), req_make("p2", "x", 0, 0),
                               req_make("p3", "x", 0, 0) };
    st = dq_enqueue_many(cl, reqs, 3, NULL, NULL);
    if (st != DQ_OK) {
        ck_assert_msg(st == DQ_ERR_CONNECT, "after restart: %s", dq_errmsg(cl));
        st = dq_enqueue_many(cl, reqs, 3, NULL, NULL);
    }
    ck_assert_msg(st == DQ_OK, "no recovery: %s", dq_errmsg(cl));
    ck_assert_int_eq(stats().due, 3);
    char **v;
    size_t n;
    ck_assert_int_eq(dq_queues(cl, &v, &n), DQ_OK);   /* re-registered */
    ck_assert_uint_eq(n, 1);
    dq_strv_free(v, n);
}
END_TEST

/* ---- connecting --------------------------------------------------------- */

START_TEST(unreachable_socket_is_connect_error)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = "/nonexistent/delayq-test/redis.sock";
    char err[256] = "";
    dq_status st = DQ_OK;
    dq_client *c = dq_connect(&opt, err, sizeof err, &st);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(st, DQ_ERR_CONNECT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/delayq-test/redis.sock"));

    opt.unix_path = fx->sock;
    opt.prefix = "bad{prefix";
    c = dq_connect(&opt, err, sizeof err, &st);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(st, DQ_ERR_INVALID);
}
END_TEST

/* Connect with a user and password; return the status (closing any client). */
static dq_status try_connect(const char *user, const char *password, char *err,
                             size_t errlen)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.user = user;
    opt.password = password;
    dq_status st = DQ_ERR_REDIS;
    dq_client *c = dq_connect(&opt, err, errlen, &st);
    if (c) {
        dq_stats s;
        dq_status used = dq_stats_get(c, Q, &s);
        ck_assert_msg(used == DQ_OK, "connected but unusable: %s", dq_errmsg(c));
        dq_close(c);
    } else {
        ck_assert_int_ne(st, DQ_OK);
    }
    return st;
}

START_TEST(requirepass_is_enforced)
{
    char err[256];
    ck_assert_int_eq(fixture_redis_int(fx, "CONFIG SET requirepass %s", TEST_PASSWORD), 0);
    ck_assert_int_eq(try_connect(NULL, NULL, err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect(NULL, "wrong", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect(NULL, TEST_PASSWORD, err, sizeof err), DQ_OK);

    /* A client that connected before the password was set, and loses its
     * connection, is refused once it reconnects. */
    redisContext *rc = raw_connect();
    ck_assert(raw_ok(rc, "AUTH " TEST_PASSWORD));
    ck_assert(raw_ok(rc, "CLIENT KILL TYPE normal SKIPME yes"));
    int64_t now;
    dq_status st = dq_server_time(cl, &now);
    if (st == DQ_ERR_CONNECT)
        st = dq_server_time(cl, &now);
    ck_assert_msg(st == DQ_ERR_AUTH, "got %s: %s", dq_status_str(st), dq_errmsg(cl));
    ck_assert(raw_ok(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
    ck_assert_int_eq(try_connect(NULL, NULL, err, sizeof err), DQ_OK);
    ck_assert_int_eq(dq_server_time(cl, &now), DQ_OK);
}
END_TEST

START_TEST(acl_user_authenticates)
{
    char err[256];
    ck_assert_int_eq(fixture_redis_int(fx, "ACL SETUSER alice on >pw ~* &* +@all"), 0);
    ck_assert_int_eq(try_connect("alice", "pw", err, sizeof err), DQ_OK);
    ck_assert_int_eq(try_connect("alice", "nope", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect("mallory", "pw", err, sizeof err), DQ_ERR_AUTH);
    ck_assert_int_eq(try_connect("alice", NULL, err, sizeof err), DQ_ERR_INVALID);
}
END_TEST

START_TEST(db_option_selects_database)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.db = 3;
    char err[256];
    dq_client *c3 = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c3 != NULL, "%s", err);
    dq_enqueue_req r = req_make("in3", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(c3, &r, NULL), DQ_OK);
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(c3, Q, &s), DQ_OK);
    ck_assert_int_eq(s.due, 1);

    ck_assert_int_eq(stats().due, 0);
    dq_job_info info;
    ck_assert_int_eq(dq_show(cl, Q, "in3", &info), DQ_ERR_NOTFOUND);
    char **v;
    size_t n;
    ck_assert_int_eq(dq_queues(cl, &v, &n), DQ_OK);
    ck_assert_uint_eq(n, 0);
    dq_strv_free(v, n);
    dq_close(c3);

    opt.db = 100000;   /* no such database */
    dq_status st;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_AUTH);
    ck_assert_ptr_nonnull(strstr(err, "SELECT"));
}
END_TEST

START_TEST(hung_server_times_out_and_client_recovers)
{
    dq_options opt;
    fixture_options(fx, &opt);
    opt.command_timeout_ms = 200;
    char err[256];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "%s", err);
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(c, Q, &s), DQ_OK);

    ck_assert_int_eq(kill(fx->pid, SIGSTOP), 0);
    int64_t t0 = tu_mono_ms();
    dq_status st = dq_stats_get(c, Q, &s);
    int64_t took = tu_mono_ms() - t0;
    dq_status again = dq_stats_get(c, Q, &s);   /* reconnects, times out too */
    ck_assert_int_eq(kill(fx->pid, SIGCONT), 0);
    ck_assert_msg(st == DQ_ERR_TIMEOUT, "got %s: %s", dq_status_str(st), dq_errmsg(c));
    ck_assert_int_ge(took, 150);
    ck_assert_int_lt(took, 2000);
    ck_assert_int_eq(again, DQ_ERR_TIMEOUT);

    st = dq_stats_get(c, Q, &s);
    ck_assert_msg(st == DQ_OK, "after SIGCONT: %s", dq_errmsg(c));
    dq_enqueue_req r = req_make("x", "x", 0, 0);
    ck_assert_int_eq(dq_enqueue(c, &r, NULL), DQ_OK);
    dq_close(c);
}
END_TEST

/* ---- the suite ---------------------------------------------------------- */

Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase(s, "reload", 20);
    tcase_add_test(tc, scripts_reload_after_script_flush);
    tcase_add_test(tc, pipeline_reloads_after_script_flush);
    tcase_add_test(tc, client_recovers_after_redis_restart);

    tc = tcase(s, "connect", 10);
    tcase_add_test(tc, unreachable_socket_is_connect_error);
    tcase_add_test(tc, requirepass_is_enforced);
    tcase_add_test(tc, acl_user_authenticates);
    tcase_add_test(tc, db_option_selects_database);
    tcase_add_test(tc, hung_server_times_out_and_client_recovers);
    return s;
}
