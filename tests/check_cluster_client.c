/*
 * libdelayq and the delayq command line over Redis Cluster (a local
 * cluster of three masters with a replica each, tests/cluster_fixture.c):
 * commands go to the master of their queue's slot, a pipeline is split
 * per master, and the client follows what the cluster says: MOVED after a
 * slot moved, ASK and TRYAGAIN during a migration, a master killed and
 * its replica promoted; with an ACL user, and over TLS.  Each test starts
 * its own cluster in Check's forked child and stops it by pid.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "cluster_fixture.h"
#include "fixture.h"

static struct cluster_fx C;
static char port0[16];

static void start(const struct cluster_fx_opts *o)
{
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, 3, 1, o, err, sizeof err) == 0, "%s", err);
    snprintf(port0, sizeof port0, "%d", C.port[0]);
}

static void setup(void)
{
    start(NULL);
}

static void teardown(void)
{
    cluster_fx_stop(&C);
}

/* A client over the cluster, seeded by `nseeds` of its nodes (0: node 0
 * as host:port), with `o` for the rest (may be NULL). */
static dq_client *connect_with(const dq_options *o, size_t nseeds)
{
    dq_options opt;
    if (o)
        opt = *o;
    else
        dq_options_init(&opt);
    opt.cluster = 1;
    opt.port = C.port[0];
    opt.nodes = nseeds ? C.seeds : NULL;
    opt.nnodes = nseeds;
    char err[512];
    dq_status st;
    dq_client *c = dq_connect(&opt, err, sizeof err, &st);
    ck_assert_msg(c, "dq_connect: %s (%s)", err, dq_status_str(st));
    return c;
}

static int slot_of_queue(const char *queue)
{
    char key[128];
    snprintf(key, sizeof key, "{%s}", queue);
    long long s = cluster_fx_int(&C, 0, "CLUSTER KEYSLOT %s", key);
    ck_assert_int_ge(s, 0);
    return (int)s;
}

/* A queue name whose keys live on master `m`: "q<m>-<n>" for the first n
 * that lands there. */
static void queue_on(int m, char *name, size_t len)
{
    for (int n = 0; n < 1000; n++) {
        snprintf(name, len, "q%d-%d", m, n);
        if (cluster_fx_master_of_slot(&C, slot_of_queue(name)) == m)
            return;
    }
    ck_abort_msg("no queue name lands on master %d", m);
}

static void enqueue(dq_client *c, const char *queue, const char *id)
{
    dq_enqueue_req req = { .queue = queue, .type = "t", .id = id, .payload = "p",
                           .payload_len = 1, .delay_ms = 60000 };
    dq_status st = dq_enqueue(c, &req, NULL);
    ck_assert_msg(st == DQ_OK, "enqueue %s/%s: %s", queue, id, dq_errmsg(c));
}

static void assert_job(dq_client *c, const char *queue, const char *id)
{
    dq_job_info info;
    dq_status st = dq_show(c, queue, id, &info);
    ck_assert_msg(st == DQ_OK, "show %s/%s: %s", queue, id, dq_errmsg(c));
    ck_assert_str_eq(info.job.id, id);
    ck_assert_int_eq(info.state, DQ_STATE_DELAYED);
    dq_job_info_free(&info);
}

/* A queue on each master, q[m] on master m, with job `id` enqueued by `w`
 * and seen by `c`. */
static void job_on_every_master(dq_client *w, dq_client *c, char q[3][32], const char *id)
{
    for (int m = 0; m < 3; m++) {
        queue_on(m, q[m], sizeof q[m]);
        enqueue(w, q[m], id);
        assert_job(c, q[m], id);
    }
}

/* How many keys of `queue` master `m` holds. */
static long long keys_of(int m, const char *queue)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "dq:{%s}*", queue);
    return cluster_fx_keys_on(&C, m, pattern);
}

/* ---- routing ------------------------------------------------------------ */

START_TEST(jobs_of_queues_on_every_master)
{
    dq_client *c = connect_with(NULL, 0);
    char q[3][32];
    for (int m = 0; m < 3; m++) {
        queue_on(m, q[m], sizeof q[m]);
        enqueue(c, q[m], "a");
        enqueue(c, q[m], "b");
    }
    for (int m = 0; m < 3; m++) {
        assert_job(c, q[m], "a");
        ck_assert_int_gt(keys_of(m, q[m]), 0);
        ck_assert_int_eq(keys_of((m + 1) % 3, q[m]), 0);
        ck_assert_int_eq(dq_cancel(c, q[m], "b"), DQ_OK);
        ck_assert_int_eq(dq_cancel(c, q[m], "b"), DQ_ERR_NOTFOUND);
        dq_stats s;
        ck_assert_int_eq(dq_stats_get(c, q[m], &s), DQ_OK);
        ck_assert_int_eq(s.delayed, 1);
    }
    char **names;
    size_t n;
    ck_assert_int_eq(dq_queues(c, &names, &n), DQ_OK);
    ck_assert_uint_eq(n, 3);
    dq_strv_free(names, n);
    int64_t now;
    ck_assert_int_eq(dq_server_time(c, &now), DQ_OK); /* a command without a key */
    dq_close(c);
}
END_TEST

