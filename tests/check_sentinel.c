/*
 * Redis behind Sentinel, with real servers on loopback: a master (the
 * harness's fixture, given a TCP port), a replica, and three sentinels
 * (redis-server FILE --sentinel) monitoring them as "jobs", all in the
 * test's directory and stopped by pid.
 *
 * The library and the command line find the master through the sentinels
 * (also when the first listed is down) and follow a failover; a 5,000-job
 * run of delayqd with 4 workers survives a kill -9 of the master, the
 * sentinels promoting the replica: the daemon follows without a restart,
 * and the test counts the jobs lost (never ran) and run twice, and the gap
 * without claims; a second run does the same with redis.durability =
 * "replicated" (and min-replicas-to-write 1), where no job whose enqueue
 * returned OK may be lost and none may run twice
 * (DELAYQ_SENTINEL_DURABILITY=replicated makes the first run replicated
 * too); DELAYQ_SENTINEL_JOBS
 * changes the number of jobs.
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "daemon_harness.h"
#include "testutil.h"

#define MASTER_NAME "jobs"
#define NSENTINELS 3

static struct harness H;        /* its fixture is the first master */
static struct redis_fixture B;  /* the replica the sentinels promote */
static int port_a, port_b;
static int sentinel_port[NSENTINELS];
static pid_t sentinel_pid[NSENTINELS];
static char nodes_text[256];    /* "127.0.0.1:P1,127.0.0.1:P2,..." */

/* ---- servers --------------------------------------------------------------- */

/* A raw connection to 127.0.0.1:port, or NULL. */
static redisContext *tcp_connect(int port)
{
    struct timeval tv = { 2, 0 };
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (rc && rc->err) {
        redisFree(rc);
        return NULL;
    }
    if (rc)
        redisSetTimeout(rc, tv);
    return rc;
}

/* The reply to a command on 127.0.0.1:port; NULL when it cannot be asked. */
static redisReply *ask(int port, const char *cmd)
{
    redisContext *rc = tcp_connect(port);
    if (!rc)
        return NULL;
    redisReply *r = redisCommand(rc, cmd);
    redisFree(rc);
    return r;
}

/* The length of the array reply to `cmd` at `port`, or -1. */
static long long ask_len(int port, const char *cmd)
{
    redisReply *r = ask(port, cmd);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* The port of the master that sentinel `i` names, or -1. */
static int master_port_at(int i)
{
    redisReply *r = ask(sentinel_port[i], "SENTINEL get-master-addr-by-name " MASTER_NAME);
    int port = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                   ? atoi(r->element[1]->str) : -1;
    if (r)
        freeReplyObject(r);
    return port;
}

/* Give `f` a TCP port on loopback (replication and the sentinels need
 * one). */
static int listen_tcp(const struct redis_fixture *f)
{
    int port = fixture_redis_listen_tcp(f);
    ck_assert_int_eq(fixture_redis_int(f, "CONFIG SET repl-diskless-sync-delay 0"), 0);
    return port;
}

/* Start sentinel `i` on a free port, monitoring the master at port_a. */
static int start_sentinel(const char *dir, int i, char *err, size_t errlen)
{
    char conf[300], log[300], server[PATH_MAX];
    sentinel_port[i] = fixture_free_port();
    snprintf(conf, sizeof conf, "%s/sentinel-%d.conf", dir, i);
    snprintf(log, sizeof log, "%s/sentinel-%d.log", dir, i);
    char text[2048];
    snprintf(text, sizeof text,
             "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"
             "sentinel monitor " MASTER_NAME " 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds " MASTER_NAME " 1000\n"
             "sentinel failover-timeout " MASTER_NAME " 5000\n"
             "sentinel parallel-syncs " MASTER_NAME " 1\n",
             sentinel_port[i], dir, log, port_a);
    h_write_file(conf, text);
    if (tu_redis_find(NULL, server, sizeof server) < 0) {
        snprintf(err, errlen, "no redis-server");
        return -1;
    }
    char *const argv[] = { server, conf, "--sentinel", NULL };
    sentinel_pid[i] = tu_spawn(argv, NULL, 0, err, errlen);
    if (sentinel_pid[i] < 0)
        return -1;
    for (int t = 0; t < 500; t++) {
        redisReply *r = ask(sentinel_port[i], "PING");
        int up = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (up)
            return 0;
        if (!tu_process_running(sentinel_pid[i]))
            break;
        tu_sleep_ms(10);
    }
    snprintf(err, errlen, "sentinel %d did not answer (see its sentinel-%d.log)", i, i);
    return -1;
}

/* Every sentinel knows the replica and the other sentinels: a failover
 * can be voted. */
static int sentinels_ready(void *arg)
{
    (void)arg;
    for (int i = 0; i < NSENTINELS; i++)
        if (ask_len(sentinel_port[i], "SENTINEL replicas " MASTER_NAME) < 1
            || ask_len(sentinel_port[i], "SENTINEL sentinels " MASTER_NAME) < NSENTINELS - 1)
            return 0;
    return 1;
}

static int replica_link_up(void *arg)
{
    redisReply *r = ask(*(int *)arg, "INFO replication");
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r)
        freeReplyObject(r);
    return up;
}

