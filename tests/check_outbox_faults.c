/*
 * The PostgreSQL outbox under faults, with real processes and real kills
 * (outbox_harness.h): 10,000 rows from 4 writers (separate processes with
 * their own libpq connections) with the relay SIGKILLed again and again
 * are each applied once and in order; two daemons on one table, through a
 * takeover, a PostgreSQL crash and a Redis kill, lose and double nothing;
 * under durability = "replicated" a row is deleted only once a replica has
 * its job.
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

/* ---- the relay killed, many times ---------------------------------------- */

#define WRITERS 4
#define ITERATIONS 1250     /* per writer: 2,500 rows each, 10,000 in all */

/* Writer `w`: job w-i-run (due now) for every i, and, for every even i,
 * job w-i-paid (due in a minute) added then cancelled, each in a
 * transaction of its own.  Exits 0, or 1 on a database error. */
static void writer(int w)
{
    PGconn *c = PQconnectdb(PG.conninfo);
    if (PQstatus(c) != CONNECTION_OK)
        _exit(1);
    char sql[256];
    for (int i = 0; i < ITERATIONS; i++) {
        snprintf(sql, sizeof sql, "SELECT delayq_enqueue('orders', 't', 'ok', interval '0', "
                 "'w%d-%d-run')", w, i);
        PGresult *r = PQexec(c, sql);
        int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (ok && i % 2 == 0) {
            snprintf(sql, sizeof sql, "SELECT delayq_enqueue('orders', 't', 'ok', "
                     "interval '60 seconds', 'w%d-%d-paid')", w, i);
            r = PQexec(c, sql);
            ok = PQresultStatus(r) == PGRES_TUPLES_OK;
            PQclear(r);
            snprintf(sql, sizeof sql, "SELECT delayq_cancel('orders', 'w%d-%d-paid')", w, i);
            r = PQexec(c, sql);
            ok = ok && PQresultStatus(r) == PGRES_TUPLES_OK;
            PQclear(r);
        }
        if (!ok) {
            fprintf(stderr, "writer %d: %s", w, PQerrorMessage(c));
            _exit(1);
        }
        tu_sleep_ms(2);         /* rows over about 3 s: the kills land while they flow */
    }
    PQfinish(c);
    _exit(0);
}

static pid_t start_writer(int w)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0)
        writer(w);
    return pid;
}

/* Every "run" job ran once; no "paid" job ran or waits. */
static void assert_each_once(const struct harness *h, struct harness *hc, int *lost,
                             int *doubled)
{
    struct h_run *r;
    size_t n = h_records(h, &r);
    char id[64];
    *lost = *doubled = 0;
    int paid_ran = 0, paid_waits = 0;
    for (int w = 0; w < WRITERS; w++)
        for (int i = 0; i < ITERATIONS; i++) {
            snprintf(id, sizeof id, "w%d-%d-run", w, i);
            int k = h_count(r, n, id, 0, NULL);
            *lost += k == 0;
            *doubled += k > 1;
            if (i % 2)
                continue;
            snprintf(id, sizeof id, "w%d-%d-paid", w, i);
            paid_ran += h_count(r, n, id, 0, NULL);
            int st = h_state(hc, id, NULL);
            paid_waits += st == DQ_STATE_DELAYED;
        }
    free(r);
    fprintf(stderr, "outbox: %d jobs lost, %d run twice, %d cancelled jobs ran, %d still "
            "wait\n", *lost, *doubled, paid_ran, paid_waits);
    ck_assert_int_eq(paid_ran, 0);
    ck_assert_int_eq(paid_waits, 0);
}

static int all_ran(void *arg)
{
    struct harness *h = arg;
    struct h_run *r;
    size_t n = h_records(h, &r);
    size_t starts = 0;
    for (size_t k = 0; k < n; k++)
        starts += r[k].end == 0;
    free(r);
    return starts >= (size_t)WRITERS * ITERATIONS;
}

