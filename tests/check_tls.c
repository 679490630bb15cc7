/*
 * TLS to Redis, end to end: certificates made with openssl in a temporary
 * directory, redis-servers on TLS ports of their own (one plain port too),
 * and the library, the command line and the daemon over them.  Every
 * failure the user can meet (unknown CA, name mismatch, expired
 * certificate, a plain server, a client certificate required or refused)
 * gives its one line and exit 69.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "daemon_harness.h"
#include "fixture.h"

#define OPENSSL "/usr/bin/openssl"

/* A TLS redis-server of this test: TLS on `tls_port`, plain TCP on
 * `plain_port` (0: none), and a unix socket for checking its data. */
struct tls_server {
    char dir[150];
    char sock[170];
    int tls_port;
    int plain_port;
    pid_t pid;
};

static char certs[128];             /* the certificates' directory */
static char redis_bin[512];
static struct tls_server good;      /* server.crt, no client certificate asked */
static struct tls_server mutual;    /* server.crt, client certificate required */
static struct tls_server expired;   /* expired.crt */
static char err_buf[256];

static const char *cert(const char *name)
{
    static char buf[8][400];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, 400, "%s/%s", certs, name);
    return out;
}

static char *port_arg(int port)
{
    static char buf[8][16];
    static int next;
    char *out = buf[next++ % 8];
    snprintf(out, 16, "%d", port);
    return out;
}

/* Wait (10 s at most) until the server at `sock` answers PING. */
static int wait_up(const char *sock, pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        if (!tu_process_running(pid))
            return -1;
        char err[256];
        redisContext *rc = tu_redis_connect(sock, 1000, err, sizeof err);
        if (rc) {
            long long r = tu_redis_int(rc, "PING");
            redisFree(rc);
            if (r == 0)
                return 0;
        }
        tu_sleep_ms(50);
    }
    return -1;
}

/* One start of server_start's: 0 up, -1 it exited (its port taken: try
 * again), -2 it did not answer. */
static int server_start_once(struct tls_server *s, const char *crt, const char *key,
                             int auth_clients, int plain, char *err, size_t errlen)
{
    s->tls_port = fixture_free_port();
    s->plain_port = plain ? fixture_free_port() : 0;
    char log[400];
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    char *const argv[] = {
        redis_bin, "--port", port_arg(s->plain_port), "--tls-port", port_arg(s->tls_port),
        "--tls-cert-file", (char *)cert(crt), "--tls-key-file", (char *)cert(key),
        "--tls-ca-cert-file", (char *)cert("ca.crt"),
        "--tls-auth-clients", auth_clients ? "yes" : "no",
        "--unixsocket", s->sock, "--unixsocketperm", "700", "--save", "",
        "--appendonly", "no", "--dir", s->dir, "--logfile", log, NULL
    };
    s->pid = tu_spawn(argv, NULL, TU_DIE_WITH_PARENT, err, errlen);
    if (s->pid < 0)
        return -2;
    if (wait_up(s->sock, s->pid) < 0) {
        int exited = !tu_process_running(s->pid);
        tu_stop_process(s->pid, 5000);
        s->pid = 0;
        return exited ? -1 : -2;
    }
    return 0;
}

/* Start a TLS server with `crt`/`key` in DIR under `parent`; 0, or -1.
 * A server that exits at once lost its port to another program between
 * fixture_free_port and its bind: it is started again on other ports. */
static int server_start(struct tls_server *s, const char *parent, const char *name,
                        const char *crt, const char *key, int auth_clients, int plain)
{
    char err[512];
    snprintf(s->dir, sizeof s->dir, "%s/%s", parent, name);
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    if (mkdir(s->dir, 0700) < 0 && errno != EEXIST)
        return -1;
    for (int tries = 0; tries < 3; tries++) {
        int up = server_start_once(s, crt, key, auth_clients, plain, err, sizeof err);
        if (up != -1)
            return up == 0 ? 0 : -1;
    }
    return -1;
}

static void server_stop(struct tls_server *s)
{
    if (s->pid > 0)
        tu_stop_process(s->pid, 5000);
    s->pid = 0;
}

