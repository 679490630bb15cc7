/*
 * The `redis` group of the config file: values, defaults, and one exact
 * "FILE:LINE: message" per mistake.
 */
#include <check.h>
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/redis_conf.h"
#include "fixture.h"

static char dir[128];
static char path[256];

static void make_dir(void)
{
    char err[300];
    if (tu_make_temp_dir("dqconf", dir, sizeof dir, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/delayqd.conf", dir);
}

static void remove_dir(void)
{
    if (tu_remove_tree(dir) < 0)
        fprintf(stderr, "could not remove %s: %s\n", dir, strerror(errno));
}

/* Write `text` to DIR/NAME and return the file's path (static storage). */
static const char *write_file(const char *name, const char *text)
{
    static char p[4][256];
    static int next;
    char *out = p[next++ % 4];
    snprintf(out, 256, "%s/%s", dir, name);
    FILE *f = fopen(out, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return out;
}

/* Load `text` as the config file; it must succeed. */
static void load_ok(struct redis_conf *rc, const char *text)
{
    char err[512] = "";
    write_file("delayqd.conf", text);
    redis_conf_init(rc);
    ck_assert_msg(redis_conf_load(rc, path, err, sizeof err) == 0, "refused: %s", err);
}

/* Load `text`; it must fail at `line` with a message containing `phrase`.
 * The message is one line: "PATH:LINE: ...". */
static void load_bad(const char *text, int line, const char *phrase)
{
    char err[512] = "", want[300];
    struct redis_conf rc;
    write_file("delayqd.conf", text);
    redis_conf_init(&rc);
    ck_assert_int_eq(redis_conf_load(&rc, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:%d: ", path, line);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'",
                  err, want);
    ck_assert_msg(strstr(err, phrase), "'%s' does not say '%s'", err, phrase);
    ck_assert_ptr_null(strchr(err, '\n'));
    redis_conf_free(&rc);
}

START_TEST(full_group_is_read)
{
    struct redis_conf rc;
    load_ok(&rc,
            "# the daemon's file: other settings are not ours\n"
            "handler_dir = \"/usr/lib/delayq/handlers\";\n"
            "queues = ( { name = \"emails\"; workers = 4; } );\n"
            "redis = {\n"
            "  host = \"10.0.0.5\";\n"
            "  port = 6380;\n"
            "  user = \"delayq\";\n"
            "  password = \"secret\";\n"
            "  db = 3;\n"
            "  prefix = \"jobs\";\n"
            "  connect_timeout = \"2s\";\n"
            "  command_timeout = \"1m30s\";\n"
            "  keepalive = false;\n"
            "  max_payload = 65536;\n"
            "};\n"
            "log = { level = \"info\"; };\n");
    ck_assert_str_eq(rc.host, "10.0.0.5");
    ck_assert_int_eq(rc.port, 6380);
    ck_assert_ptr_null(rc.unix_socket);
    ck_assert_str_eq(rc.user, "delayq");
    ck_assert_str_eq(rc.password, "secret");
    ck_assert_int_eq(rc.db, 3);
    ck_assert_str_eq(rc.prefix, "jobs");
    ck_assert_int_eq(rc.connect_timeout_ms, 2000);
    ck_assert_int_eq(rc.command_timeout_ms, 90000);
    ck_assert_int_eq(rc.keepalive, 0);
    ck_assert_uint_eq(rc.max_payload, 65536);

    dq_options opt;
    redis_conf_to_options(&rc, &opt);
    ck_assert_str_eq(opt.host, "10.0.0.5");
    ck_assert_int_eq(opt.port, 6380);
    ck_assert_str_eq(opt.user, "delayq");
    ck_assert_str_eq(opt.password, "secret");
    ck_assert_int_eq(opt.db, 3);
    ck_assert_str_eq(opt.prefix, "jobs");
    ck_assert_int_eq(opt.connect_timeout_ms, 2000);
    ck_assert_int_eq(opt.command_timeout_ms, 90000);
    ck_assert_int_eq(opt.keepalive, 0);
    ck_assert_uint_eq(opt.max_payload, 65536);
    redis_conf_free(&rc);
}
END_TEST

START_TEST(unix_socket_is_read)
{
    struct redis_conf rc;
    load_ok(&rc, "redis = { unix_socket = \"/run/redis/redis-server.sock\"; };\n");
    ck_assert_str_eq(rc.unix_socket, "/run/redis/redis-server.sock");
    dq_options opt;
    redis_conf_to_options(&rc, &opt);
    ck_assert_str_eq(opt.unix_path, "/run/redis/redis-server.sock");
    redis_conf_free(&rc);
}
END_TEST

static void assert_default_options(const struct redis_conf *rc)
{
    dq_options got, want;
    redis_conf_to_options(rc, &got);
    dq_options_init(&want);
    ck_assert_str_eq(got.host, want.host);
    ck_assert_int_eq(got.port, want.port);
    ck_assert_ptr_null(got.unix_path);
    ck_assert_ptr_null(got.user);
    ck_assert_ptr_null(got.password);
    ck_assert_int_eq(got.db, want.db);
    ck_assert_str_eq(got.prefix, want.prefix);
    ck_assert_int_eq(got.connect_timeout_ms, want.connect_timeout_ms);
    ck_assert_int_eq(got.command_timeout_ms, want.command_timeout_ms);
    ck_assert_int_eq(got.keepalive, want.keepalive);
    ck_assert_uint_eq(got.max_payload, want.max_payload);
}

START_TEST(no_redis_group_means_defaults)
{
    struct redis_conf rc;
    load_ok(&rc, "queues = ( { name = \"emails\"; } );\nreaper = { interval = \"1s\"; };\n");
    assert_default_options(&rc);
    /* the prefix is resolved at load: its readers never meet NULL */
    ck_assert_str_eq(rc.prefix, DQ_DEFAULT_PREFIX);
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { };\n");
    assert_default_options(&rc);
    ck_assert_str_eq(rc.prefix, DQ_DEFAULT_PREFIX);
    redis_conf_free(&rc);
}
END_TEST

START_TEST(syntax_error_anywhere_is_reported)
{
    load_bad("redis = { port = 6379; };\n"
             "queues = (\n"
             "  { name = \"emails\"; workers = ; }\n"
             ");\n", 3, "syntax error");
}
END_TEST

START_TEST(unknown_key_is_named_alone)
{
    char err[512];
    struct redis_conf rc;
    write_file("delayqd.conf", "redis = {\n  port = 6379;\n  hots = \"x\";\n};\n");
    redis_conf_init(&rc);
    ck_assert_int_eq(redis_conf_load(&rc, path, err, sizeof err), -1);
    char want[300];
    snprintf(want, sizeof want, "%s:3: unknown setting redis.hots", path);
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(wrong_types_are_named)
{
    load_bad("redis = {\n  port = \"6379\";\n};\n", 2, "redis.port: expected an integer");
    load_bad("redis = {\n  db = 1.5;\n};\n", 2, "redis.db: expected an integer");
    load_bad("redis = {\n\n  host = 5;\n};\n", 3, "redis.host: expected a string");
    load_bad("redis = { keepalive = 1; };\n", 1, "redis.keepalive: expected true or false");
    load_bad("redis = { max_payload = \"1M\"; };\n", 1, "redis.max_payload: expected an integer");
    load_bad("redis = 5;\n", 1, "redis: expected a group");
}
END_TEST

START_TEST(out_of_range_values)
{
    load_bad("redis = {\n  port = 0;\n};\n", 2, "redis.port: 0 is out of range");
    load_bad("redis = {\n  port = 70000;\n};\n", 2, "redis.port: 70000 is out of range");
    load_bad("redis = {\n  db = -1;\n};\n", 2, "redis.db: -1 is out of range");
    load_bad("redis = { max_payload = 0; };\n", 1, "redis.max_payload: 0 is out of range");
    load_bad("redis = { port = 6379L; db = 9999999999L; };\n", 1, "redis.db");
}
END_TEST

START_TEST(durations_need_a_unit)
{
    struct redis_conf rc;
    load_ok(&rc, "redis = { connect_timeout = \"500ms\"; command_timeout = \"0s\"; };\n");
    ck_assert_int_eq(rc.connect_timeout_ms, 500);
    ck_assert_int_eq(rc.command_timeout_ms, 0);
    redis_conf_free(&rc);

    load_bad("redis = {\n  connect_timeout = \"5\";\n};\n", 2,
             "redis.connect_timeout: \"5\" has no unit");
    load_bad("redis = {\n  command_timeout = \"10x\";\n};\n", 2,
             "redis.command_timeout: bad duration \"10x\": unknown unit");
    load_bad("redis = {\n  command_timeout = 5;\n};\n", 2,
             "redis.command_timeout: expected a duration string");
    load_bad("redis = { connect_timeout = \"0s\"; };\n", 1, "redis.connect_timeout: must be at least");
    load_bad("redis = { connect_timeout = \"30d\"; };\n", 1, "is too long");
}
END_TEST

START_TEST(durability_is_read)
{
    struct redis_conf rc;
    load_ok(&rc, "redis = { port = 6379; };\n");
    ck_assert_int_eq(rc.durability, DQ_DURABILITY_LOCAL);
    ck_assert_int_eq(rc.replication_timeout_ms, DQ_DEFAULT_REPLICATION_TIMEOUT_MS);
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { durability = \"replicated\"; replication_timeout = \"250ms\"; };\n");
    dq_options opt;
    redis_conf_to_options(&rc, &opt);
    ck_assert_int_eq(opt.durability, DQ_DURABILITY_REPLICATED);
    ck_assert_int_eq(opt.replication_timeout_ms, 250);
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { durability = \"local\"; };\n");
    ck_assert_int_eq(rc.durability, DQ_DURABILITY_LOCAL);
    redis_conf_free(&rc);

    load_bad("redis = {\n  durability = \"sync\";\n};\n", 2,
             "redis.durability: \"sync\" is not \"local\" or \"replicated\"");
    load_bad("redis = { durability = true; };\n", 1, "redis.durability: expected a string");
    load_bad("redis = {\n  replication_timeout = \"1\";\n};\n", 2,
             "redis.replication_timeout: \"1\" has no unit");
    load_bad("redis = { replication_timeout = \"0s\"; };\n", 1,
             "redis.replication_timeout: must be at least");
}
END_TEST

START_TEST(password_file_first_line)
{
    struct redis_conf rc;
    write_file("redis.pass", "s3cret\r\nsecond line\n");
    char text[512];
    /* Relative: next to the config file. */
    snprintf(text, sizeof text, "redis = { password_file = \"redis.pass\"; };\n");
    load_ok(&rc, text);
    ck_assert_str_eq(rc.password, "s3cret");
    redis_conf_free(&rc);
    /* Absolute, without a trailing newline. */
    const char *abs = write_file("other.pass", "pw");
    snprintf(text, sizeof text, "redis = { password_file = \"%s\"; };\n", abs);
    load_ok(&rc, text);
    ck_assert_str_eq(rc.password, "pw");
    redis_conf_free(&rc);
}
END_TEST

START_TEST(password_file_problems)
{
    char text[512], want[400];
    snprintf(text, sizeof text, "redis = {\n  password_file = \"%s/missing.pass\";\n};\n", dir);
    snprintf(want, sizeof want, "redis.password_file: cannot read %s/missing.pass: "
             "No such file or directory", dir);
    load_bad(text, 2, want);

    write_file("empty.pass", "\n");
    load_bad("redis = {\n  password_file = \"empty.pass\";\n};\n", 2, "is empty");

    load_bad("redis = {\n  password = \"a\";\n  password_file = \"x\";\n};\n", 3,
             "redis.password and redis.password_file are both set");
    load_bad("redis = {\n  password_file = \"x\";\n  password = \"a\";\n};\n", 3,
             "redis.password and redis.password_file are both set");
}
END_TEST

/* A password the whole machine can read is worth a warning, whether it is
 * in the configuration file or in its password_file. */
START_TEST(password_readable_by_others_is_named)
{
    struct redis_conf rc;
    char warn[600];
    load_ok(&rc, "redis = { password = \"pw\"; };\n");
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(redis_conf_secret_exposed(&rc, warn, sizeof warn), 1);
    ck_assert_msg(strstr(warn, path) && strstr(warn, "every user can read it"), "%s", warn);
    ck_assert_ptr_null(strchr(warn, '\n'));
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_eq(redis_conf_secret_exposed(&rc, warn, sizeof warn), 0);
    redis_conf_free(&rc);

    const char *pass = write_file("redis.pass", "pw\n");
    load_ok(&rc, "redis = { password_file = \"redis.pass\"; };\n");
    ck_assert_int_eq(chmod(path, 0644), 0);     /* holds no password itself */
    ck_assert_int_eq(chmod(pass, 0604), 0);
    ck_assert_int_eq(redis_conf_secret_exposed(&rc, warn, sizeof warn), 1);
    ck_assert_msg(strstr(warn, pass) != NULL, "%s", warn);
    ck_assert_int_eq(chmod(pass, 0640), 0);
    ck_assert_int_eq(redis_conf_secret_exposed(&rc, warn, sizeof warn), 0);
    redis_conf_free(&rc);

    load_ok(&rc, "redis = { port = 6379; };\n");
    ck_assert_int_eq(redis_conf_secret_exposed(&rc, warn, sizeof warn), 0);
    redis_conf_free(&rc);
}
END_TEST

START_TEST(other_problems)
{
    load_bad("redis = {\n  prefix = \"my jobs\";\n};\n", 2, "redis.prefix: key prefix has a space");
    load_bad("redis = {\n  prefix = \"a{b}\";\n};\n", 2, "redis.prefix");
    load_bad("redis = {\n  user = \"delayq\";\n};\n", 2, "redis.user needs redis.password");
    load_bad("redis = {\n  host = \"h\";\n  unix_socket = \"/s\";\n};\n", 3,
             "redis.host and redis.unix_socket are both set");
    load_bad("redis = { host = \"\"; };\n", 1, "redis.host is empty");
}
END_TEST

START_TEST(cluster_settings)
{
    struct redis_conf rc;
    dq_options opt;
    load_ok(&rc, "redis = {\n  cluster = true;\n"
                 "  nodes = [\"10.0.0.1:7000\", \"[::1]:7001\"];\n};\n");
    redis_conf_to_options(&rc, &opt);
    ck_assert_int_eq(opt.cluster, 1);
    ck_assert_uint_eq(opt.nnodes, 2);
    ck_assert_str_eq(opt.nodes[0], "10.0.0.1:7000");
    ck_assert_str_eq(opt.nodes[1], "[::1]:7001");
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { cluster = true; host = \"10.0.0.9\"; port = 7000; };\n");
    redis_conf_to_options(&rc, &opt);
    ck_assert_int_eq(opt.cluster, 1);
    ck_assert_uint_eq(opt.nnodes, 0); /* host:port is the seed */
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { port = 7000; };\n");
    redis_conf_to_options(&rc, &opt);
    ck_assert_int_eq(opt.cluster, 0);
    redis_conf_free(&rc);
    load_bad("redis = {\n  cluster = true;\n  nodes = [\"10.0.0.1\"];\n};\n", 3,
             "redis.nodes[0]: '10.0.0.1': expected HOST:PORT");
    load_bad("redis = {\n  cluster = true;\n  nodes = [];\n};\n", 3,
             "redis.nodes is empty: list at least one cluster node");
    load_bad("redis = {\n  cluster = true;\n  nodes = \"10.0.0.1:7000\";\n};\n", 3,
             "redis.nodes: expected a list");
    load_bad("redis = {\n  nodes = [\"10.0.0.1:7000\"];\n};\n", 2,
             "redis.nodes lists cluster nodes: it needs redis.cluster = true");
    load_bad("redis = {\n  cluster = true;\n  db = 3;\n};\n", 3,
             "redis.db must be 0 with redis.cluster");
    load_bad("redis = {\n  cluster = true;\n  sentinel = { master = \"m\"; "
             "nodes = [\"h:1\"]; };\n};\n", 2, "redis.cluster and redis.sentinel");
    load_bad("redis = {\n  cluster = true;\n  unix_socket = \"/s\";\n};\n", 2,
             "redis.cluster needs TCP nodes");
    load_bad("redis = {\n  cluster = 1;\n};\n", 2, "redis.cluster");
}
END_TEST

START_TEST(missing_and_empty_files)
{
    char err[512], want[400];
    struct redis_conf rc;
    redis_conf_init(&rc);
    snprintf(want, sizeof want, "cannot read %s/nope.conf: No such file or directory", dir);
    char nope[300];
    snprintf(nope, sizeof nope, "%s/nope.conf", dir);
    ck_assert_int_eq(redis_conf_load(&rc, nope, err, sizeof err), -1);
    ck_assert_str_eq(err, want);

    write_file("delayqd.conf", "");
    ck_assert_int_eq(redis_conf_load(&rc, path, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: the file is empty", path);
    ck_assert_str_eq(err, want);

    ck_assert_int_eq(redis_conf_load(&rc, dir, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "Is a directory"), "%s", err);
}
END_TEST

START_TEST(failed_load_keeps_the_old_settings)
{
    struct redis_conf rc;
    load_ok(&rc, "redis = { host = \"keep.me\"; port = 7000; };\n");
    char err[512];
    write_file("delayqd.conf", "redis = { host = \"new\"; port = 0; };\n");
    ck_assert_int_eq(redis_conf_load(&rc, path, err, sizeof err), -1);
    ck_assert_str_eq(rc.host, "keep.me");
    ck_assert_int_eq(rc.port, 7000);
    redis_conf_free(&rc);
}
END_TEST

START_TEST(read_from_a_parsed_file)
{
    /* The daemon parses the whole file once and hands it over. */
    config_t cfg;
    config_init(&cfg);
    ck_assert_int_eq(config_read_string(&cfg, "redis = { db = 2; };\nqueues = ();\n"),
                     CONFIG_TRUE);
    struct redis_conf rc;
    redis_conf_init(&rc);
    char err[512] = "";
    ck_assert_msg(redis_conf_read(&rc, &cfg, "daemon.conf", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(rc.db, 2);
    redis_conf_free(&rc);

    config_destroy(&cfg);
    config_init(&cfg);
    ck_assert_int_eq(config_read_string(&cfg, "\nredis = { port = true; };\n"), CONFIG_TRUE);
    ck_assert_int_eq(redis_conf_read(&rc, &cfg, "daemon.conf", err, sizeof err), -1);
    ck_assert_str_eq(err, "daemon.conf:2: redis.port: expected an integer");
    config_destroy(&cfg);
}
END_TEST

/* The tls group: on by its presence, files relative to the config file
 * and readable now, the pairs that need each other. */
START_TEST(tls_group)
{
    struct redis_conf rc;
    write_file("ca.crt", "not read here\n");
    write_file("client.crt", "x\n");
    load_ok(&rc, "redis = { tls = { ca_file = \"ca.crt\"; cert_file = \"client.crt\";\n"
                 "  server_name = \"redis.example\"; }; };\n");
    ck_assert_int_eq(rc.tls.enable, 1);
    ck_assert_int_eq(rc.tls.verify, 1);
    char want[300];
    snprintf(want, sizeof want, "%s/ca.crt", dir);
    ck_assert_str_eq(rc.tls.ca_file, want);
    ck_assert_ptr_null(rc.tls.key_file);
    dq_options opt;
    redis_conf_to_options(&rc, &opt);
    ck_assert_int_eq(opt.tls.enable, 1);
    ck_assert_str_eq(opt.tls.server_name, "redis.example");
    ck_assert_str_eq(opt.tls.ca_file, want);
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { tls = { enable = false; verify = false; }; };\n");
    ck_assert_int_eq(rc.tls.enable, 0);
    ck_assert_int_eq(rc.tls.verify, 0);
    redis_conf_free(&rc);
    load_ok(&rc, "redis = { port = 6380; };\n");
    ck_assert_int_eq(rc.tls.enable, 0);
    ck_assert_int_eq(rc.tls.verify, 1);
    redis_conf_free(&rc);
    load_bad("redis = {\n  tls = {\n    ca_file = \"missing.crt\";\n  };\n};\n", 3,
             "redis.tls.ca_file: cannot read");
    load_bad("redis = { tls = {\n  ca_dir = \"ca.crt\"; }; };\n", 2, "Not a directory");
    load_bad("redis = { tls = {\n  key_file = \"client.crt\"; }; };\n", 2,
             "redis.tls.key_file needs redis.tls.cert_file");
    load_bad("redis = { tls = {\n  cafile = \"ca.crt\"; }; };\n", 2, "redis.tls.cafile");
    load_bad("redis = {\n  tls = true;\n};\n", 2, "expected a group");
}
END_TEST

int main(void)
{
    make_dir();
    Suite *s = suite_create("redis_conf");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, full_group_is_read);
    tcase_add_test(tc, unix_socket_is_read);
    tcase_add_test(tc, no_redis_group_means_defaults);
    tcase_add_test(tc, syntax_error_anywhere_is_reported);
    tcase_add_test(tc, unknown_key_is_named_alone);
    tcase_add_test(tc, wrong_types_are_named);
    tcase_add_test(tc, out_of_range_values);
    tcase_add_test(tc, durations_need_a_unit);
    tcase_add_test(tc, password_file_first_line);
    tcase_add_test(tc, password_file_problems);
    tcase_add_test(tc, password_readable_by_others_is_named);
    tcase_add_test(tc, other_problems);
    tcase_add_test(tc, missing_and_empty_files);
    tcase_add_test(tc, failed_load_keeps_the_old_settings);
    tcase_add_test(tc, read_from_a_parsed_file);
    tcase_add_test(tc, durability_is_read);
    tcase_add_test(tc, tls_group);
    tcase_add_test(tc, cluster_settings);
    suite_add_tcase(s, tc);
    int status = fixture_run_suite(s);
    remove_dir();
    return status;
}