START_TEST(ten_thousand_rows_survive_relay_kills)
{
    ob_write_conf(2, "batch = 200;", NULL);
    h_start(&H, 2);
    pid_t writers[WRITERS];
    for (int w = 0; w < WRITERS; w++)
        writers[w] = start_writer(w);
    int kills = 0, running = WRITERS;
    pid_t killed = 0;
    int64_t t0 = tu_mono_ms(), written = 0;
    while (running > 0 || kills < 10) {
        tu_sleep_ms(100 + random() % 200);
        pid_t relay = h_log_pid(&H, "relay0", "relays public.delayq_outbox");
        if (relay > 0 && relay != killed && kill(relay, SIGKILL) == 0) {
            killed = relay;
            kills++;
        }
        for (int w = 0; w < WRITERS; w++) {
            int status;
            if (writers[w] > 0 && waitpid(writers[w], &status, WNOHANG) == writers[w]) {
                ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                              "writer %d failed", w);
                writers[w] = 0;
                running--;
            }
        }
        ck_assert_msg(tu_mono_ms() - t0 < 60000, "the writers did not finish in 60 s");
        if (running == 0 && !written)
            written = tu_mono_ms() - t0;
    }
    ck_assert_msg(h_wait(20000, ob_outbox_empty, NULL) == 1, "rows left in the outbox; log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait(20000, all_ran, &H) == 1, "not every job ran; log:\n%s",
                  h_log_tail(&H));
    tu_sleep_ms(500);           /* a second run of any of them would show now */
    int lost, doubled;
    assert_each_once(&H, &H, &lost, &doubled);
    fprintf(stderr, "outbox: 10,000 rows, relay killed %d times; written in %lld ms, all "
            "run after %lld ms\n", kills, (long long)written, (long long)(tu_mono_ms() - t0));
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(doubled, 0);
    ck_assert_int_eq(ob_count_rows("delayq_outbox_dead"), 0);
    ck_assert_int_ge(h_log_count(&H, "relays public.delayq_outbox"), kills + 1);
    fprintf(stderr, "outbox: %d batches applied again after a kill\n",
            h_log_count(&H, "in Redis already"));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- durability = "replicated" -------------------------------------------- */

static int has_line(void *arg)
{
    return h_log_count(&H, arg) > 0;
}

static int replica_online(void *arg)
{
    redisContext *rc = fixture_redis_connect(arg);
    redisReply *r = redisCommand(rc, "INFO replication");
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "state=online");
    freeReplyObject(r);
    redisFree(rc);
    return up;
}

/* Under durability = "replicated" a row is deleted only once a replica
 * has its job: with none, the job is written on the master but the row
 * stays (the relay says why); once a replica is there, it goes. */
START_TEST(replicated_rows_are_deleted_only_once_a_replica_has_them)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    char redis_text[512], src[1024];
    snprintf(redis_text, sizeof redis_text, "unix_socket = \"%s\"; durability = "
             "\"replicated\"; replication_timeout = \"200ms\";", H.fx.sock);
    hc.redis = redis_text;
    hc.extra = ob_source_conf(src, sizeof src, NULL);
    h_write_conf(&H, &hc);
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", H.conf, NULL };
    char err[300];
    H.pid = tu_spawn(argv, H.log, 0, err, sizeof err);   /* its claims wait for a replica */
    ck_assert_msg(H.pid > 0, "%s", err);
    PGconn *c = ob_connect();
    ob_run(c, "SELECT delayq_enqueue('orders', 't', 'ok', interval '1 hour', 'r1')");
    ck_assert_msg(h_wait(5000, has_line, "not replicated") == 1, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_state(&H, "r1", NULL), DQ_STATE_DELAYED);
    ck_assert_int_eq(ob_count_rows("delayq_outbox"), 1);

    struct redis_fixture replica;
    fixture_redis_start(&replica);
    int port = fixture_redis_listen_tcp(&H.fx);
    ck_assert_int_eq(fixture_redis_int(&replica, "REPLICAOF 127.0.0.1 %d", port), 0);
    ck_assert_msg(h_wait(10000, replica_online, &H.fx) == 1, "no replica online");
    ck_assert_msg(h_wait(10000, ob_outbox_empty, NULL) == 1, "the row stayed; log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_state(&H, "r1", NULL), DQ_STATE_DELAYED);
    ck_assert_int_eq(fixture_redis_int(&replica, "EXISTS dq:{orders}:jobs"), 1);
    ck_assert_int_eq(ob_count_rows("delayq_outbox_dead"), 0);
    PQfinish(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
    fixture_redis_stop(&replica);
}
END_TEST

/* ---- two daemons, PostgreSQL and Redis failing --------------------------- */

#define STEADY_JOBS 1000

/* Write job s-0 .. s-(STEADY_JOBS-1), all due at Unix second `due_s`, each
 * with a row of `written` in the same transaction, as a service that
 * rides out a database restart would: when a commit's outcome is lost
 * with the connection, the row of `written` says whether it happened.
 * Exits 0, or 1 after 60 s. */
static void steady_writer(int64_t due_s)
{
    PGconn *c = NULL;
    char sql[512];
    int64_t t0 = tu_mono_ms();
    for (int i = 0; i < STEADY_JOBS;) {
        if (tu_mono_ms() - t0 > 60000)
            _exit(1);
        if (!c || PQstatus(c) != CONNECTION_OK) {
            PQfinish(c);
            c = PQconnectdb(PG.conninfo);
            if (PQstatus(c) != CONNECTION_OK) {
                tu_sleep_ms(50);
                continue;
            }
            /* The fixture's server commits lazily; a crash would lose what
             * this writer was told is committed. */
            PQclear(PQexec(c, "SET synchronous_commit = on"));
            snprintf(sql, sizeof sql, "SELECT count(*) FROM written WHERE id = %d", i);
            PGresult *r = PQexec(c, sql);
            int done = PQresultStatus(r) == PGRES_TUPLES_OK && atoi(PQgetvalue(r, 0, 0)) == 1;
            PQclear(r);
            i += done;
            continue;
        }
        snprintf(sql, sizeof sql, "BEGIN; INSERT INTO written VALUES (%d); SELECT "
                 "delayq_enqueue('orders', 't', 'ok', to_timestamp(%lld), 's-%d'); COMMIT",
                 i, (long long)due_s, i);
        PGresult *r = PQexec(c, sql);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok)
            i++;
        else if (PQstatus(c) == CONNECTION_OK)
            PQclear(PQexec(c, "ROLLBACK"));
        tu_sleep_ms(2);
    }
    PQfinish(c);
    _exit(0);
}

