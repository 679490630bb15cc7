/*
 * delayqd on a Redis Cluster (redis.cluster = true): three masters with a
 * replica each (tests/cluster_fixture.c), one unpartitioned queue (all its
 * keys in one slot).  The daemon's connections route by slot to the
 * queue's master and must follow the cluster without a restart: jobs
 * drain exactly once; the queue's slot moved to another master mid-run
 * (MOVED and ASK followed) loses and repeats nothing; its master killed
 * with kill -9 and the replica promoted, every job still runs (at least
 * once: writes the replica had not received when the master died may be
 * done again, which the test counts and prints).
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "daemon_harness.h"
#include "redis/cluster_map.h"

static struct harness H;
static struct cluster_fx C;
static int queue_slot;          /* the slot of {orders} */

static const struct cluster_fx_opts acl = { .password = "pw-for-test", .user = "dq" };
static const struct cluster_fx_opts *opts;   /* the cluster's: NULL or &acl */

static void start(const struct cluster_fx_opts *o, int replicas)
{
    opts = o;
    h_setup(&H);
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, 3, replicas, o, err, sizeof err) == 0, "%s", err);
    queue_slot = (int)cluster_keyslot("{" H_QUEUE "}", strlen(H_QUEUE) + 2);
}

static void setup(void)
{
    start(NULL, 1);
}

static void setup_acl(void)
{
    /* Two replicas each, so that a promoted master still has one to
     * confirm its writes. */
    start(&acl, 2);
}

static void teardown(void)
{
    if (H.pid > 0)
        h_stop(&H, 5000);
    cluster_fx_stop(&C);
    h_teardown(&H);
}

/* The daemon's configuration: cluster mode, every node a seed, the first
 * one the queue's master or (queue_first 0) a master that does not serve
 * the queue, so that routing is what finds it.  The subscriptions are
 * made on the first seed. */
static void write_conf(struct h_conf *hc, char *redis, size_t len, int queue_first)
{
    int m = cluster_fx_master_of_slot(&C, queue_slot);
    int first = queue_first ? m : -1;
    for (int i = 0; i < C.nmasters && first < 0; i++)
        if (i != m)
            first = i;
    int n = snprintf(redis, len, "cluster = true; command_timeout = \"2s\"; ");
    if (opts)
        n += snprintf(redis + n, len - (size_t)n, "user = \"%s\"; password = \"%s\"; "
                      "durability = \"replicated\"; ", opts->user, opts->password);
    n += snprintf(redis + n, len - (size_t)n, "nodes = [\"%s\"", C.addr[first]);
    for (int i = 0; i < C.nnodes; i++)
        if (i != first)
            n += snprintf(redis + n, len - (size_t)n, ", \"%s\"", C.addr[i]);
    snprintf(redis + n, len - (size_t)n, "];");
    h_conf_defaults(hc);
    hc->redis = redis;
    h_write_conf(&H, hc);
}

/*
 * A plain client on the queue's master, enqueueing there.  The library's
 * enqueue also adds the queue to the registry (prefix:queues, a slot of
 * its own), so that slot is moved to the same master first.
 */