/* A master that forgot the scripts (SCRIPT FLUSH) gets them loaded; one
 * that closed the client's idle connection (CLIENT KILL) is reconnected
 * to before the next command is written. */
START_TEST(scripts_and_connections_per_master)
{
    dq_client *c = connect_with(NULL, 0);
    char q[3][32];
    job_on_every_master(c, c, q, "a");
    for (int m = 0; m < 3; m++)
        ck_assert_int_eq(cluster_fx_int(&C, m, "SCRIPT FLUSH"), 0);
    for (int m = 0; m < 3; m++)
        assert_job(c, q[m], "a");
    for (int m = 0; m < 3; m++)
        ck_assert_int_ge(cluster_fx_int(&C, m, "CLIENT KILL TYPE normal"), 1);
    for (int m = 0; m < 3; m++) {
        assert_job(c, q[m], "a");
        enqueue(c, q[m], "b");
    }
    dq_close(c);
}
END_TEST

/* One pipeline of jobs for three masters: each gets its own part, and
 * the results come back in the caller's order. */
START_TEST(enqueue_many_is_split_per_master)
{
    dq_client *c = connect_with(NULL, 6);
    char q[3][32], ids[30][16];
    dq_enqueue_req reqs[30];
    for (int m = 0; m < 3; m++)
        queue_on(m, q[m], sizeof q[m]);
    for (int i = 0; i < 30; i++) {
        snprintf(ids[i], sizeof ids[i], "j%d", i);
        reqs[i] = (dq_enqueue_req){ .queue = q[i % 3], .type = "t", .id = ids[i],
                                    .payload = "x", .payload_len = 1, .delay_ms = 60000 };
    }
    dq_enqueued res[30];
    dq_status sts[30];
    ck_assert_msg(dq_enqueue_many(c, reqs, 30, res, sts) == DQ_OK, "%s", dq_errmsg(c));
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(sts[i], DQ_OK);
        ck_assert_str_eq(res[i].id, ids[i]);
        assert_job(c, q[i % 3], ids[i]);
    }
    /* again: every id is taken, each refusal in its place */
    ck_assert_int_eq(dq_enqueue_many(c, reqs, 30, res, sts), DQ_ERR_EXISTS);
    for (int i = 0; i < 30; i++)
        ck_assert_int_eq(sts[i], DQ_ERR_EXISTS);
    dq_close(c);
}
END_TEST

START_TEST(cli_over_the_cluster)
{
    struct cli_run how = { .no_socket = true };
    char q[2][32], id[64];
    queue_on(1, q[0], sizeof q[0]);
    queue_on(2, q[1], sizeof q[1]);
    for (int i = 0; i < 2; i++) {
        struct run_result *r = CLI_HOW(&how, "--cluster", "-p", port0, "add", "-q", q[i],
                                       "-t", "t", "-d", "1h", "hello");
        assert_ok(r);
        add_id(r, id, sizeof id);
        r = CLI_HOW(&how, "--cluster", "-p", port0, "show", "-q", q[i], id);
        assert_ok(r);
        ck_assert_msg(strstr(r->out, "delayed"), "%s", r->out);
        ck_assert_int_gt(keys_of(i + 1, q[i]), 0);
    }
    struct run_result *r = CLI_HOW(&how, "--cluster", "-p", port0, "stats");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, q[0]) && strstr(r->out, q[1]), "%s", r->out);
    /* a seed that is not a cluster node, or that no one listens on */
    char dead[16];
    snprintf(dead, sizeof dead, "%d", fixture_free_port());
    r = CLI_HOW(&how, "--cluster", "-p", dead, "stats");
    assert_fails(r, 69, "cannot connect");
    r = CLI_HOW(&how, "--cluster", "-s", "/tmp/x.sock", "stats");
    assert_fails(r, 2, "--cluster");
}
END_TEST

START_TEST(bad_seeds_are_one_line_errors)
{
    const char *bad[] = { "127.0.0.1", NULL };
    dq_options opt;
    dq_options_init(&opt);
    opt.cluster = 1;
    opt.nodes = bad;
    opt.nnodes = 1;
    char err[512];
    dq_status st;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_INVALID);
    ck_assert_msg(strstr(err, "cluster node \"127.0.0.1\"") && !strchr(err, '\n'), "%s", err);
    opt.nodes = NULL;
    opt.nnodes = 0;
    opt.db = 2;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_INVALID);
    ck_assert_msg(strstr(err, "database 0"), "%s", err);
}
END_TEST

