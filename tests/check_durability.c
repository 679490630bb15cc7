/*
 * Durability "replicated": with a real master and replica on loopback, a
 * write succeeds only once the replica has it (WAIT), a write the replica
 * did not confirm in time is an error the caller sees (the library's
 * DQ_ERR_TIMEOUT, the CLI's exit 69), and the daemon runs no job whose
 * claim the replica did not confirm.  Then what a failover loses: master A
 * killed with SIGKILL while a producer enqueues and the daemon drains,
 * replica B promoted and the address (a socket symlink) moved to it; the
 * jobs whose enqueue returned OK but never ran, and the jobs that ran
 * twice, counted for "local" (printed) and "replicated" (asserted 0).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
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

static struct harness H;        /* its server is A, the first master */
static struct redis_fixture B;  /* A's replica (promoted in the loss runs) */
static struct redis_fixture C;  /* B's replica once B is the master */
static char link_path[sizeof H.fx.sock]; /* the address the loss runs use */

/* ---- servers --------------------------------------------------------------- */

/* Whether INFO replication of `f` holds `text`. */
static int info_has(const struct redis_fixture *f, const char *text)
{
    redisContext *rc = fixture_redis_connect(f);
    redisReply *r = redisCommand(rc, "INFO replication");
    int yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, text) != NULL;
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    return yes;
}

static int in_sync(void *arg)
{
    return info_has(arg, "master_link_status:up");
}

/* The master counts a replica in WAIT once it is "online": after a
 * diskless sync, when its first acknowledgement came (up to 1 s later). */
static int replica_online(void *arg)
{
    return info_has(arg, "state=online");
}

/* Give `f` a loopback TCP port (replication needs one); returns it. */
static int tcp_port(const struct redis_fixture *f)
{
    int port = fixture_redis_listen_tcp(f);
    ck_assert_int_eq(fixture_redis_int(f, "CONFIG SET repl-diskless-sync-delay 0"), 0);
    return port;
}

static int has_probe(void *arg)
{
    return fixture_redis_int(arg, "EXISTS durability-probe") == 1;
}

/* Make `replica` a replica of `master`, listening on `port`, and wait
 * until both say the link is up. */
static void replicate(const struct redis_fixture *replica, const struct redis_fixture *master,
                      int port)
{
    ck_assert_int_eq(fixture_redis_int(replica, "REPLICAOF 127.0.0.1 %d", port), 0);
    ck_assert_msg(h_wait(10000, in_sync, (void *)replica) == 1, "no sync with :%d", port);
    ck_assert_msg(h_wait(10000, replica_online, (void *)master) == 1, ":%d: no replica", port);
    /* After a diskless sync the master streams its writes only once the
     * replica's first acknowledgement came (up to 1 s): until a write
     * made now shows on the replica. */
    ck_assert_int_eq(fixture_redis_int(master, "INCR durability-probe"), 1);
    ck_assert_msg(h_wait(10000, has_probe, (void *)replica) == 1, ":%d: no stream", port);
    ck_assert_int_eq(fixture_redis_int(master, "DEL durability-probe"), 1);
}

static void signal_server(const struct redis_fixture *f, int sig)
{
    ck_assert_msg(kill(f->pid, sig) == 0, "kill %d: %s", (int)f->pid, strerror(errno));
}

static void setup(void)
{
    h_setup(&H);
    fixture_redis_start(&B);
    memset(&C, 0, sizeof C);
    replicate(&B, &H.fx, tcp_port(&H.fx));
    snprintf(link_path, sizeof link_path, "%s/current.sock", H.fx.dir);
}

static void teardown(void)
{
    if (B.pid > 0)
        kill(B.pid, SIGCONT);
    if (C.pid > 0)
        fixture_redis_stop(&C);
    fixture_redis_stop(&B);
    h_teardown(&H);
}

/* A client of the server at `path` with the given durability. */
static dq_client *client_at(const char *path, dq_durability d, int timeout_ms)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = path;
    opt.durability = d;
    opt.replication_timeout_ms = timeout_ms;
    opt.connect_timeout_ms = 2000;
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_msg(c != NULL, "connect %s: %s", path, err);
    return c;
}