/* A Redis server that keeps every write (appendfsync always) in `dir`,
 * on `sock`; its pid. */
static pid_t durable_redis(const char *dir, const char *sock)
{
    char server[PATH_MAX], err[300];
    ck_assert(tu_redis_find(NULL, server, sizeof server) == 0);
    char *const extra[] = { "--appendonly", "yes", "--appendfsync", "always", NULL };
    pid_t pid = 0;
    ck_assert_msg(tu_redis_spawn_with(server, dir, sock, extra, 0, &pid, err, sizeof err) == 0,
                  "%s", err);
    return pid;
}

static int leads(int port)
{
    char body[16384];
    return fixture_http_get(port, "/metrics", body, sizeof body) == 200
           && strstr(body, "delayq_outbox_leader{source=\"delayq_outbox\"} 1");
}

struct health_arg {
    int port;
    char body[4096];
};

static int source_failing(void *arg)
{
    struct health_arg *a = arg;
    return fixture_http_get(a->port, "/healthz", a->body, sizeof a->body) == 503
           && strstr(a->body, "source delayq_outbox: relay failing");
}

static int wait_leader(void *arg)
{
    return leads(*(int *)arg);
}

/* h_wait condition: either of the two daemons (admin ports arg[0],
 * arg[1]) leads. */
static int either_leads(void *arg)
{
    const int *port = arg;
    return leads(port[0]) || leads(port[1]);
}

/* Two daemons on one table: the one that leads stops and the other takes
 * over; PostgreSQL crashes and comes back (/healthz says so meanwhile);
 * Redis is killed and restarted.  Every job is in Redis once and runs
 * once, at its time. */