/* ---- what the cluster says ------------------------------------------------ */

START_TEST(moved_after_a_slot_moved)
{
    dq_client *c = connect_with(NULL, 0);
    char q[32], err[400];
    queue_on(0, q, sizeof q);
    enqueue(c, q, "before");
    ck_assert_msg(cluster_fx_move_slot(&C, slot_of_queue(q), 2, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(keys_of(0, q), 0);
    /* the client still thinks master 0 has it: MOVED, then it follows */
    assert_job(c, q, "before");
    enqueue(c, q, "after");
    ck_assert_int_gt(keys_of(2, q), 0);
    ck_assert_int_eq(keys_of(0, q), 0);
    dq_close(c);
}
END_TEST

/* Set slot `slot` migrating from master `from` to master `to`. */
static void start_migration(int slot, int from, int to)
{
    ck_assert_int_eq(cluster_fx_int(&C, to, "CLUSTER SETSLOT %d IMPORTING %s", slot, C.id[from]),
                     0);
    ck_assert_int_eq(cluster_fx_int(&C, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, C.id[to]),
                     0);
}

/* MIGRATE every key of `queue` from master `from` to master `to`; the
 * number moved. */
static int migrate_keys(const char *queue, int from, int to, int max)
{
    redisReply *r = cluster_fx_cmd(&C, from, "KEYS dq:{%s}*", queue);
    ck_assert_ptr_nonnull(r);
    int moved = 0;
    for (size_t i = 0; i < r->elements && moved < max; i++, moved++) {
        redisReply *m = cluster_fx_cmd(&C, from, "MIGRATE 127.0.0.1 %d %s 0 5000",
                                       C.port[to], r->element[i]->str);
        ck_assert_ptr_nonnull(m);
        ck_assert_msg(m->type == REDIS_REPLY_STATUS, "MIGRATE: %s", m->str);
        freeReplyObject(m);
    }
    freeReplyObject(r);
    return moved;
}

static void finish_migration(int slot, int to)
{
    for (int m = 0; m < 3; m++)
        ck_assert_int_eq(cluster_fx_int(&C, m, "CLUSTER SETSLOT %d NODE %s", slot, C.id[to]), 0);
}

/* How many ASKING commands node `idx` has run. */
static long long asking_calls(int idx)
{
    redisReply *r = cluster_fx_cmd(&C, idx, "INFO commandstats");
    ck_assert_ptr_nonnull(r);
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_asking:calls=") : NULL;
    long long n = p ? atoll(p + strlen("cmdstat_asking:calls=")) : 0;
    freeReplyObject(r);
    return n;
}

/* The registry's key moved but its slot still migrating: the old master
 * answers ASK, the client sends ASKING and the command to the new one,
 * and its map does not change. */
START_TEST(ask_during_a_migration)
{
    dq_client *c = connect_with(NULL, 0);
    char q[32];
    queue_on(0, q, sizeof q);
    enqueue(c, q, "a");
    int slot = (int)cluster_fx_int(&C, 0, "CLUSTER KEYSLOT dq:queues");
    int from = cluster_fx_master_of_slot(&C, slot), to = (from + 1) % 3;
    ck_assert_int_ge(from, 0);
    start_migration(slot, from, to);
    redisReply *r = cluster_fx_cmd(&C, from, "MIGRATE 127.0.0.1 %d dq:queues 0 5000",
                                   C.port[to]);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "MIGRATE: %s", r ? r->str : "-");
    freeReplyObject(r);
    long long asked = asking_calls(to);
    char **names;
    size_t n;
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(dq_queues(c, &names, &n) == DQ_OK, "%s", dq_errmsg(c));
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(names[0], q);
        dq_strv_free(names, n);
        ck_assert_int_eq(asking_calls(to), asked + i + 1); /* asked each time */
    }
    finish_migration(slot, to);
    ck_assert_int_eq(dq_queues(c, &names, &n), DQ_OK); /* MOVED now */
    dq_strv_free(names, n);
    ck_assert_int_eq(asking_calls(to), asked + 2);
    dq_close(c);
}
END_TEST

/* A queue's keys half moved: the old master answers TRYAGAIN to the
 * script (its keys are on both sides; and once all are moved, the new one
 * answers TRYAGAIN after ASKING, as the script's empty sets exist on
 * neither): the client backs off until the migration ends (finished by a
 * child 300 ms later), then follows MOVED. */