static dq_client *queue_master_client(void)
{
    int m = cluster_fx_master_of_slot(&C, queue_slot);
    ck_assert_int_ge(m, 0);
    char err[400];
    int reg = (int)cluster_keyslot("dq:queues", 9);
    ck_assert_msg(cluster_fx_move_slot(&C, reg, m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cluster_fx_wait_ok(&C, 10000), 0);
    dq_options opt;
    dq_options_init(&opt);
    opt.host = "127.0.0.1";
    opt.port = C.port[m];
    if (opts) {
        opt.user = opts->user;
        opt.password = opts->password;
    }
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect %s: %s", C.addr[m], err);
    return c;
}

/* Start delayqd; it is ready when it says so (h_start's check reads the
 * clients of the harness's own server, which the daemon does not use). */
static void start_daemon(void)
{
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", H.conf, NULL };
    char err[300];
    H.pid = tu_spawn(argv, H.log, 0, err, sizeof err);
    ck_assert_msg(H.pid > 0, "%s", err);
    ck_assert_msg(h_wait_log(&H, "ready: every worker", 1, 15000) == 1,
                  "delayqd did not get ready; its log:\n%s", h_log_tail(&H));
}

/* Enqueue PREFIX-0 .. n-1, due over `spread_ms`. */
static void enqueue_spread(dq_client *c, const char *prefix, int n, int spread_ms)
{
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                               .payload_len = 2,
                               .delay_ms = spread_ms ? (int64_t)i * spread_ms / n : 0 };
        ck_assert_msg(dq_enqueue(c, &req, NULL) == DQ_OK, "enqueue %s: %s", id,
                      dq_errmsg(c));
    }
}

/* Jobs PREFIX-0 .. n-1 that ended 0 times, more than once, and (in
 * *retried) at an attempt above 1. */
struct tally {
    int lost, duplicated, retried;
};

static struct tally tally_of(const char *prefix, int n)
{
    struct tally t = { 0, 0, 0 };
    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        struct h_run first;
        int ends = h_count(runs, nruns, id, 1, &first);
        t.lost += ends == 0;
        t.duplicated += ends > 1;
        t.retried += ends >= 1 && first.attempt > 1;
    }
    free(runs);
    return t;
}

/* Wait until every job PREFIX-0..n-1 has ended once; the first that did
 * not, or NULL. */
static const char *all_recorded(const char *prefix, int n, int timeout_ms)
{
    static char id[64];
    int64_t end = tu_mono_ms() + timeout_ms;
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        int left = (int)(end - tu_mono_ms());
        if (h_wait_record(&H, id, 1, 1, left > 0 ? left : 1) != 1)
            return id;
    }
    return NULL;
}

START_TEST(jobs_drain_exactly_once_on_a_cluster)
{
    struct h_conf hc;
    char redis[1024];
    write_conf(&hc, redis, sizeof redis, 0);
    dq_client *c = queue_master_client();
    start_daemon();
    enum { N = 300 };
    enqueue_spread(c, "job", N, 1000);
    const char *missing = all_recorded("job", N, 20000);
    ck_assert_msg(!missing, "%s did not run; log:\n%s", missing, h_log_tail(&H));
    struct tally t = tally_of("job", N);
    ck_assert_msg(t.lost == 0 && t.duplicated == 0, "lost %d, duplicated %d; log:\n%s",
                  t.lost, t.duplicated, h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "redis error") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "cluster_state") == 0, "log:\n%s", h_log_tail(&H));
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