START_TEST(two_daemons_and_failures_lose_and_double_nothing)
{
    char dir[sizeof H.fx.dir + 8], sock[sizeof H.fx.sock];
    snprintf(dir, sizeof dir, "%s/aof", H.fx.dir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(sock, sizeof sock, "%s/aof.sock", H.fx.dir);
    pid_t redis = durable_redis(dir, sock);
    ck_assert_int_eq(pg_exec(&PG, "CREATE TABLE written (id int PRIMARY KEY)"), 0);
    struct harness d[2];
    int port[2];
    for (int k = 0; k < 2; k++) {
        d[k] = H;
        d[k].pid = 0;
        snprintf(d[k].fx.sock, sizeof d[k].fx.sock, "%s", sock);
        snprintf(d[k].conf, sizeof d[k].conf, "%s/d%d.conf", H.fx.dir, k);
        snprintf(d[k].log, sizeof d[k].log, "%s/d%d.log", H.fx.dir, k);
        port[k] = fixture_free_port();
        struct h_conf hc;
        h_conf_defaults(&hc);
        hc.workers = 1;
        hc.batch = 64;
        char redis_text[PATH_MAX + 64], src[1024], all[2048];
        snprintf(redis_text, sizeof redis_text, "unix_socket = \"%s\";", sock);
        hc.redis = redis_text;
        ob_source_conf(src, sizeof src, "failure_grace = \"500ms\";");
        snprintf(all, sizeof all, "%sadmin = { listen = \"127.0.0.1:%d\"; };\n", src, port[k]);
        hc.extra = all;
        h_write_conf(&d[k], &hc);
    }
    h_start(&d[0], 1);
    h_start(&d[1], 2);
    ck_assert_msg(h_wait(10000, either_leads, port) == 1, "no relay leads");
    int first = leads(port[0]) ? 0 : 1;
    int64_t due_s = tu_now_ms() / 1000 + 9;
    fflush(NULL);
    pid_t writer = fork();
    ck_assert(writer >= 0);
    if (writer == 0)
        steady_writer(due_s);

    tu_sleep_ms(800);           /* the leading daemon stops; the other takes over */
    ck_assert_int_eq(h_stop(&d[first], 10000), 0);
    int other = 1 - first;
    ck_assert_msg(h_wait(3000, wait_leader, &port[other]) == 1, "no takeover; log:\n%s",
                  h_log_tail(&d[other]));

    tu_sleep_ms(500);           /* PostgreSQL crashes, and /healthz says so */
    pg_kill(&PG);
    struct health_arg ha = { .port = port[other] };
    ck_assert_msg(h_wait(5000, source_failing, &ha) == 1, "/healthz: %s", ha.body);
    ck_assert_msg(pg_start_again(&PG) == 0, "%s", PG.why);

    tu_sleep_ms(800);           /* Redis is killed, and comes back with its data */
    ck_assert_int_eq(kill(redis, SIGKILL), 0);
    ck_assert_int_eq(waitpid(redis, NULL, 0), redis);
    tu_sleep_ms(700);
    unlink(sock);
    redis = durable_redis(dir, sock);

    int status;
    ck_assert_int_eq(waitpid(writer, &status, 0), writer);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed");
    ck_assert_msg(h_wait(20000, ob_outbox_empty, NULL) == 1, "rows left; log:\n%s",
                  h_log_tail(&d[other]));
    ck_assert_int_eq(ob_count_rows("written"), STEADY_JOBS);
    /* Each in Redis once and waiting, if its time has not come yet (on a
     * loaded machine the faults above can outlast the delay); then each
     * runs once, and none before its time. */
    if (tu_now_ms() + 500 < due_s * 1000) {
        dq_options opt;
        dq_options_init(&opt);
        opt.unix_path = sock;
        char err[300];
        dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
        ck_assert_msg(c != NULL, "%s", err);
        dq_stats st;
        ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
        if (tu_now_ms() < due_s * 1000)
            ck_assert_int_eq(st.delayed, STEADY_JOBS);
        dq_close(c);
    } else {
        fprintf(stderr, "outbox: the jobs were due before the relay was done; "
                "their waiting count was not read\n");
    }
    int lost = 0, doubled = 0, early = 0;
    char id[32];
    ck_assert_int_eq(h_wait_record(&d[other], "s-999", 1, 1, 30000), 1);
    tu_sleep_ms(1000);
    struct h_run *r;
    size_t n = h_records(&H, &r);
    for (int i = 0; i < STEADY_JOBS; i++) {
        snprintf(id, sizeof id, "s-%d", i);
        struct h_run first;
        int k = h_count(r, n, id, 0, &first);
        lost += k == 0;
        doubled += k > 1;
        early += k > 0 && first.ms < due_s * 1000;
    }
    free(r);
    fprintf(stderr, "outbox: two daemons, a takeover, PostgreSQL and Redis restarted: %d "
            "jobs, %d lost, %d run twice, %d run early\n", STEADY_JOBS, lost, doubled, early);
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(doubled, 0);
    ck_assert_int_eq(early, 0);
    ck_assert_int_eq(ob_count_rows("delayq_outbox_dead"), 0);
    ck_assert_int_eq(h_stop(&d[other], 10000), 0);
    tu_stop_process(redis, 5000);
}
END_TEST

int main(void)
{
    if (access("/usr/lib/postgresql/15/bin/postgres", X_OK) != 0) {
        printf("check_outbox_faults: skipped: no PostgreSQL 15 here (apt-get install "
               "postgresql-15)\n");
        return 77;
    }
    Suite *s = suite_create("outbox_faults");
    TCase *tc = fixture_tcase(s, "relay", 120, ob_pg_up, ob_pg_down, ob_setup, ob_teardown);
    tcase_add_test(tc, ten_thousand_rows_survive_relay_kills);
    tcase_add_test(tc, two_daemons_and_failures_lose_and_double_nothing);
    tcase_add_test(tc, replicated_rows_are_deleted_only_once_a_replica_has_them);
    return fixture_run_suite(s);
}
#else
int main(void)
{
    printf("check_outbox_faults: skipped: delayq was built without libpq (apt-get install "
           "libpq-dev, then configure again)\n");
    return 77;
}
#endif