static void setup(void)
{
    h_setup(&H);
    fixture_redis_start(&B);
    port_a = listen_tcp(&H.fx);
    port_b = listen_tcp(&B);
    ck_assert_int_eq(fixture_redis_int(&B, "REPLICAOF 127.0.0.1 %d", port_a), 0);
    ck_assert_msg(h_wait(10000, replica_link_up, &port_b) == 1, "the replica did not sync");
    char err[300];
    size_t n = 0;
    for (int i = 0; i < NSENTINELS; i++) {
        ck_assert_msg(start_sentinel(H.fx.dir, i, err, sizeof err) == 0, "%s", err);
        n += (size_t)snprintf(nodes_text + n, sizeof nodes_text - n, "%s127.0.0.1:%d",
                              i ? "," : "", sentinel_port[i]);
    }
    ck_assert_msg(h_wait(20000, sentinels_ready, NULL) == 1,
                  "the sentinels did not find the replica and each other");
}

static void teardown(void)
{
    for (int i = 0; i < NSENTINELS; i++)
        if (sentinel_pid[i] > 0)
            tu_stop_process(sentinel_pid[i], 5000);
    fixture_redis_stop(&B);
    h_teardown(&H);
}

/* Every running sentinel names the replica as master. */
static int b_promoted(void *arg)
{
    (void)arg;
    for (int i = 0; i < NSENTINELS; i++)
        if (sentinel_pid[i] > 0 && master_port_at(i) != port_b)
            return 0;
    return 1;
}

static void kill_master(void)
{
    ck_assert_int_eq(kill(H.fx.pid, SIGKILL), 0);
    waitpid(H.fx.pid, NULL, 0);
}

/* The old master back, empty, on its port, as a replica of the new one
 * (the sentinels would make it one too, but only at their next INFO of
 * it, up to 10 s later: durability "replicated" writes nothing until a
 * replica is back). */
static void restart_old_master(void)
{
    H.fx.pid = 0;
    fixture_redis_restart(&H.fx);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "CONFIG SET port %d", port_a), 0);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "CONFIG SET repl-diskless-sync-delay 0"), 0);
    ck_assert_int_eq(fixture_redis_int(&H.fx, "REPLICAOF 127.0.0.1 %d", port_b), 0);
}

/* ---- the library and the command line -------------------------------------- */

/* Options that reach the master through the sentinels `nodes`. */
static void sentinel_options(dq_options *opt, const char *const *nodes, size_t n,
                             int connect_timeout_ms)
{
    dq_options_init(opt);
    opt->sentinel.master = MASTER_NAME;
    opt->sentinel.nodes = nodes;
    opt->sentinel.nnodes = n;
    opt->connect_timeout_ms = connect_timeout_ms;
}

static void enqueue_on(dq_client *c, const char *id)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                           .payload_len = 2, .delay_ms = 60000 };
    ck_assert_msg(dq_enqueue(c, &req, NULL) == DQ_OK, "enqueue %s: %s", id, dq_errmsg(c));
}