START_TEST(the_queue_slot_moved_mid_run_loses_and_repeats_nothing)
{
    struct h_conf hc;
    char redis[1024];
    write_conf(&hc, redis, sizeof redis, 0);
    dq_client *c = queue_master_client();
    int from = cluster_fx_master_of_slot(&C, queue_slot);
    int to = (from + 1) % C.nmasters;
    start_daemon();
    enum { N = 600 };
    enqueue_spread(c, "mv", N, 3000);
    dq_close(c);
    ck_assert_msg(h_wait_record(&H, "mv-60", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    /* Mid-run: the keys move (ASK and TRYAGAIN while they do), then the
     * slot (MOVED). */
    char err[400];
    int64_t t0 = tu_mono_ms();
    ck_assert_msg(cluster_fx_move_slot(&C, queue_slot, to, err, sizeof err) == 0, "%s", err);
    int64_t t1 = tu_mono_ms();
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, queue_slot), to);
    const char *missing = all_recorded("mv", N, 20000);
    ck_assert_msg(!missing, "%s did not run; log:\n%s", missing, h_log_tail(&H));
    int64_t t2 = tu_mono_ms();
    struct tally t = tally_of("mv", N);
    printf("slot moved mid-run: migration %lld ms, every job done %lld ms after it; "
           "lost %d, duplicated %d, retried %d of %d\n", (long long)(t1 - t0),
           (long long)(t2 - t1), t.lost, t.duplicated, t.retried, N);
    ck_assert_msg(t.lost == 0 && t.duplicated == 0, "lost %d, duplicated %d; log:\n%s",
                  t.lost, t.duplicated, h_log_tail(&H));
    /* Each connection that used the slot was told MOVED, once. */
    char moved[64];
    snprintf(moved, sizeof moved, "slot %d moved to %s", queue_slot, C.addr[to]);
    ck_assert_msg(h_log_count(&H, moved) >= 1, "log:\n%s", h_log_tail(&H));
    /* The queue lives on the new master only, with nothing left. */
    ck_assert_int_eq(cluster_fx_keys_on(&C, from, "*{" H_QUEUE "}*"), 0);
    ck_assert_msg(h_log_count(&H, "redis error") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/*
 * The queue's slot half-way through a migration, held there: the keys
 * moved one by one (a script that finds some of its keys gone meets
 * TRYAGAIN), then all on the target while the source still owns the slot
 * (ASK, and there TRYAGAIN again for a script some of whose keys do not
 * exist), for `hold_ms`; then the slot handed over (MOVED).
 */
static void migrate_slowly(int from, int to, int hold_ms)
{
    redisReply *r = cluster_fx_cmd(&C, to, "CLUSTER SETSLOT %d IMPORTING %s", queue_slot,
                                   C.id[from]);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "IMPORTING");
    freeReplyObject(r);
    r = cluster_fx_cmd(&C, from, "CLUSTER SETSLOT %d MIGRATING %s", queue_slot, C.id[to]);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "MIGRATING");
    freeReplyObject(r);
    redisReply *keys = cluster_fx_cmd(&C, from, "CLUSTER GETKEYSINSLOT %d 1000", queue_slot);
    ck_assert(keys && keys->type == REDIS_REPLY_ARRAY && keys->elements > 0);
    for (size_t i = 0; i < keys->elements; i++) {
        r = cluster_fx_cmd(&C, from, "MIGRATE 127.0.0.1 %d %s 0 10000", C.port[to],
                           keys->element[i]->str);
        ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "MIGRATE %s: %s",
                      keys->element[i]->str, r && r->str ? r->str : "no reply");
        freeReplyObject(r);
        tu_sleep_ms(50);
    }
    freeReplyObject(keys);
    tu_sleep_ms(hold_ms);
    char err[400];
    ck_assert_msg(cluster_fx_move_slot(&C, queue_slot, to, err, sizeof err) == 0, "%s", err);
}