static dq_status enqueue(dq_client *c, const char *id, int64_t delay_ms)
{
    dq_enqueue_req req = { .queue = H_QUEUE, .type = "t", .id = id, .payload = "ok",
                           .payload_len = 2, .delay_ms = delay_ms };
    return dq_enqueue(c, &req, NULL);
}

/* The stats of the queue as `f` has them, read on `f` itself. */
static dq_stats stats_on(const struct redis_fixture *f)
{
    dq_client *c = fixture_client(f);
    dq_stats st;
    ck_assert_msg(dq_stats_get(c, H_QUEUE, &st) == DQ_OK, "stats: %s", dq_errmsg(c));
    dq_close(c);
    return st;
}

/* ---- the library and the CLI -------------------------------------------------- */

START_TEST(replicated_writes_are_on_the_replica_when_they_return)
{
    dq_client *c = client_at(H.fx.sock, DQ_DURABILITY_REPLICATED, 5000);
    /* B is read at once after each call: no wait, the call waited. */
    ck_assert_int_eq(enqueue(c, "later", 60000), DQ_OK);
    ck_assert_int_eq(fixture_record_count(&B, H_QUEUE), 1);
    dq_enqueue_req reqs[10];
    dq_status sts[10];
    char ids[10][16];
    for (int i = 0; i < 10; i++) {
        snprintf(ids[i], sizeof ids[i], "many-%d", i);
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[i],
                                    .payload = "ok", .payload_len = 2, .delay_ms = 60000 };
    }
    ck_assert_int_eq(dq_enqueue_many(c, reqs, 10, NULL, sts), DQ_OK);
    ck_assert_int_eq(fixture_record_count(&B, H_QUEUE), 11);
    ck_assert_int_eq(enqueue(c, "now", 0), DQ_OK);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, H_QUEUE, 1, 30000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    ck_assert_int_eq(stats_on(&B).processing, 1);
    ck_assert_int_eq(dq_ack(c, H_QUEUE, cr.jobs[0].id, cr.jobs[0].fence), DQ_OK);
    ck_assert_int_eq(stats_on(&B).processing, 0);
    dq_claim_result_free(&cr);
    ck_assert_int_eq(dq_cancel(c, H_QUEUE, "later"), DQ_OK);
    ck_assert_int_eq(fixture_record_count(&B, H_QUEUE), 10);
    dq_close(c);
}
END_TEST

START_TEST(a_write_not_replicated_in_time_is_an_error)
{
    dq_client *c = client_at(H.fx.sock, DQ_DURABILITY_REPLICATED, 300);
    dq_client *local = client_at(H.fx.sock, DQ_DURABILITY_LOCAL, 300);
    signal_server(&B, SIGSTOP);     /* connected, but confirms nothing */
    ck_assert_int_eq(enqueue(c, "one", 60000), DQ_ERR_TIMEOUT);
    ck_assert_msg(strstr(dq_errmsg(c), "not replicated within 300 ms"), "%s", dq_errmsg(c));
    /* The write is done on the master: that is what the error says. */
    ck_assert_int_eq(fixture_record_count(&H.fx, H_QUEUE), 1);
    dq_enqueue_req reqs[3];
    dq_status sts[3];
    const char *ids[3] = { "m0", "m1", "m2" };
    for (int i = 0; i < 3; i++)
        reqs[i] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[i],
                                    .payload = "ok", .payload_len = 2, .delay_ms = 60000 };
    ck_assert_int_eq(dq_enqueue_many(c, reqs, 3, NULL, sts), DQ_ERR_TIMEOUT);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sts[i], DQ_ERR_TIMEOUT);
    /* A read waits for nothing; "local" writes as it always did. */
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(enqueue(local, "local", 60000), DQ_OK);

    cli_run_socket(H.fx.sock);
    assert_fails(CLI("--durability", "replicated", "--replication-timeout", "300ms", "add",
                     "-q", H_QUEUE, "-t", "t", "ok"),
                 69, "not replicated within 300 ms");
    char id[64];
    add_id(CLI("add", "-q", H_QUEUE, "-t", "t", "ok"), id, sizeof id);
    assert_fails(CLI("--durability", "sure", "stats", "-q", H_QUEUE), 2, "bad durability 'sure'");

    /* The replica back, writes are confirmed again (once it caught up). */
    signal_server(&B, SIGCONT);
    dq_status st2 = DQ_ERR_TIMEOUT;
    for (int i = 0; i < 20 && st2 == DQ_ERR_TIMEOUT; i++) {
        char after[32];
        snprintf(after, sizeof after, "after-%d", i);
        st2 = enqueue(c, after, 60000);
    }
    ck_assert_msg(st2 == DQ_OK, "%s", dq_errmsg(c));
    dq_close(local);
    dq_close(c);
}
END_TEST