/* Enqueue `id` on a client whose connection a failover may have broken
 * (a dead master, or one the sentinels demoted: they kill its clients):
 * the call on the broken connection fails (it may have run: not sent
 * again), the next waits for the sentinels' new master. */
static void enqueue_following(dq_client *c, const char *id, int64_t delay_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                           .payload_len = 2, .delay_ms = delay_ms };
    dq_status st = dq_enqueue(c, &req, NULL);
    if (st != DQ_OK) {
        ck_assert_msg(st == DQ_ERR_CONNECT, "%s: %s", id, dq_errmsg(c));
        st = dq_enqueue(c, &req, NULL);
    }
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s", id, dq_errmsg(c));
}

START_TEST(client_finds_the_master_and_follows_a_failover)
{
    char dead[32], s[NSENTINELS][32];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", fixture_free_port());
    const char *nodes[NSENTINELS + 1] = { dead };
    for (int i = 0; i < NSENTINELS; i++) {
        snprintf(s[i], sizeof s[i], "127.0.0.1:%d", sentinel_port[i]);
        nodes[i + 1] = s[i];
    }
    dq_options opt;
    sentinel_options(&opt, nodes, NSENTINELS + 1, 20000);
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect through the sentinels: %s", err);
    enqueue_on(c, "before");
    ck_assert_int_eq(fixture_record_count(&H.fx, H_QUEUE), 1);
    /* The write is on the replica too before the master dies. */
    ck_assert_int_eq(fixture_redis_int(&H.fx, "WAIT 1 5000"), 1);
    int64_t t0 = tu_mono_ms();
    kill_master();
    /* The same client follows. */
    enqueue_following(c, "after", 60000);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_int_eq(fixture_record_count(&B, H_QUEUE), 2);
    printf("sentinel: the client's first call after kill -9 of the master took %lld ms\n",
           (long long)took);
    dq_close(c);

    /* A master name the sentinels do not know: one line, DQ_ERR_CONNECT. */
    opt.sentinel.master = "nope";
    opt.connect_timeout_ms = 300;
    dq_status st;
    ck_assert(dq_connect(&opt, err, sizeof err, &st) == NULL);
    ck_assert_int_eq(st, DQ_ERR_CONNECT);
    ck_assert_msg(strstr(err, "does not know master 'nope'"), "%s", err);
}
END_TEST

START_TEST(cli_finds_the_master_through_the_sentinels)
{
    char list[300];
    snprintf(list, sizeof list, "127.0.0.1:%d,%s", fixture_free_port(), nodes_text);
    struct cli_run how = { .no_socket = true };
    struct run_result *r = CLI_HOW(&how, "--sentinel", list, "--master", MASTER_NAME, "add",
                                   "-q", H_QUEUE, "-t", "t", "-d", "1h", "x");
    assert_ok(r);
    ck_assert_int_eq(fixture_record_count(&H.fx, H_QUEUE), 1);
    /* From the -c file's redis.sentinel. */
    char conf[300], text[600];
    snprintf(conf, sizeof conf, "%s/cli.conf", H.fx.dir);
    snprintf(text, sizeof text,
             "redis = { sentinel = { master = \"" MASTER_NAME "\"; nodes = [ \"127.0.0.1:%d\","
             " \"127.0.0.1:%d\" ]; }; };\n", fixture_free_port(), sentinel_port[1]);
    h_write_file(conf, text);
    r = CLI_HOW(&how, "-c", conf, "add", "-q", H_QUEUE, "-t", "t", "-d", "1h", "y");
    assert_ok(r);
    ck_assert_int_eq(fixture_record_count(&H.fx, H_QUEUE), 2);
    /* Mistakes: one line each, usage or unavailable. */
    assert_fails(CLI_HOW(&how, "--sentinel", list, "stats"), 2, "--sentinel needs --master");
    assert_fails(CLI_HOW(&how, "--master", MASTER_NAME, "stats"), 2,
                 "--master needs --sentinel");
    assert_fails(CLI_HOW(&how, "--sentinel", "127.0.0.1:x", "--master", "m", "stats"), 2,
                 "bad sentinel '127.0.0.1:x'");
    assert_fails(CLI_HOW(&how, "--sentinel", list, "--master", "m", "-H", "h", "stats"), 2,
                 "cannot be used with -H");
    assert_fails(CLI_HOW(&how, "--sentinel", list, "--master", "nope", "--timeout", "200ms",
                         "stats"), 69, "does not know master 'nope'");
}
END_TEST