START_TEST(a_migration_held_half_way_is_followed_with_ask_and_tryagain)
{
    struct h_conf hc;
    char redis[1024];
    write_conf(&hc, redis, sizeof redis, 0);
    hc.log_level = "debug";
    /* Leases outlast the hold: an ack held up by the migration then
     * still finds its lease, so a job that ran twice would be a fault.
     * (With a lease shorter than the hold, a job whose ack waits out its
     * lease may run again, as at-least-once allows.) */
    hc.lease = "10s";
    h_write_conf(&H, &hc);
    dq_client *c = queue_master_client();
    int from = cluster_fx_master_of_slot(&C, queue_slot);
    int to = (from + 1) % C.nmasters;
    start_daemon();
    enum { N = 600 };
    enqueue_spread(c, "ask", N, 4000);
    dq_close(c);
    ck_assert_msg(h_wait_record(&H, "ask-60", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    /* Held longer than the command timeout (2 s): the requests waiting
     * for it fail, the connections go down and come up again, and the
     * callers send again. */
    migrate_slowly(from, to, 3000);
    const char *missing = all_recorded("ask", N, 30000);
    ck_assert_msg(!missing, "%s did not run; log:\n%s", missing, h_log_tail(&H));
    struct tally t = tally_of("ask", N);
    int asks = h_log_count(&H, "connection): ASK ");
    int tryagains = h_log_count(&H, "connection): TRYAGAIN");
    int expired = h_log_count(&H, "expired lease");
    printf("migration held half-way: %d ASK, %d TRYAGAIN followed; lost %d, duplicated %d, "
           "retried %d of %d; %d expired-lease line(s)\n", asks, tryagains, t.lost,
           t.duplicated, t.retried, N, expired);
    fflush(stdout);
    ck_assert_msg(t.lost == 0 && t.duplicated == 0, "lost %d, duplicated %d; log:\n%s",
                  t.lost, t.duplicated, h_log_tail(&H));
    ck_assert_msg(asks >= 1, "no ASK met; log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "not served within the command timeout") >= 1
                  && h_log_count(&H, "still redirected") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "redis error") == 0, "log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* The replica of the queue's master has every write the master had. */
static int replica_caught_up(void *arg)
{
    int m = *(int *)arg;
    redisReply *r = cluster_fx_cmd(&C, m, "INFO replication");
    long long master = -1, replica = -2;
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "master_repl_offset:");
        const char *s = strstr(r->str, "slave0:");
        const char *o = s ? strstr(s, "offset=") : NULL;
        if (p)
            master = atoll(p + strlen("master_repl_offset:"));
        if (o)
            replica = atoll(o + strlen("offset="));
    }
    if (r)
        freeReplyObject(r);
    return master == replica;
}

START_TEST(the_queue_master_killed_the_daemon_follows_the_promoted_replica)
{
    struct h_conf hc;
    char redis[1024];
    write_conf(&hc, redis, sizeof redis, 1);
    dq_client *c = queue_master_client();
    int m = cluster_fx_master_of_slot(&C, queue_slot);
    start_daemon();
    enum { N = 400 };
    enqueue_spread(c, "fo", N, 4000);
    dq_close(c);
    ck_assert_msg(h_wait(5000, replica_caught_up, &m) == 1, "the replica did not catch up");
    ck_assert_msg(h_wait_record(&H, "fo-40", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    pid_t daemon = H.pid;
    int64_t t0 = tu_mono_ms();
    cluster_fx_kill(&C, m);
    int promoted = cluster_fx_wait_promoted(&C, m, 20000);
    ck_assert_msg(promoted >= 0, "no replica promoted");
    int64_t t1 = tu_mono_ms();
    /* Both workers' command connections back (the log says so once). */
    int ups = h_wait_log(&H, "(cmd connection): up again", hc.workers, 10000);
    int64_t t_up = tu_mono_ms();
    ck_assert_msg(ups >= hc.workers, "log:\n%s", h_log_tail(&H));
    const char *missing = all_recorded("fo", N, 30000);
    ck_assert_msg(!missing, "%s did not run; log:\n%s", missing, h_log_tail(&H));
    int64_t t2 = tu_mono_ms();
    struct tally t = tally_of("fo", N);
    int outages = h_log_count(&H, "following the cluster");
    int recovered = h_log_count(&H, "up again");
    printf("master killed: replica promoted after %lld ms (as the fixture saw it), the "
           "workers up again %lld ms after that, every job done %lld ms after that; lost "
           "%d, ran twice %d, retried %d of %d; %d outage line(s), %d recovery line(s)\n",
           (long long)(t1 - t0), (long long)(t_up - t1), (long long)(t2 - t1), t.lost,
           t.duplicated, t.retried, N, outages, recovered);
    ck_assert_msg(t.lost == 0, "lost %d; log:\n%s", t.lost, h_log_tail(&H));
    /* Followed without a restart: the same daemon, its connections back,
     * the subscriptions (made on the killed master, the first seed) too:
     * an idle worker sleeps up to a minute, so a job enqueued now runs at
     * once only if its wake message reaches it. */
    ck_assert_int_eq(H.pid, daemon);
    ck_assert(tu_process_running(daemon));
    /* Each connection's outage logged once when it starts (by the routing
     * connection: its nodes' own attempts are not logged) and once when it
     * ends. */
    ck_assert_msg(outages >= 1 && h_log_count(&H, "; reconnecting") == 0, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait_log(&H, "up again", outages, 10000) >= outages, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_msg(h_wait_log(&H, "(sub connection): up again, subscribed on", 1, 10000) >= 1,
                  "log:\n%s", h_log_tail(&H));
    tu_sleep_ms(500);
    dq_options opt;
    dq_options_init(&opt);
    opt.host = "127.0.0.1";
    opt.port = C.port[promoted];
    if (opts) {
        opt.user = opts->user;
        opt.password = opts->password;
    }
    char err[400];
    c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect %s: %s", C.addr[promoted], err);
    int64_t t3 = tu_mono_ms();
    enqueue_spread(c, "woken", 1, 0);
    dq_close(c);
    ck_assert_msg(h_wait_record(&H, "woken-0", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    printf("after the failover, a job enqueued on an idle daemon ran after %lld ms\n",
           (long long)(tu_mono_ms() - t3));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* The start-up check and the routing connection name a seed that is not a
 * cluster node, once each. */
START_TEST(a_seed_that_is_not_a_cluster_node_is_named)
{
    int port = fixture_redis_listen_tcp(&H.fx);
    struct h_conf hc;
    char redis[256];
    snprintf(redis, sizeof redis, "cluster = true; nodes = [\"127.0.0.1:%d\"];", port);
    h_conf_defaults(&hc);
    hc.redis = redis;
    h_write_conf(&H, &hc);
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", H.conf, NULL };
    char err[300];
    H.pid = tu_spawn(argv, H.log, 0, err, sizeof err);
    ck_assert_msg(H.pid > 0, "%s", err);
    char check[128];
    snprintf(check, sizeof check, "redis cluster 127.0.0.1:%d: CLUSTER INFO failed", port);
    ck_assert_msg(h_wait_log(&H, check, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_wait_log(&H, "(cmd connection): cannot read the slot map", 2, 10000) >= 2,
                  "log:\n%s", h_log_tail(&H));
    tu_sleep_ms(1500);  /* several more map reads, still one line each */
    ck_assert_int_eq(h_log_count(&H, "(cmd connection): cannot read the slot map"), 2);
    ck_assert_int_eq(h_log_count(&H, "ready: every worker"), 0);
    h_stop(&H, 10000);
}
END_TEST

int main(void)
{
    char why[300];
    if (cluster_fx_available(why, sizeof why) < 0) {
        printf("check_rcluster: skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("rcluster");
    TCase *tc = fixture_tcase(s, "rcluster", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, jobs_drain_exactly_once_on_a_cluster);
    tcase_add_test(tc, a_seed_that_is_not_a_cluster_node_is_named);
    tcase_add_test(tc, the_queue_slot_moved_mid_run_loses_and_repeats_nothing);
    tcase_add_test(tc, a_migration_held_half_way_is_followed_with_ask_and_tryagain);
    tcase_add_test(tc, the_queue_master_killed_the_daemon_follows_the_promoted_replica);
    /* The same with an ACL user (every node connection and every map read
     * authenticates) and durability "replicated" (each write waits for a
     * replica of its own master). */
    TCase *acl_tc = fixture_tcase(s, "rcluster_acl_replicated", 120, NULL, NULL, setup_acl,
                                  teardown);
    tcase_add_test(acl_tc, jobs_drain_exactly_once_on_a_cluster);
    tcase_add_test(acl_tc, the_queue_master_killed_the_daemon_follows_the_promoted_replica);
    return fixture_run_suite(s);
}