START_TEST(tryagain_while_keys_are_half_moved)
{
    dq_client *c = connect_with(NULL, 0);
    char q[32];
    queue_on(0, q, sizeof q);
    enqueue(c, q, "a");
    enqueue(c, q, "b");
    int slot = slot_of_queue(q);
    start_migration(slot, 0, 2);
    ck_assert_int_eq(migrate_keys(q, 0, 2, 1), 1);
    ck_assert_int_gt(keys_of(0, q), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        usleep(300000);
        migrate_keys(q, 0, 2, 1000);
        finish_migration(slot, 2);
        _exit(0);
    }
    assert_job(c, q, "a");
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(keys_of(0, q), 0);
    ck_assert_int_eq(dq_cancel(c, q, "b"), DQ_OK);
    dq_close(c);
}
END_TEST

/* A master killed: the client (connected before, and with its connection
 * to that master open) follows the promoted replica without a new
 * dq_connect.  The jobs were written with replicated durability: a WAIT
 * per master confirmed each. */
START_TEST(a_killed_master_is_followed)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.durability = DQ_DURABILITY_REPLICATED;
    dq_client *w = connect_with(&opt, 6);
    opt.durability = DQ_DURABILITY_LOCAL;
    opt.connect_timeout_ms = 20000;
    dq_client *c = connect_with(&opt, 6);
    char q[3][32];
    job_on_every_master(w, c, q, "kept");
    dq_close(w);
    cluster_fx_kill(&C, 0);
    int64_t killed = tu_mono_ms();
    assert_job(c, q[0], "kept");    /* waits for the promotion */
    printf("cluster failover: the client followed %lld ms after the kill\n",
           (long long)(tu_mono_ms() - killed));
    enqueue(c, q[0], "new");
    assert_job(c, q[1], "kept");
    int promoted = cluster_fx_wait_promoted(&C, 0, 20000);
    ck_assert_int_ge(promoted, 3);
    ck_assert_int_gt(keys_of(promoted, q[0]), 0);
    dq_close(c);
}
END_TEST

/* ---- credentials and TLS --------------------------------------------------- */

START_TEST(acl_user_on_every_master)
{
    struct cluster_fx_opts o = { .user = "jobs", .password = "s3cret" };
    start(&o);
    dq_options opt;
    dq_options_init(&opt);
    opt.user = "jobs";
    opt.password = "s3cret";
    dq_client *c = connect_with(&opt, 0);
    char q[3][32];
    job_on_every_master(c, c, q, "a");
    dq_close(c);
    opt.password = "wrong";
    opt.cluster = 1;
    opt.port = C.port[0];
    char err[512];
    dq_status st;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_AUTH);
}
END_TEST

/* The test certificates (tests/tls-certs.sh) in a new directory. */
static void make_certs(char *dir, size_t len)
{
    char err[256], cmd[1024];
    ck_assert_msg(tu_make_temp_dir("dq-ccerts", dir, len, err, sizeof err) == 0, "%s", err);
    snprintf(cmd, sizeof cmd, "sh '%s' '%s' >/dev/null", TLS_CERTS_SCRIPT, dir);
    ck_assert_msg(system(cmd) == 0, "making the test certificates failed: %s", cmd);
}

START_TEST(tls_cluster)
{
    char certs[200];
    make_certs(certs, sizeof certs);
    struct cluster_fx_opts o = { .tls_dir = certs };
    start(&o);
    char ca[300];
    snprintf(ca, sizeof ca, "%s/ca.crt", certs);
    dq_options opt;
    dq_options_init(&opt);
    opt.tls.enable = 1;
    opt.tls.ca_file = ca;
    dq_client *c = connect_with(&opt, 0);
    char q[3][32];
    job_on_every_master(c, c, q, "a");
    dq_close(c);
    struct run_result *r = CLI_HOW(&(struct cli_run){ .no_socket = true }, "--cluster",
                                   "-p", port0, "--tls", "--cacert", ca, "stats");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, q[2]), "%s", r->out);
    tu_remove_tree(certs);
}
END_TEST

int main(void)
{
    char why[256];
    if (cluster_fx_available(why, sizeof why) < 0) {
        printf("skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("cluster_client");
    TCase *tc = fixture_tcase(s, "routing", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, jobs_of_queues_on_every_master);
    tcase_add_test(tc, scripts_and_connections_per_master);
    tcase_add_test(tc, enqueue_many_is_split_per_master);
    tcase_add_test(tc, cli_over_the_cluster);
    tcase_add_test(tc, bad_seeds_are_one_line_errors);
    tc = fixture_tcase(s, "redirections", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, moved_after_a_slot_moved);
    tcase_add_test(tc, ask_during_a_migration);
    tcase_add_test(tc, tryagain_while_keys_are_half_moved);
    tcase_add_test(tc, a_killed_master_is_followed);
    tc = fixture_tcase(s, "credentials", 120, NULL, NULL, NULL, teardown);
    tcase_add_test(tc, acl_user_on_every_master);
    tcase_add_test(tc, tls_cluster);
    return fixture_run_suite(s);
}