/*
 * A claim no replica confirmed hands the caller no job, and gives its jobs
 * back at once: still due, no attempt counted, claimed normally once the
 * replica confirms again.
 */
START_TEST(a_claim_not_replicated_gives_its_jobs_back)
{
    dq_client *c = client_at(H.fx.sock, DQ_DURABILITY_REPLICATED, 300);
    ck_assert_int_eq(enqueue(c, "due", 0), DQ_OK);
    signal_server(&B, SIGSTOP);
    dq_claim_result cr;
    ck_assert_int_eq(dq_claim(c, H_QUEUE, 10, 30000, &cr), DQ_ERR_TIMEOUT);
    ck_assert_msg(strstr(dq_errmsg(c), "not replicated within 300 ms: the claim's 1 job was "
                                       "given back"), "%s", dq_errmsg(c));
    ck_assert_uint_eq(cr.n, 0);
    dq_stats st;
    ck_assert_int_eq(dq_stats_get(c, H_QUEUE, &st), DQ_OK);
    ck_assert_int_eq(st.processing, 0);
    ck_assert_int_eq(st.due, 1);
    signal_server(&B, SIGCONT);
    dq_status got = DQ_ERR_TIMEOUT;
    for (int i = 0; i < 20 && got == DQ_ERR_TIMEOUT; i++)
        got = dq_claim(c, H_QUEUE, 10, 30000, &cr);
    ck_assert_msg(got == DQ_OK, "%s", dq_errmsg(c));
    ck_assert_uint_eq(cr.n, 1);
    ck_assert_str_eq(cr.jobs[0].id, "due");
    ck_assert_int_eq(cr.jobs[0].attempt, 1);   /* the given-back claim did not count */
    dq_claim_result_free(&cr);
    dq_close(c);
}
END_TEST

/* ---- the daemon ------------------------------------------------------------- */

/* The harness's configuration with `redis_extra` inside its redis group
 * and `sock` as the server's address. */
static void write_conf_with(struct harness *h, const char *sock, const struct h_conf *hc,
                            const char *redis_extra)
{
    struct harness at = *h;
    snprintf(at.fx.sock, sizeof at.fx.sock, "%s", sock);
    h_write_conf(&at, hc);
    FILE *f = fopen(h->conf, "r");
    ck_assert(f != NULL);
    char text[16384], out[17000];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *at_group = strstr(text, "redis = { ");
    ck_assert(at_group != NULL);
    size_t head = (size_t)(at_group - text) + strlen("redis = { ");
    snprintf(out, sizeof out, "%.*s%s %s", (int)head, text, redis_extra, text + head);
    h_write_file(h->conf, out);
}