/* ---- the daemon through a failover ----------------------------------------- */

#define STRESS_WORKERS 4
#define STRESS_BATCH 50         /* jobs per dq_enqueue_many */
#define STRESS_PACE_MS 40       /* between two of them */
#define STRESS_DELAY_MS 1000    /* each job falls due this long after */

struct stress {
    int n;
    char (*ids)[24];
    unsigned char *accepted;    /* its enqueue returned OK (or EXISTS) */
    int kill_after_batches;
    int64_t t_kill, t_promoted; /* server-comparable ms; 0: not yet */
};

/* Once the sentinels promoted B, start the killed master again: they make
 * it B's replica (which durability "replicated" needs to write again). */
static void follow_failover(struct stress *s)
{
    if (s->t_kill && !s->t_promoted && b_promoted(NULL)) {
        s->t_promoted = tu_now_ms();
        restart_old_master();
    }
}

/* Enqueue batch `b`, sending again the jobs not taken (the failover, or a
 * write not replicated in time), for up to 30 s; the jobs whose enqueue
 * returned OK (or EXISTS: taken by an earlier try) are marked accepted. */
static void enqueue_batch(dq_client *c, struct stress *s, int b)
{
    dq_enqueue_req reqs[STRESS_BATCH];
    dq_status sts[STRESS_BATCH];
    int first = b * STRESS_BATCH;
    int n = s->n - first < STRESS_BATCH ? s->n - first : STRESS_BATCH;
    int64_t deadline = tu_mono_ms() + 30000;
    for (;;) {
        size_t k = 0;
        for (int i = 0; i < n; i++)
            if (!s->accepted[first + i])
                reqs[k++] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t",
                                              .id = s->ids[first + i], .payload = "ok",
                                              .payload_len = 2, .delay_ms = STRESS_DELAY_MS };
        if (k == 0)
            return;
        ck_assert_msg(tu_mono_ms() < deadline, "batch %d not taken: %s", b, dq_errmsg(c));
        if (dq_enqueue_many(c, reqs, k, NULL, sts) == DQ_OK)
            for (size_t i = 0; i < k; i++)
                if (sts[i] == DQ_OK || sts[i] == DQ_ERR_EXISTS)
                    s->accepted[atoi(reqs[i].id + 1)] = 1;
        follow_failover(s);
        if (tu_mono_ms() < deadline)
            tu_sleep_ms(k < (size_t)n ? 0 : 100);
    }
}

static int queue_idle(void *arg)
{
    dq_stats st;
    return dq_stats_get(arg, H_QUEUE, &st) == DQ_OK && st.delayed == 0 && st.due == 0
           && st.processing == 0;
}

/* The largest interval between two consecutive run starts after `from`
 * (ms): the gap without claims around the failover. */
static int64_t largest_gap(const struct h_run *runs, size_t n, int64_t from, int64_t *at)
{
    int64_t gap = 0, last = from;
    for (size_t i = 0; i < n; i++) {
        if (runs[i].end != 0 || runs[i].ms < from)
            continue;
        if (runs[i].ms - last > gap) {
            gap = runs[i].ms - last;
            *at = last;
        }
        last = runs[i].ms;
    }
    return gap;
}

/* Copy the daemon's log to `path` (DELAYQ_SENTINEL_LOG), to read after
 * the test's directory is gone; NULL: nothing. */
static void keep_log(const char *path)
{
    if (path)
        (void)tu_copy_file(H.log, path);
}