/* Make the certificates, or say why the test cannot run here and exit 77. */
static void make_certs(void)
{
    char err[300];
    if (access(OPENSSL, X_OK) < 0) {
        printf("SKIP: %s is missing (apt-get install openssl)\n", OPENSSL);
        exit(77);
    }
    if (tu_redis_find(NULL, redis_bin, sizeof redis_bin) < 0) {
        printf("SKIP: no redis-server\n");
        exit(77);
    }
    if (tu_make_temp_dir("dqtls", certs, sizeof certs, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sh '%s' '%s' %s", TLS_CERTS_SCRIPT, certs, OPENSSL);
    if (system(cmd) != 0) {
        fprintf(stderr, "making the test certificates failed: %s\n", cmd);
        tu_remove_tree(certs);
        exit(1);
    }
}

static void servers_down(void)
{
    server_stop(&good);
    server_stop(&mutual);
    server_stop(&expired);
}

/* The servers, once for the test case (in the runner: an unchecked
 * fixture, where Check's assertions work).  A redis-server that cannot
 * start with TLS (built without it) skips the program. */
static void servers_up(void)
{
    if (server_start(&good, certs, "good", "server.crt", "server.key", 0, 1) < 0) {
        printf("SKIP: %s does not start with TLS (built without it?)\n", redis_bin);
        tu_remove_tree(certs);
        exit(77);
    }
    if (server_start(&mutual, certs, "mutual", "server.crt", "server.key", 1, 0) < 0
        || server_start(&expired, certs, "expired", "expired.crt", "expired.key", 0, 0) < 0) {
        servers_down();
        ck_abort_msg("a TLS redis-server did not start (logs in %s)", certs);
    }
}

/* Options for the good server over TLS, trusting the test CA. */
static void tls_options(dq_options *opt, const struct tls_server *s)
{
    dq_options_init(opt);
    opt->host = "127.0.0.1";
    opt->port = s->tls_port;
    opt->tls.enable = 1;
    opt->tls.ca_file = cert("ca.crt");
}

/* Enqueue, claim and ack one job over `opt`: the library works. */
static void round_trip(const dq_options *opt)
{
    char err[512];
    dq_status st;
    dq_client *c = dq_connect(opt, err, sizeof err, &st);
    ck_assert_msg(c, "dq_connect: %s", err);
    const char *payload = "over TLS";
    dq_enqueue_req req = { .queue = "tlsq", .type = "t", .payload = payload,
                           .payload_len = strlen(payload) };
    dq_enqueued out;
    ck_assert_int_eq(dq_enqueue(c, &req, &out), DQ_OK);
    dq_claim_result cr = { 0 };
    ck_assert_int_eq(dq_claim(c, "tlsq", 10, 30000, &cr), DQ_OK);
    ck_assert_uint_eq(cr.n, 1);
    ck_assert_str_eq(cr.jobs[0].id, out.id);
    ck_assert_str_eq(cr.jobs[0].payload, payload);
    ck_assert_int_eq(dq_ack(c, "tlsq", cr.jobs[0].id, cr.jobs[0].fence), DQ_OK);
    dq_claim_result_free(&cr);
    dq_close(c);
}

START_TEST(library_without_client_cert)
{
    dq_options opt;
    tls_options(&opt, &good);
    round_trip(&opt);
    /* "localhost" is checked as a name, 127.0.0.1 above as an address. */
    opt.host = "localhost";
    round_trip(&opt);
}
END_TEST

START_TEST(library_with_client_cert)
{
    dq_options opt;
    tls_options(&opt, &mutual);
    opt.tls.cert_file = cert("client.crt");
    opt.tls.key_file = cert("client.key");
    round_trip(&opt);
}
END_TEST

/* The library's status for a refused server certificate is
 * DQ_ERR_CONNECT with the cause. */
START_TEST(library_unknown_ca)
{
    dq_options opt;
    tls_options(&opt, &good);
    opt.tls.ca_file = cert("other-ca.crt");
    char err[512];
    dq_status st;
    ck_assert_ptr_null(dq_connect(&opt, err, sizeof err, &st));
    ck_assert_int_eq(st, DQ_ERR_CONNECT);
    ck_assert_msg(strstr(err, "not signed by a trusted CA"), "%s", err);
    /* verify = 0 takes it (for tests only) */
    opt.tls.verify = 0;
    round_trip(&opt);
}
END_TEST

START_TEST(cli_over_tls)
{
    const char *port = port_arg(good.tls_port);
    struct cli_run how = { .no_socket = true };
    char id[128];
    add_id(CLI_HOW(&how, "-H", "127.0.0.1", "-p", port, "--tls", "--cacert", cert("ca.crt"),
                   "add", "-q", "orders", "-t", "t", "hello"), id, sizeof id);
    struct run_result *r = CLI_HOW(&how, "-H", "localhost", "-p", port, "--tls", "--cacert",
                                   cert("ca.crt"), "stats");
    assert_ok(r);
    ck_assert_msg(strstr(r->out, "orders"), "stats: %s", r->out);
    /* with a client certificate, to the server that requires one */
    r = CLI_HOW(&how, "-p", port_arg(mutual.tls_port), "--tls", "--cacert", cert("ca.crt"),
                "--cert", cert("client.crt"), "--key", cert("client.key"), "stats");
    assert_ok(r);
    /* the same from a -c file, its paths relative to the file */
    char conf[400];
    snprintf(conf, sizeof conf, "%s/delayq.conf", certs);
    char text[600];
    snprintf(text, sizeof text,
             "redis = { host = \"localhost\"; port = %d;\n"
             "  tls = { ca_file = \"ca.crt\"; cert_file = \"client.crt\";\n"
             "          key_file = \"client.key\"; }; };\n", mutual.tls_port);
    h_write_file(conf, text);
    r = CLI_HOW(&how, "-c", conf, "stats");
    assert_ok(r);
    /* a TLS flag without TLS is a usage error, not ignored */
    assert_fails(CLI_HOW(&how, "-p", port, "--cacert", cert("ca.crt"), "stats"), 2,
                 "--cacert needs --tls");
}
END_TEST

/* A configuration file whose tls file is missing: FILE:LINE. */
START_TEST(config_names_missing_file)
{
    char conf[400];
    snprintf(conf, sizeof conf, "%s/bad.conf", certs);
    h_write_file(conf, "redis = {\n  port = 6380;\n  tls = {\n    ca_file = \"nope.crt\";\n"
                       "  };\n};\n");
    struct cli_run how = { .no_socket = true };
    char want[500];
    snprintf(want, sizeof want, "bad.conf:4: redis.tls.ca_file: cannot read %s/nope.crt",
             certs);
    assert_fails(CLI_HOW(&how, "-c", conf, "stats"), 78, want);
}
END_TEST

/* `delayq stats` against `port` with the extra arguments must fail with
 * exit 69 and one line saying `phrase`. */
#define TLS_FAILS(phrase, ...)                                                          \
    assert_fails(CLI_HOW(&(struct cli_run){ .no_socket = true }, "-H", "127.0.0.1",     \
                         "--tls", "--timeout", "2s", __VA_ARGS__, "stats"),             \
                 69, phrase)

START_TEST(error_unknown_ca)
{
    TLS_FAILS("the server's certificate is not signed by a trusted CA",
              "-p", port_arg(good.tls_port), "--cacert", cert("other-ca.crt"));
}
END_TEST

START_TEST(error_name_mismatch)
{
    TLS_FAILS("the server's certificate is not for wrong.example (name mismatch",
              "-p", port_arg(good.tls_port), "--cacert", cert("ca.crt"),
              "--sni", "wrong.example");
}
END_TEST

START_TEST(error_expired)
{
    TLS_FAILS("the server's certificate has expired",
              "-p", port_arg(expired.tls_port), "--cacert", cert("ca.crt"));
}
END_TEST

START_TEST(error_plain_server)
{
    TLS_FAILS("the server does not speak TLS on this port",
              "-p", port_arg(good.plain_port), "--cacert", cert("ca.crt"));
}
END_TEST

START_TEST(error_client_cert_required)
{
    TLS_FAILS("requires a client certificate",
              "-p", port_arg(mutual.tls_port), "--cacert", cert("ca.crt"));
}
END_TEST

START_TEST(error_client_cert_refused)
{
    TLS_FAILS("refused the client certificate",
              "-p", port_arg(mutual.tls_port), "--cacert", cert("ca.crt"),
              "--cert", cert("rogue.crt"), "--key", cert("rogue.key"));
}
END_TEST

START_TEST(error_unreadable_file)
{
    TLS_FAILS("cannot read TLS CA file /nonexistent/ca.crt",
              "-p", port_arg(good.tls_port), "--cacert", "/nonexistent/ca.crt");
}
END_TEST


/* ---- the daemon ------------------------------------------------------------- */

static void job_ok(int i, void *arg, const char **payload, int64_t *at_ms)
{
    (void)i;
    (void)arg;
    (void)at_ms;
    *payload = "ok";
}

/* Replace the harness's plain server by a TLS one on the same directory
 * (its unix socket, for the harness's own checks and client), and write
 * the daemon's configuration with `tls` as its redis group's TLS part. */
static void harness_on_tls(struct harness *h, struct tls_server *s, const char *tls,
                           int plain)
{
    tu_stop_process(h->fx.pid, 5000);
    h->fx.pid = 0;
    ck_assert_int_eq(server_start(s, h->fx.dir, "tls", "server.crt", "server.key", 0, plain),
                     0);
    h->fx.pid = s->pid;
    snprintf(h->fx.sock, sizeof h->fx.sock, "%s", s->sock);
    dq_close(h->c);
    h->c = fixture_client(&h->fx);
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(h, &hc);
    /* the harness writes a unix_socket redis group first: swap it */
    FILE *f = fopen(h->conf, "r");
    ck_assert_ptr_nonnull(f);
    static char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *rest = strchr(text, '\n');
    ck_assert_ptr_nonnull(rest);
    static char conf[17000];
    snprintf(conf, sizeof conf,
             "redis = { host = \"127.0.0.1\"; port = %d; connect_timeout = \"1s\";\n"
             "  tls = { %s };\n};%s", plain ? s->plain_port : s->tls_port, tls, rest);
    h_write_file(h->conf, conf);
}

/* delayqd runs jobs with every one of its connections over TLS. */
START_TEST(daemon_over_tls)
{
    struct harness h;
    struct tls_server s = { 0 };
    h_setup(&h);
    char tls[600];
    snprintf(tls, sizeof tls, "ca_file = \"%s\"; server_name = \"localhost\";",
             cert("ca.crt"));
    harness_on_tls(&h, &s, tls, 0);
    h_start(&h, 2);
    h_enqueue_numbered(&h, 200, "tls", job_ok, NULL);
    ck_assert_msg(h_wait_idle(&h, 30000), "jobs left; log: %s", h_log_tail(&h));
    struct h_run *runs = NULL;
    size_t n = h_records(&h, &runs);
    int ends = 0;
    for (size_t i = 0; i < n; i++)
        ends += runs[i].end == 1;
    free(runs);
    ck_assert_int_eq(ends, 200);
    /* the server has no plain TCP port: every TCP client came over TLS */
    char err[256], needle[64];
    redisContext *rc = tu_redis_connect(s.sock, 2000, err, sizeof err);
    ck_assert_msg(rc, "%s", err);
    snprintf(needle, sizeof needle, "laddr=127.0.0.1:%d", s.tls_port);
    int tls_clients = tu_redis_clients_with(rc, needle);
    redisFree(rc);
    ck_assert_int_ge(tls_clients, 3);   /* 2 workers and the reaper, at least */
    ck_assert_int_eq(h_stop(&h, 10000), 0);
    h_teardown(&h);
}
END_TEST

/* Start the daemon trusting `ca` on the TLS port (or, `plain`, the plain
 * one), which it cannot use: each connection logs `phrase` once for its
 * outage, not at every attempt. */
static void daemon_refused(const char *ca, int plain, const char *phrase)
{
    struct harness h;
    struct tls_server s = { 0 };
    h_setup(&h);
    char tls[600];
    snprintf(tls, sizeof tls, "ca_file = \"%s\";", cert(ca));
    harness_on_tls(&h, &s, tls, plain);
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", h.conf, NULL };
    h.pid = tu_spawn(argv, h.log, 0, err_buf, sizeof err_buf);
    ck_assert_int_gt(h.pid, 0);
    ck_assert_msg(h_wait_log(&h, phrase, 1, 10000), "log: %s", h_log_tail(&h));
    tu_sleep_ms(2500);  /* several reconnect attempts */
    /* 5 connections (2 of the worker, the reaper's two: commands and
     * cancels, the settler's) and the start-up check */
    ck_assert_int_le(h_log_count(&h, phrase), 10);
    h_teardown(&h);
}

/* A daemon that does not trust the server says why. */
START_TEST(daemon_unknown_ca_logged)
{
    daemon_refused("other-ca.crt", 0, "not signed by a trusted CA");
}
END_TEST

/* A daemon told to speak TLS to a plain port names that cause. */
START_TEST(daemon_plain_server_logged)
{
    daemon_refused("ca.crt", 1, "does not speak TLS on this port");
}
END_TEST

/*
 * A sentinel that speaks only TLS, monitoring the good server over TLS:
 * the library asks it for the master (with the same TLS settings, as the
 * sentinels are reached) and runs a job there.  Its port, or 0 when it
 * did not start.
 */
static int sentinel_start(pid_t *pid)
{
    char dir[300], conf[400], log[400], err[300];
    snprintf(dir, sizeof dir, "%s/sentinel", certs);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return 0;
    snprintf(conf, sizeof conf, "%s/sentinel.conf", dir);
    snprintf(log, sizeof log, "%s/sentinel.log", dir);
    int port = fixture_free_port();
    FILE *f = fopen(conf, "w");
    if (!f)
        return 0;
    fprintf(f, "port 0\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\n"
            "tls-ca-cert-file %s\ntls-auth-clients no\ntls-replication yes\n"
            "dir %s\nlogfile %s\nsentinel monitor jobs 127.0.0.1 %d 1\n",
            port, cert("server.crt"), cert("server.key"), cert("ca.crt"), dir, log,
            good.tls_port);
    if (fclose(f) != 0)
        return 0;
    char *const argv[] = { redis_bin, conf, "--sentinel", NULL };
    *pid = tu_spawn(argv, NULL, TU_DIE_WITH_PARENT, err, sizeof err);
    return *pid > 0 ? port : 0;
}

START_TEST(library_through_a_tls_sentinel)
{
    pid_t pid = 0;
    int port = sentinel_start(&pid);
    ck_assert_msg(port > 0, "the sentinel did not start");
    char node[32];
    snprintf(node, sizeof node, "127.0.0.1:%d", port);
    const char *nodes[] = { node };
    dq_options opt;
    tls_options(&opt, &good);
    opt.host = NULL;
    opt.port = 0;
    opt.sentinel.master = "jobs";
    opt.sentinel.nodes = nodes;
    opt.sentinel.nnodes = 1;
    opt.connect_timeout_ms = 10000;  /* the sentinel may need a moment */
    round_trip(&opt);
    /* Without TLS the same sentinel cannot be asked: it speaks only TLS. */
    opt.tls.enable = 0;
    opt.connect_timeout_ms = 1000;
    char err[512];
    dq_client *c = dq_connect(&opt, err, sizeof err, NULL);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "no sentinel gave the address"), "%s", err);
    tu_stop_process(pid, 5000);
}
END_TEST

int main(void)
{
    make_certs();
    Suite *s = suite_create("tls");
    TCase *tc = fixture_tcase(s, "tls", 120, servers_up, servers_down, NULL, NULL);
    tcase_add_test(tc, library_without_client_cert);
    tcase_add_test(tc, library_with_client_cert);
    tcase_add_test(tc, library_unknown_ca);
    tcase_add_test(tc, cli_over_tls);
    tcase_add_test(tc, library_through_a_tls_sentinel);
    tcase_add_test(tc, config_names_missing_file);
    tcase_add_test(tc, error_unknown_ca);
    tcase_add_test(tc, error_name_mismatch);
    tcase_add_test(tc, error_expired);
    tcase_add_test(tc, error_plain_server);
    tcase_add_test(tc, error_client_cert_required);
    tcase_add_test(tc, error_client_cert_refused);
    tcase_add_test(tc, error_unreadable_file);
    tcase_add_test(tc, daemon_over_tls);
    tcase_add_test(tc, daemon_unknown_ca_logged);
    tcase_add_test(tc, daemon_plain_server_logged);
    int rv = fixture_run_suite(s);
    tu_remove_tree(certs);
    return rv;
}