START_TEST(daemon_runs_no_job_whose_claim_was_not_replicated)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    write_conf_with(&H, H.fx.sock, &hc,
                    "durability = \"replicated\"; replication_timeout = \"300ms\";");
    h_start(&H, hc.workers);
    h_enqueue(&H, "before", "t", "ok", 0, 0);
    ck_assert_int_eq(h_wait_record(&H, "before", 1, 1, 5000), 1);

    signal_server(&B, SIGSTOP);
    h_enqueue(&H, "held", "t", "ok", 0, 0);    /* H.c is "local": no wait */
    ck_assert_msg(h_wait_log(&H, "not replicated", 1, 5000) >= 1, "log:\n%s", h_log_tail(&H));
    tu_sleep_ms(1500);
    ck_assert_msg(h_wait_record(&H, "held", 0, 1, 1) == 0, "held ran; log:\n%s",
                  h_log_tail(&H));

    signal_server(&B, SIGCONT);
    ck_assert_msg(h_wait_record(&H, "held", 1, 1, 10000) == 1, "log:\n%s", h_log_tail(&H));
    struct h_run *runs, first;
    size_t nruns = h_records(&H, &runs);
    ck_assert_int_eq(h_count(runs, nruns, "held", 1, &first), 1);
    /* Given back (recover), not reaped: no attempt was counted. */
    ck_assert_int_eq(first.attempt, 1);
    free(runs);
    ck_assert_msg(h_wait_log(&H, "reach a replica again", 1, 5000) >= 1, "log:\n%s",
                  h_log_tail(&H));
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}
END_TEST

/* ---- what a failover loses ------------------------------------------------------ */

#define LOSS_JOBS 3000
#define LOSS_KILL_AT 1000
/* Each job falls due this long after its enqueue: a queue holds what was
 * enqueued lately when its master dies, as a real one does. */
#define LOSS_DELAY_MS 1000

/* Point link_path at `sock` in one rename, as a DNS change is. */
static void move_link(const char *sock)
{
    char tmp[sizeof link_path + 8];
    snprintf(tmp, sizeof tmp, "%s.new", link_path);
    unlink(tmp);
    ck_assert_msg(symlink(sock, tmp) == 0 && rename(tmp, link_path) == 0, "link %s", tmp);
}

/* The producer (a child process): enqueue LOSS_JOBS jobs through the
 * link, one line "p-N" in `okfile` for each enqueue that returned OK. */
static void produce(dq_durability d, const char *okfile)
{
    int fd = open(okfile, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = link_path;
    opt.durability = d;
    opt.connect_timeout_ms = 2000;
    dq_client *c = NULL;
    for (int i = 0; fd >= 0 && i < LOSS_JOBS; i++) {
        char id[32], line[40];
        snprintf(id, sizeof id, "p-%d", i);
        if (!c)
            c = dq_connect(&opt, line, sizeof line, NULL);
        if (c && enqueue(c, id, LOSS_DELAY_MS) == DQ_OK) {
            int n = snprintf(line, sizeof line, "%s\n", id);
            if (write(fd, line, (size_t)n) != n)
                _exit(1);
        } else {
            tu_sleep_ms(20);
        }
        tu_sleep_ms(i % 4 == 0);    /* a steady stream, not a burst */
    }
    dq_close(c);
    _exit(fd >= 0 ? 0 : 1);
}

static size_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;
    int ch;
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

static int b_drained(void *arg)
{
    (void)arg;
    dq_stats st = stats_on(&B);
    return st.due == 0 && st.processing == 0 && st.delayed == 0;
}

/* The run: see the top of the file.  With `split_ms` > 0, B is promoted
 * that long before A is killed, while A still takes the clients' writes:
 * a partition (Sentinel promotes the replica it can reach while the
 * producers and the daemon still reach the old master).  Prints the
 * figures; returns the count of lost jobs in *lost and of jobs run twice
 * in *dup. */
static void failover_run(dq_durability d, int split_ms, int *lost, int *dup)
{
    const char *name = d == DQ_DURABILITY_REPLICATED ? "replicated" : "local";
    if (d == DQ_DURABILITY_REPLICATED) {
        ck_assert_int_eq(fixture_redis_int(&H.fx, "CONFIG SET min-replicas-to-write 1"), 0);
        ck_assert_int_eq(fixture_redis_int(&H.fx, "CONFIG SET min-replicas-max-lag 10"), 0);
    }
    int port_b = tcp_port(&B);
    move_link(H.fx.sock);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 4;
    hc.lease = "20s";       /* no lease expires during the outage */
    char extra[128];
    snprintf(extra, sizeof extra, "durability = \"%s\"; replication_timeout = \"1s\";", name);
    write_conf_with(&H, link_path, &hc, extra);
    h_start(&H, hc.workers);

    char okfile[300];
    snprintf(okfile, sizeof okfile, "%s/enqueued-ok", H.fx.dir);
    fflush(stdout);
    pid_t producer = fork();
    ck_assert(producer >= 0);
    if (producer == 0)
        produce(d, okfile);
    int status;
    while (count_lines(okfile) < LOSS_KILL_AT) {
        ck_assert_msg(waitpid(producer, &status, WNOHANG) == 0, "the producer ended early");
        tu_sleep_ms(2);
    }
    if (split_ms > 0) {
        ck_assert_int_eq(fixture_redis_int(&B, "REPLICAOF NO ONE"), 0);
        tu_sleep_ms(split_ms);
    }
    signal_server(&H.fx, SIGKILL);
    int64_t t0 = tu_mono_ms();
    ck_assert_int_eq(fixture_redis_int(&B, "REPLICAOF NO ONE"), 0);
    move_link(B.sock);
    fixture_redis_start(&C);        /* the new master's replica */
    replicate(&C, &B, port_b);
    int64_t t1 = tu_mono_ms();
    ck_assert_int_eq(waitpid(producer, &status, 0), producer);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer: %d", status);
    ck_assert_msg(h_wait(60000, b_drained, NULL) == 1, "B not drained; log:\n%s",
                  h_log_tail(&H));
    tu_sleep_ms(500);               /* the last acks' records */

    struct h_run *runs;
    size_t nruns = h_records(&H, &runs);
    FILE *f = fopen(okfile, "r");
    ck_assert(f != NULL);
    char line[64];
    int ok = 0;
    *lost = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        ok++;
        *lost += h_count(runs, nruns, line, 1, NULL) == 0;
    }
    fclose(f);
    *dup = 0;
    for (int i = 0; i < LOSS_JOBS; i++) {
        char id[32];
        snprintf(id, sizeof id, "p-%d", i);
        *dup += h_count(runs, nruns, id, 1, NULL) > 1;
    }
    free(runs);
    printf("failover, durability %s, replica promoted %d ms before the kill: %d of %d "
           "enqueues returned OK; %d of them lost, %d jobs ran twice (promotion and new "
           "replica in %lld ms)\n",
           name, split_ms, ok, LOSS_JOBS, *lost, *dup, (long long)(t1 - t0));
    fflush(stdout);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
}