/*
 * The stress run under `durability` ("local" or "replicated"): counts
 * printed, and asserted as far as the durability promises.
 */
static void stress_failover(const char *durability)
{
    const char *env = getenv("DELAYQ_SENTINEL_JOBS");
    int replicated = strcmp(durability, "replicated") == 0;
    struct stress s = { .n = env && atoi(env) > 0 ? atoi(env) : 5000 };
    s.ids = calloc((size_t)s.n, sizeof *s.ids);
    s.accepted = calloc((size_t)s.n, 1);
    ck_assert(s.ids && s.accepted);
    for (int i = 0; i < s.n; i++)
        snprintf(s.ids[i], sizeof s.ids[i], "j%d", i);
    int nbatches = (s.n + STRESS_BATCH - 1) / STRESS_BATCH;
    s.kill_after_batches = nbatches * 2 / 5;
    if (replicated)
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(fixture_redis_int(i ? &B : &H.fx,
                                               "CONFIG SET min-replicas-to-write 1"), 0);

    char locks[300], handler[1024], redis[1024], durability_line[64] = "";
    snprintf(locks, sizeof locks, "%s/locks", H.fx.dir);
    ck_assert_int_eq(mkdir(locks, 0755), 0);
    snprintf(handler, sizeof handler,
             "{ type = \"*\"; file = \"testhandler.so\"; timeout = \"500ms\";\n"
             "  settings = { record = \"%s\"; lock_dir = \"%s\"; }; }", H.record, locks);
    snprintf(durability_line, sizeof durability_line, " durability = \"%s\";", durability);
    snprintf(redis, sizeof redis,
             "sentinel = { master = \"" MASTER_NAME "\"; nodes = [ \"127.0.0.1:%d\", "
             "\"127.0.0.1:%d\", \"127.0.0.1:%d\" ]; }; connect_timeout = \"2s\"; "
             "command_timeout = \"2s\";%s",
             sentinel_port[0], sentinel_port[1], sentinel_port[2], durability_line);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = STRESS_WORKERS;
    hc.batch = 16;
    hc.lease = "10s";       /* longer than the failover: dups come from it alone */
    hc.max_attempts = 10;
    hc.handlers = handler;
    hc.redis = redis;
    int metrics_port = fixture_free_port();
    char extra[128];
    snprintf(extra, sizeof extra, "metrics = { listen = \"127.0.0.1:%d\"; };\n",
             metrics_port);
    hc.extra = extra;
    h_write_conf(&H, &hc);
    h_start(&H, STRESS_WORKERS);

    char nodes_a[NSENTINELS][32];
    const char *nodes[NSENTINELS];
    for (int i = 0; i < NSENTINELS; i++) {
        snprintf(nodes_a[i], sizeof nodes_a[i], "127.0.0.1:%d", sentinel_port[i]);
        nodes[i] = nodes_a[i];
    }
    dq_options opt;
    sentinel_options(&opt, nodes, NSENTINELS, 20000);
    if (replicated)
        opt.durability = DQ_DURABILITY_REPLICATED;
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "%s", err);

    for (int b = 0; b < nbatches; b++) {
        if (b == s.kill_after_batches) {
            s.t_kill = tu_now_ms();
            kill_master();
        }
        enqueue_batch(c, &s, b);
        follow_failover(&s);
        tu_sleep_ms(STRESS_PACE_MS);
    }
    if (!s.t_promoted) {
        ck_assert_msg(h_wait(20000, b_promoted, NULL) == 1, "no sentinel promoted B");
        follow_failover(&s);
    }
    int64_t t_kill = s.t_kill, t_promoted = s.t_promoted;
    ck_assert_msg(h_wait(60000, queue_idle, c) == 1, "the queue did not drain; log:\n%s",
                  h_log_tail(&H));
    tu_sleep_ms(500);   /* the last runs' record lines */

    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    int lost = 0, lost_accepted = 0, dup = 0, overlaps = 0, accepted = 0;
    for (size_t i = 0; i < nruns; i++)
        overlaps += runs[i].end == H_OVERLAP;
    for (int i = 0; i < s.n; i++) {
        int starts = h_count(runs, nruns, s.ids[i], 0, NULL);
        accepted += s.accepted[i];
        lost += starts == 0;
        lost_accepted += starts == 0 && s.accepted[i];
        dup += starts > 1;
    }
    int64_t gap_at = 0;
    int64_t gap = largest_gap(runs, nruns, t_kill - 1000, &gap_at);
    free(runs);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    char body[65536];
    ck_assert_int_eq(fixture_http_get(metrics_port, "/metrics", body, sizeof body), 200);
    const char *fo = strstr(body, "\ndelayq_failovers_total ");
    printf("sentinel failover: lost=%d dup=%d gap_ms=%lld (durability %s; %d jobs, %d "
           "accepted, promoted %lld ms after the kill, gap from %+lld ms; dead %lld; "
           "failovers counted %d)\n",
           lost, dup, (long long)gap, durability, s.n, accepted,
           (long long)(t_promoted - t_kill), (long long)(gap_at - t_kill),
           (long long)st.dead, fo ? atoi(fo + 24) : -1);
    keep_log(getenv("DELAYQ_SENTINEL_LOG"));
    /* Whatever the durability: no job runs twice at once, the daemon went
     * on without a restart, and it counted the failover. */
    ck_assert_msg(overlaps == 0, "%d runs overlapped a live run of the same job", overlaps);
    ck_assert_msg(fo && atoi(fo + 24) >= 1, "metrics:\n%s", body);
    ck_assert_msg(h_log_count(&H, "moved from") >= 1, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(h_log_count(&H, "(outage ") >= 1, "log:\n%s", h_log_tail(&H));
    ck_assert_msg(tu_process_running(H.pid), "delayqd exited; log:\n%s", h_log_tail(&H));
    ck_assert_int_eq(st.dead, 0);
    /* Replicated: an enqueue that returned OK is on the replica the
     * sentinels promote, and so is every acknowledgement (one not yet
     * confirmed is sent again, and settles the job on the new master). */
    if (replicated) {
        ck_assert_msg(lost_accepted == 0, "%d jobs whose enqueue returned OK never ran",
                      lost_accepted);
        ck_assert_msg(dup == 0, "%d jobs ran again after their run was acknowledged", dup);
    }
    dq_close(c);
    free(s.ids);
    free(s.accepted);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}

