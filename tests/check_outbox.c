/*
 * The PostgreSQL outbox, end to end: a real PostgreSQL 15 (tests/pg_fixture.h),
 * the real delayqd and its relay, a real redis-server (outbox_harness.h).
 * A rolled-back transaction leaves no job, a committed one is due at its
 * time, a cancel in the payment's transaction keeps the job from running;
 * rows that cannot be applied go to the dead table without holding up the
 * rest; delayqd -t checks the tables, the login and the grants, and a bad
 * source is refused at its line.  The faults (the relay killed, two
 * daemons, PostgreSQL and Redis failing, replicated durability) are in
 * tests/check_outbox_faults.c.
 */
#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_LIBPQ
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "outbox_harness.h"
#include "testutil.h"

static int job_exists(void *arg)
{
    return h_state(&H, arg, NULL) >= 0;
}

/* A rolled-back order leaves no job; a committed one is due at its time;
 * a payment that cancels in its own transaction keeps the job from
 * running. */
START_TEST(a_job_exists_only_when_its_transaction_commits)
{
    ob_write_conf(1, NULL, NULL);
    h_start(&H, 1);
    PGconn *c = ob_connect();
    ob_run(c, "BEGIN");
    ob_run(c, "INSERT INTO orders (id) VALUES (1)");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '1 second', "
           "'order:1:cancel')");
    ob_run(c, "ROLLBACK");
    int64_t committed = tu_now_ms();
    ob_run(c, "BEGIN");
    ob_run(c, "INSERT INTO orders (id) VALUES (2)");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '1500 ms', "
           "'order:2:cancel')");
    ob_run(c, "COMMIT");
    ck_assert_msg(h_wait(3000, job_exists, "order:2:cancel") == 1,
                  "the committed job is not in Redis; log:\n%s", h_log_tail(&H));
    int64_t in_redis = tu_now_ms() - committed;
    dq_job_info info;
    ck_assert_int_eq(h_state(&H, "order:2:cancel", &info), DQ_STATE_DELAYED);
    /* Due 1.5 s after its transaction began, however long the relay took. */
    ck_assert_msg(llabs(info.job.due_ms - (committed + 1500)) < 300, "due %lld ms after commit",
                  (long long)(info.job.due_ms - committed));
    dq_job_info_free(&info);
    ck_assert_int_eq(h_wait_record(&H, "order:2:cancel", 0, 1, 5000), 1);
    struct h_run *r, first;
    size_t n = h_records(&H, &r);
    h_count(r, n, "order:2:cancel", 0, &first);
    ck_assert_int_ge(first.ms, committed + 1500 - 50);
    free(r);
    ck_assert_int_eq(h_state(&H, "order:1:cancel", NULL), -1);

    /* The order, then its payment, which cancels the timeout job. */
    ob_run(c, "BEGIN");
    ob_run(c, "INSERT INTO orders (id) VALUES (3)");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '1 second', "
           "'order:3:cancel')");
    ob_run(c, "COMMIT");
    ob_run(c, "BEGIN");
    ob_run(c, "UPDATE orders SET paid = true WHERE id = 3");
    ob_run(c, "SELECT delayq_cancel('orders', 'order:3:cancel')");
    ob_run(c, "COMMIT");
    ck_assert(h_wait(3000, ob_outbox_empty, NULL) == 1);
    tu_sleep_ms(1500);
    n = h_records(&H, &r);
    ck_assert_int_eq(h_count(r, n, "order:3:cancel", 0, NULL), 0);
    free(r);
    int st = h_state(&H, "order:3:cancel", NULL);
    ck_assert_msg(st != DQ_STATE_DELAYED, "the paid order's job is %d",
                  st);
    fprintf(stderr, "outbox: commit to Redis in %lld ms\n", (long long)in_redis);
    PQfinish(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

static const char *reason_of(const char *where, char *out, size_t len)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT coalesce((SELECT reason FROM delayq_outbox_dead WHERE %s),"
             " '(none)')", where);
    ck_assert_msg(pg_query_value(&PG, sql, out, len) == 0, "%s", PG.why);
    return out;
}

/* A row the relay cannot apply goes to the dead table with its reason,
 * is counted in /metrics, and the rows behind it are applied. */