#define SPLIT_MS 500

START_TEST(failover_loses_nothing_replicated)
{
    int lost, dup;
    failover_run(DQ_DURABILITY_REPLICATED, 0, &lost, &dup);
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(dup, 0);
}
END_TEST

START_TEST(failover_after_a_partition_loses_nothing_replicated)
{
    int lost, dup;
    failover_run(DQ_DURABILITY_REPLICATED, SPLIT_MS, &lost, &dup);
    ck_assert_int_eq(lost, 0);
    ck_assert_int_eq(dup, 0);
}
END_TEST

/* "local": the figures are printed (docs/operations.md), not asserted. */
START_TEST(failover_local_figures)
{
    int lost, dup;
    failover_run(DQ_DURABILITY_LOCAL, 0, &lost, &dup);
}
END_TEST

START_TEST(failover_after_a_partition_local_figures)
{
    int lost, dup;
    failover_run(DQ_DURABILITY_LOCAL, SPLIT_MS, &lost, &dup);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("durability");
    TCase *tc = fixture_tcase(s, "replicated", 120, NULL, NULL, setup, teardown);
    tcase_add_test(tc, replicated_writes_are_on_the_replica_when_they_return);
    tcase_add_test(tc, a_write_not_replicated_in_time_is_an_error);
    tcase_add_test(tc, a_claim_not_replicated_gives_its_jobs_back);
    tcase_add_test(tc, daemon_runs_no_job_whose_claim_was_not_replicated);
    tcase_add_test(tc, failover_loses_nothing_replicated);
    tcase_add_test(tc, failover_after_a_partition_loses_nothing_replicated);
    tcase_add_test(tc, failover_local_figures);
    tcase_add_test(tc, failover_after_a_partition_local_figures);
    return fixture_run_suite(s);
}