START_TEST(daemon_follows_a_sentinel_failover)
{
    const char *durability = getenv("DELAYQ_SENTINEL_DURABILITY");
    stress_failover(durability ? durability : "local");
}
END_TEST

/* The same with every write confirmed by a replica: nothing lost, nothing
 * run twice. */
START_TEST(replicated_failover_loses_and_repeats_nothing)
{
    stress_failover("replicated");
}
END_TEST

static int a_demoted(void *arg)
{
    (void)arg;
    redisReply *r = ask(port_a, "ROLE");
    int slave = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0
                && strcmp(r->element[0]->str, "slave") == 0;
    if (r)
        freeReplyObject(r);
    return slave;
}

/* A failover the sentinels are asked for: the old master stays up until
 * they demote it; the daemon follows at +switch-master (SIGUSR2), a client
 * when its connection is closed, through a sentinel it only learnt of;
 * every job enqueued after it runs once. */
START_TEST(daemon_and_client_follow_a_manual_failover)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    char redis[512];
    snprintf(redis, sizeof redis,
             "sentinel = { master = \"" MASTER_NAME "\"; nodes = [ \"127.0.0.1:%d\", "
             "\"127.0.0.1:%d\" ]; };", sentinel_port[0], sentinel_port[1]);
    hc.redis = redis;
    h_write_conf(&H, &hc);
    h_start(&H, hc.workers);
    char n0[32];
    snprintf(n0, sizeof n0, "127.0.0.1:%d", sentinel_port[2]);
    const char *nodes[] = { n0 };
    dq_options opt;
    sentinel_options(&opt, nodes, 1, 20000);
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "%s", err);
    enqueue_on(c, "before");
    /* The one sentinel the client was given goes away: it must find the
     * new master through the ones that sentinel told it of. */
    tu_stop_process(sentinel_pid[2], 5000);
    sentinel_pid[2] = 0;
    redisReply *r = ask(sentinel_port[0], "SENTINEL FAILOVER " MASTER_NAME);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
    freeReplyObject(r);
    ck_assert_msg(h_wait(20000, b_promoted, NULL) == 1, "B was not promoted");
    /* Until the sentinels demote A it still takes writes (they would be
     * lost when it syncs from B); then its clients are disconnected, and
     * the client follows to B. */
    ck_assert_msg(h_wait(20000, a_demoted, NULL) == 1, "A was not demoted");
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "after-%d", i);
        enqueue_following(c, id, 0);
    }
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "after-%d", i);
        ck_assert_msg(h_wait_record(&H, id, 1, 1, 10000) == 1, "%s did not run; log:\n%s", id,
                      h_log_tail(&H));
    }
    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "after-%d", i);
        ck_assert_int_eq(h_count(runs, nruns, id, 1, NULL), 1);
    }
    free(runs);
    ck_assert_int_eq(fixture_record_count(&B, H_QUEUE), 1);  /* "before", delayed */
    ck_assert_msg(h_wait_log(&H, "moved from", 1, 5000) >= 1, "log:\n%s", h_log_tail(&H));
    dq_close(c);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- configuration ----------------------------------------------------------- */