START_TEST(rows_that_cannot_be_applied_go_to_the_dead_table)
{
    int port = fixture_free_port();
    char extra[256];
    snprintf(extra, sizeof extra, "admin = { listen = \"127.0.0.1:%d\"; };\n", port);
    ob_write_conf(1, NULL, extra);
    h_start(&H, 1);
    PGconn *c = ob_connect();
    ob_run(c, "BEGIN");
    ob_run(c, "SELECT delayq_enqueue('nosuchqueue', 't', 'ok', interval '0', 'a')");
    ob_run(c, "SELECT delayq_enqueue('orders', 'two words', 'ok', interval '0', 'b')");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '0', '12345')");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '0', 'good1')");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', decode(repeat('ab', 1100000), 'hex'), "
           "interval '0', 'big')");
    ob_run(c, "INSERT INTO delayq_outbox (queue, job_id, type, expire_at) "
           "VALUES ('orders', 'late', 't', now() - interval '1 hour')");
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '0', 'good2')");
    ob_run(c, "COMMIT");
    ck_assert_msg(h_wait(5000, ob_outbox_empty, NULL) == 1, "rows left; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_wait_record(&H, "good1", 0, 1, 5000), 1);
    ck_assert_int_eq(h_wait_record(&H, "good2", 0, 1, 5000), 1);
    ck_assert_int_eq(ob_count_rows("delayq_outbox_dead"), 5);
    char why[400];
    ck_assert_msg(strstr(reason_of("job_id = 'a'", why, sizeof why),
                         "queue \"nosuchqueue\" is not one of the queues of"), "%s", why);
    ck_assert_msg(strstr(reason_of("job_id = 'b'", why, sizeof why), "type: job type has a "
                         "space"), "%s", why);
    ck_assert_msg(strstr(reason_of("job_id = '12345'", why, sizeof why), "digits"), "%s", why);
    ck_assert_msg(strstr(reason_of("job_id = 'big'", why, sizeof why), "over the limit"),
                  "%s", why);
    ck_assert_msg(strstr(reason_of("job_id = 'late'", why, sizeof why), "expiry"), "%s", why);
    ck_assert_int_eq(h_wait_log(&H, "moved to delayq_outbox_dead", 5, 2000), 5);
    char body[16384];
    ck_assert_int_eq(fixture_http_get(port, "/metrics", body, sizeof body), 200);
    ck_assert_msg(strstr(body, "delayq_outbox_rows_total{source=\"delayq_outbox\","
                               "outcome=\"dead\"} 5"), "%s", body);
    ck_assert_msg(strstr(body, "delayq_outbox_rows_total{source=\"delayq_outbox\","
                               "outcome=\"applied\"} 2"), "%s", body);
    ck_assert(strstr(body, "delayq_outbox_leader{source=\"delayq_outbox\"} 1"));
    PQfinish(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* delayqd -t checks the table's columns when it reaches the database,
 * and only notes a database it cannot reach. */
START_TEST(delayqd_t_checks_the_tables)
{
    ob_write_conf(1, "table = \"shop.outbox\";", NULL);
    const char *args[] = { "-t", "-c", H.conf, NULL };
    char err[1024];
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
    ck_assert_msg(strstr(err, "delayqd.conf:") && strstr(err, "sources.[0]")
                  && strstr(err, "table shop.outbox does not exist"), "%s", err);
    ck_assert_int_eq(pg_exec(&PG, "CREATE SCHEMA shop; CREATE TABLE shop.outbox (id bigint); "
                                  "CREATE TABLE shop.outbox_dead (id bigint); "
                                  "GRANT USAGE ON SCHEMA shop TO relay; "
                                  "GRANT SELECT ON shop.outbox, shop.outbox_dead TO relay"), 0);
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
    ck_assert_msg(strstr(err, "has no column op"), "%s", err);
    ob_write_conf(1, NULL, NULL);
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 0);
    /* A relay's role without the grants docs/outbox.md gives it. */
    ck_assert_int_eq(pg_exec(&PG, "REVOKE DELETE ON delayq_outbox FROM relay"), 0);
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
    ck_assert_msg(strstr(err, "the relay's role relay lacks DELETE on public.delayq_outbox "
                              "(GRANT DELETE ON public.delayq_outbox TO relay)"), "%s", err);
    ck_assert_int_eq(pg_exec(&PG, "GRANT DELETE ON delayq_outbox TO relay"), 0);
    /* A server that answers and refuses the login: the configuration's
     * fault. */
    char good[sizeof RELAY_CONNINFO];
    snprintf(good, sizeof good, "%s", RELAY_CONNINFO);
    snprintf(RELAY_CONNINFO, sizeof RELAY_CONNINFO, "%s user=nosuchrole", PG.conninfo);
    ob_write_conf(1, NULL, NULL);
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 78);
    ck_assert_msg(strstr(err, "role \"nosuchrole\" does not exist"), "%s", err);
    snprintf(RELAY_CONNINFO, sizeof RELAY_CONNINFO, "%s", good);
    /* A database out of reach: only noted. */
    snprintf(RELAY_CONNINFO, sizeof RELAY_CONNINFO, "host=%s/nowhere dbname=x", H.fx.dir);
    ob_write_conf(1, NULL, NULL);
    ck_assert_int_eq(h_run_delayqd(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "source delayq_outbox not checked"), "%s", err);
}
END_TEST