/* delayqd -t on a file whose redis group is `redis`: its exit status and
 * the message in err. */
static int check_conf(const char *redis, char *err, size_t errlen)
{
    char path[300], text[PATH_MAX + 1024];
    snprintf(path, sizeof path, "%s/bad.conf", H.fx.dir);
    snprintf(text, sizeof text,
             "redis = {\n%s\n};\nqueues = ( { name = \"q\"; workers = 1; } );\n"
             "handlers = ( { type = \"*\"; file = \"testhandler.so\"; } );\n"
             "handler_dir = \"%s\";\n", redis, H.handler_dir);
    h_write_file(path, text);
    const char *args[] = { "-t", "-c", path, NULL };
    return h_run_delayqd(args, err, errlen);
}

static void assert_conf_refused(const char *redis, const char *line, const char *phrase)
{
    char err[1024];
    ck_assert_int_eq(check_conf(redis, err, sizeof err), 78);
    ck_assert_msg(strstr(err, line) && strstr(err, phrase), "'%s': %s", redis, err);
}

START_TEST(config_errors_name_file_and_line)
{
    assert_conf_refused("  sentinel = {\n    nodes = [ \"127.0.0.1:26379\" ];\n  };",
                        "bad.conf:2:", "redis.sentinel.master is missing");
    assert_conf_refused("  sentinel = {\n    master = \"jobs\";\n    nodes = [ ];\n  };",
                        "bad.conf:4:", "redis.sentinel.nodes is empty");
    assert_conf_refused("  sentinel = {\n    master = \"jobs\";\n"
                        "    nodes = [ \"127.0.0.1:26379\", \"host-without-port\" ];\n  };",
                        "bad.conf:4:", "nodes[1]: 'host-without-port': expected HOST:PORT");
    assert_conf_refused("  sentinel = {\n    master = \"jobs\";\n"
                        "    nodes = [ \"127.0.0.1:99999\" ];\n  };",
                        "bad.conf:4:", "the port must be a number from 1 to 65535");
    assert_conf_refused("  host = \"h\";\n  sentinel = { master = \"jobs\"; "
                        "nodes = [ \"127.0.0.1:1\" ]; };", "bad.conf:3:",
                        "redis.host and redis.sentinel are both set");
    assert_conf_refused("  sentinel = { master = \"jobs\"; nodes = [ \"127.0.0.1:1\" ];\n"
                        "    user = \"u\"; };", "bad.conf:2:",
                        "redis.sentinel.user needs redis.sentinel.password");
    assert_conf_refused("  sentinel = { master = \"jobs\"; nodes = [ \"127.0.0.1:1\" ];\n"
                        "    port = 1; };", "bad.conf:3:",
                        "unknown setting 'redis.sentinel.port'");
    char err[1024];
    ck_assert_int_eq(check_conf("  sentinel = { master = \"jobs\";\n"
                                "    nodes = [ \"127.0.0.1:26379\", \"[::1]:26380\" ];\n"
                                "    password = \"s\"; };", err, sizeof err), 0);
    /* A password file next to the configuration, readable by all: taken,
     * with a warning. */
    char pass[300];
    snprintf(pass, sizeof pass, "%s/sentinel.pass", H.fx.dir);
    h_write_file(pass, "secret\n");
    ck_assert_int_eq(chmod(pass, 0644), 0);
    ck_assert_int_eq(check_conf("  sentinel = { master = \"jobs\"; nodes = [ \"h:1\" ];\n"
                                "    user = \"u\"; password_file = \"sentinel.pass\"; };",
                                err, sizeof err), 0);
    ck_assert_msg(strstr(err, "holds the sentinels' password and every user can read it"),
                  "%s", err);
    assert_conf_refused("  sentinel = { master = \"jobs\"; nodes = [ \"h:1\" ];\n"
                        "    password_file = \"missing.pass\"; };", "bad.conf:3:",
                        "redis.sentinel.password_file: cannot read");
}
END_TEST

static void conf_setup(void)
{
    h_setup(&H);
}

static void conf_teardown(void)
{
    h_teardown(&H);
}

/* Whether `server` runs as a sentinel: 1, or 0 with the reason.  Before
 * Check runs, so without the fixture (a unix socket, no port to pick). */
static int sentinel_mode_works(const char *server, char *why, size_t len)
{
    char dir[256], conf[300], sock[300], text[1024];
    if (tu_make_temp_dir("dqsentinel", dir, sizeof dir, why, len) < 0)
        return 0;
    snprintf(conf, sizeof conf, "%s/probe.conf", dir);
    snprintf(sock, sizeof sock, "%s/probe.sock", dir);
    snprintf(text, sizeof text, "port 0\nunixsocket %s\ndir %s\n"
             "sentinel monitor " MASTER_NAME " 127.0.0.1 1 2\n", sock, dir);
    FILE *f = fopen(conf, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0)
        ok = 0;
    char log[300];
    snprintf(log, sizeof log, "%s/probe.log", dir);
    char *const argv[] = { (char *)server, conf, "--sentinel", NULL };
    pid_t pid = ok ? tu_spawn(argv, log, 0, why, len) : -1;
    ok = 0;
    for (int t = 0; pid > 0 && t < 500 && !ok && tu_process_running(pid); t++) {
        redisContext *rc = tu_redis_connect(sock, 1000, why, len);
        ok = rc && tu_redis_int(rc, "PING") == 0;
        if (rc)
            redisFree(rc);
        if (!ok)
            tu_sleep_ms(10);
    }
    if (!ok && pid > 0)
        snprintf(why, len, "it did not answer as a sentinel");
    if (pid > 0)
        tu_stop_process(pid, 5000);
    tu_remove_tree(dir);
    return ok;
}

int main(void)
{
    char why[300], server[PATH_MAX];
    if (tu_redis_find(NULL, server, sizeof server) == 0
        && !sentinel_mode_works(server, why, sizeof why)) {
        printf("SKIP: redis-server cannot run as a sentinel: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("sentinel");
    TCase *tc = fixture_tcase(s, "sentinel", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, client_finds_the_master_and_follows_a_failover);
    tcase_add_test(tc, cli_finds_the_master_through_the_sentinels);
    tcase_add_test(tc, daemon_follows_a_sentinel_failover);
    tcase_add_test(tc, replicated_failover_loses_and_repeats_nothing);
    tcase_add_test(tc, daemon_and_client_follow_a_manual_failover);
    TCase *conf = fixture_tcase(s, "config", 30, NULL, NULL, conf_setup, conf_teardown);
    tcase_add_test(conf, config_errors_name_file_and_line);
    return fixture_run_suite(s);
}