/* Write a configuration whose sources list holds `entries` from line 6
 * on (one entry a line). */
static void write_sources(const char *entries)
{
    char text[PATH_MAX + 4096];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"orders\"; workers = 1; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; } );\n"
             "sources = (\n%s\n);\n", H.fx.sock, H.handler_dir, entries);
    h_write_file(H.conf, text);
}

/* Each mistake in a source is refused, by delayqd -t and at start, with
 * one line that names the file, the entry's line and what is wrong. */
START_TEST(a_bad_source_is_refused_at_its_line)
{
    static const struct { const char *entry, *what; } cases[] = {
        { "{ conninfo = \"dbname=x\"; }", "sources.[0].type: missing" },
        { "{ type = \"mysql\"; conninfo = \"dbname=x\"; }",
          "the only kind is \"postgres\"" },
        { "{ type = \"postgres\"; }", "sources.[0].conninfo: missing" },
        { "{ type = \"postgres\"; conninfo = \"x\"; table = \"Shop.Outbox\"; }",
          "may hold only a-z, 0-9 and _" },
        { "{ type = \"postgres\"; conninfo = \"x\"; table = \"a.b.c\"; }",
          "may hold only a-z, 0-9 and _" },
        { "{ type = \"postgres\"; conninfo = \"x\"; batch = 0; }", "sources.[0].batch" },
        { "{ type = \"postgres\"; conninfo = \"x\"; replay_window = \"5s\"; }",
          "sources.[0].replay_window" },
        { "{ type = \"postgres\"; conninfo = \"x\"; name = \"a:b\"; }",
          "no space, quote, backslash or colon" },
        { "{ type = \"postgres\"; conninfo = \"x\"; connifo = \"y\"; }", "connifo" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_sources(cases[i].entry);
        h_assert_refused(&H, 6, cases[i].what);
    }
    char pw[300], entries[700];
    snprintf(pw, sizeof pw, "%s/pg.pass", H.fx.dir);
    h_write_file(pw, "secret\n");
    ck_assert_int_eq(chmod(pw, 0644), 0);
    snprintf(entries, sizeof entries, "{ type = \"postgres\"; conninfo = \"x\"; "
             "password_file = \"%s\"; }", pw);
    write_sources(entries);
    h_assert_refused(&H, 6, "is accessible by other users");
    write_sources("{ type = \"postgres\"; conninfo = \"x\"; },\n"
                  "{ type = \"postgres\"; conninfo = \"y\"; }");
    h_assert_refused(&H, 7, "the name \"delayq_outbox\" is taken by sources.[0]");
}
END_TEST

int main(void)
{
    if (access("/usr/lib/postgresql/15/bin/postgres", X_OK) != 0) {
        printf("check_outbox: skipped: no PostgreSQL 15 here (apt-get install "
               "postgresql-15)\n");
        return 77;
    }
    Suite *s = suite_create("outbox");
    TCase *tc = fixture_tcase(s, "relay", 120, ob_pg_up, ob_pg_down, ob_setup, ob_teardown);
    tcase_add_test(tc, a_job_exists_only_when_its_transaction_commits);
    tcase_add_test(tc, rows_that_cannot_be_applied_go_to_the_dead_table);
    tcase_add_test(tc, delayqd_t_checks_the_tables);
    tcase_add_test(tc, a_bad_source_is_refused_at_its_line);
    return fixture_run_suite(s);
}
#else
int main(void)
{
    printf("check_outbox: skipped: delayq was built without libpq (apt-get install "
           "libpq-dev, then configure again)\n");
    return 77;
}
#endif
