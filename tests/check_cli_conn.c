/*
 * How the delayq command line reaches Redis, run as users run it: the
 * connection options, the -c file under them, and the password from -a,
 * --password-file, DELAYQ_PASSWORD, DELAYQ_PASSWORD_FILE or the file,
 * against a real redis-server that requires it (requirepass).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "fixture.h"

#define PASSWORD "s3cret-pw"

/* What delayq prints, once, when the password is on its command line. */
#define ARGV_WARNING "delayq: warning: a password given with -a or --password can be " \
    "read by other users of this host; use --password-file or DELAYQ_PASSWORD_FILE\n"

static struct redis_fixture fx;
static char pw_file[256];     /* holds PASSWORD and a newline */

/* ---- fixtures ----------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void start_redis(void)
{
    fixture_redis_start(&fx);
    cli_run_socket(fx.sock);
    snprintf(pw_file, sizeof pw_file, "%s/redis.pass", fx.dir);
}

static void stop_redis(void)
{
    fixture_redis_stop(&fx);
}

/* Remove a password a test set, even one that failed half-way. */
static void reset_password(void)
{
    struct timeval tv = { 5, 0 };
    redisContext *rc = redisConnectUnixWithTimeout(fx.sock, tv);
    ck_assert_msg(rc && !rc->err, "cannot reach the test redis");
    redisReply *r = redisCommand(rc, "AUTH %s", PASSWORD);
    if (r)
        freeReplyObject(r);
    r = redisCommand(rc, "CONFIG SET requirepass %s", "");
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "cannot reset requirepass");
    freeReplyObject(r);
    redisFree(rc);
}

static void clean_redis(void)
{
    reset_password();
    fixture_redis_flush(&fx);
}

/* Make the server require PASSWORD, and write it to pw_file. */
static void require_password(void)
{
    ck_assert_int_eq(fixture_redis_int(&fx, "CONFIG SET requirepass %s", PASSWORD), 0);
    write_file(pw_file, PASSWORD "\n");
}

/* The run's stderr starts with the -a warning, once; it is taken off so
 * that assert_ok and assert_fails look at the rest. */
static struct run_result *warned(struct run_result *r)
{
    size_t n = strlen(ARGV_WARNING);
    ck_assert_msg(strncmp(r->err, ARGV_WARNING, n) == 0, "no warning: '%s'", r->err);
    memmove(r->err, r->err + n, strlen(r->err + n) + 1);
    ck_assert_msg(!strstr(r->err, "warning"), "warned twice: '%s'", r->err);
    return r;
}

/* ---- the password ------------------------------------------------------- */

START_TEST(password_on_the_command_line_works_and_warns)
{
    require_password();
    assert_fails(CLI("stats"), 69, "NOAUTH");
    assert_fails(warned(CLI("-a", "wrong", "stats")), 69, "AUTH");
    assert_ok(warned(CLI("-a", PASSWORD, "stats")));
    assert_ok(warned(CLI("stats", "--password", PASSWORD)));
    /* Given twice (before and after COMMAND): still one warning. */
    char id[64];
    add_id(warned(CLI("-a", "wrong", "add", "-q", "pw", "-t", "t", "-a", PASSWORD)), id,
           sizeof id);
    /* A usage error says only that. */
    assert_fails(CLI("-a", PASSWORD, "stats", "--frob"), 2, "unknown option");
}
END_TEST

START_TEST(password_file_works_without_warning)
{
    require_password();
    assert_ok(CLI("--password-file", pw_file, "stats"));
    char id[64];
    add_id(CLI("add", "-q", "pf", "-t", "t", "--password-file", pw_file), id, sizeof id);
    assert_ok(CLI("show", "-q", "pf", id, "--password-file", pw_file));
    /* Only the first line counts; CR LF and a missing newline are fine. */
    write_file(pw_file, PASSWORD "\r\nsecond line\n");
    assert_ok(CLI("--password-file", pw_file, "stats"));
    write_file(pw_file, PASSWORD);
    assert_ok(CLI("--password-file", pw_file, "stats"));
    write_file(pw_file, "wrong\n");
    assert_fails(CLI("--password-file", pw_file, "stats"), 69, "AUTH");
}
END_TEST

START_TEST(password_from_the_environment)
{
    require_password();
    char var[300];
    snprintf(var, sizeof var, "DELAYQ_PASSWORD_FILE=%s", pw_file);
    struct cli_run file = { .env = { var } };
    assert_ok(CLI_HOW(&file, "stats"));
    struct cli_run pw = { .env = { "DELAYQ_PASSWORD=" PASSWORD } };
    char id[64];
    add_id(CLI_HOW(&pw, "add", "-q", "pw", "-t", "t"), id, sizeof id);
    /* Empty variables count as unset. */
    struct cli_run empty = { .env = { "DELAYQ_PASSWORD=", var } };
    assert_ok(CLI_HOW(&empty, "stats"));
    struct cli_run both = { .env = { "DELAYQ_PASSWORD=" PASSWORD, var } };
    assert_fails(CLI_HOW(&both, "stats"), 2,
                 "DELAYQ_PASSWORD and DELAYQ_PASSWORD_FILE are both set: unset one");
    struct cli_run missing = { .env = { "DELAYQ_PASSWORD_FILE=/nonexistent/pw" } };
    assert_fails(CLI_HOW(&missing, "stats"), 78,
                 "password file /nonexistent/pw (DELAYQ_PASSWORD_FILE): No such file");
}
END_TEST

/* Flags, then the environment, then the -c file. */
START_TEST(password_precedence)
{
    require_password();
    char var[300];
    snprintf(var, sizeof var, "DELAYQ_PASSWORD_FILE=%s", pw_file);
    struct cli_run wrong_env = { .env = { "DELAYQ_PASSWORD=wrong" } };
    assert_ok(CLI_HOW(&wrong_env, "--password-file", pw_file, "stats"));
    assert_ok(warned(CLI_HOW(&wrong_env, "-a", PASSWORD, "stats")));
    struct cli_run good_file = { .env = { var } };
    assert_fails(warned(CLI_HOW(&good_file, "-a", "wrong", "stats")), 69, "AUTH");

    /* The -c file's password is under both. */
    char conf[512];
    snprintf(conf, sizeof conf, "redis = {\n  unix_socket = \"%s\";\n"
             "  password = \"wrong\";\n};\n", fx.sock);
    write_file(fx.conf_path, conf);
    struct cli_run how = { .no_socket = true };
    assert_fails(CLI_HOW(&how, "-c", fx.conf_path, "stats"), 69, "AUTH");
    struct cli_run env_file = { .no_socket = true, .env = { var } };
    assert_ok(CLI_HOW(&env_file, "-c", fx.conf_path, "stats"));
    assert_ok(CLI_HOW(&how, "-c", fx.conf_path, "--password-file", pw_file, "stats"));
    snprintf(conf, sizeof conf, "redis = {\n  unix_socket = \"%s\";\n"
             "  password_file = \"%s\";\n};\n", fx.sock, pw_file);
    write_file(fx.conf_path, conf);
    assert_ok(CLI_HOW(&how, "-c", fx.conf_path, "stats"));
}
END_TEST

START_TEST(password_file_errors)
{
    require_password();
    assert_fails(CLI("--password-file", "/nonexistent/pw", "stats"), 78,
                 "password file /nonexistent/pw (--password-file): No such file or directory");
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty.pass", fx.dir);
    write_file(empty, "");
    assert_fails(CLI("stats", "--password-file", empty), 78, "the file is empty");
    write_file(empty, "\n");
    assert_fails(CLI("stats", "--password-file", empty), 78, "the file is empty");
    assert_fails(CLI("stats", "--password-file", fx.dir), 78, fx.dir);
    assert_fails(CLI("-a", PASSWORD, "--password-file", pw_file, "stats"), 2,
                 "give -a or --password-file, not both");
    assert_fails(CLI("stats", "--password-file"), 2, "option '--password-file' needs a value");
}
END_TEST

/* Start `delayq ... stats --watch 100ms` with its output in `out`. */
static pid_t spawn_watch(char *const argv[], const char *out)
{
    posix_spawn_file_actions_t fa;
    ck_assert_int_eq(posix_spawn_file_actions_init(&fa), 0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(&fa, 1, out,
                                                      O_WRONLY | O_CREAT | O_TRUNC, 0600), 0);
    ck_assert_int_eq(posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0), 0);
    char *envp[] = { "PATH=/usr/bin:/bin", NULL };
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* Wait until the watch has printed its first table: it is connected
 * (authenticated) and ends with 0 on SIGTERM from then on.  False after
 * 10 s of nothing. */
static bool wait_for_output(const char *out)
{
    for (int tries = 0; tries < 1000; tries++) {
        FILE *f = fopen(out, "r");
        ck_assert_msg(f != NULL, "%s: %s", out, strerror(errno));
        int c = getc(f);
        fclose(f);
        if (c != EOF)
            return true;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    return false;
}

/* /proc/PID/cmdline with its NULs as spaces (it names --watch). */
static void read_cmdline(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
}

/* Run a watch with `argv` until it has printed, read its command line
 * into `cmdline`, and stop it by pid (it ends with 0 on SIGTERM). */
static void watch_cmdline(char *const argv[], const char *out, char *cmdline, size_t len)
{
    pid_t pid = spawn_watch(argv, out);
    bool printed = wait_for_output(out);
    read_cmdline(pid, cmdline, len);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(printed, "the watch printed nothing in 10 s");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    ck_assert_msg(strstr(cmdline, "stats --watch 100ms"), "cmdline: '%s'", cmdline);
}

/* What the warning is about: -a's password is in /proc/PID/cmdline for
 * every user to read; --password-file's is not. */
START_TEST(password_file_keeps_it_out_of_cmdline)
{
    require_password();
    char *delayq = (char *)fixture_build_path("delayq");
    char cmdline[4096], out[300];
    snprintf(out, sizeof out, "%s/watch.out", fx.dir);
    char *by_file[] = { delayq, "-s", fx.sock, "--password-file", pw_file, "stats",
                        "--watch", "100ms", NULL };
    watch_cmdline(by_file, out, cmdline, sizeof cmdline);
    ck_assert_msg(strstr(cmdline, pw_file) && !strstr(cmdline, PASSWORD), "%s", cmdline);

    char *by_flag[] = { delayq, "-s", fx.sock, "-a", PASSWORD, "stats", "--watch",
                        "100ms", NULL };
    watch_cmdline(by_flag, out, cmdline, sizeof cmdline);
    ck_assert_msg(strstr(cmdline, PASSWORD), "%s", cmdline);
}
END_TEST

/* ---- where Redis is ----------------------------------------------------- */

START_TEST(redis_down_exits_69)
{
    struct cli_run how = { .no_socket = true };
    assert_fails(CLI_HOW(&how, "-s", "/nonexistent.sock", "stats"), 69,
                 "cannot connect to redis at /nonexistent.sock");
    assert_fails(CLI_HOW(&how, "add", "-q", "x", "-t", "t", "-H", "127.0.0.1", "-p", "1"), 69,
                 "cannot connect to redis at 127.0.0.1:1: Connection refused");
}
END_TEST

START_TEST(config_file_is_used_and_overridden)
{
    FILE *f = fopen(fx.conf_path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "queues = ();\nredis = {\n  unix_socket = \"%s\";\n  prefix = \"other\";\n"
               "  max_payload = 10;\n};\n", fx.sock);
    ck_assert_int_eq(fclose(f), 0);
    struct cli_run how = { .no_socket = true };
    char id[64];
    add_id(CLI_HOW(&how, "-c", fx.conf_path, "add", "-q", "cf", "-t", "t", "0123456789"),
           id, sizeof id);
    ck_assert_int_eq(fixture_redis_int(&fx, "EXISTS other:queues"), 1);
    ck_assert_int_eq(fixture_redis_int(&fx, "EXISTS dq:queues"), 0);
    assert_fails(CLI_HOW(&how, "-c", fx.conf_path, "add", "-q", "cf", "-t", "t", "01234567890"),
                 2, "payload is 11 bytes, over the limit of 10");
    /* Options after the command override the file. */
    add_id(CLI_HOW(&how, "add", "-c", fx.conf_path, "--prefix", "dq", "-q", "cf", "-t", "t"),
           id, sizeof id);
    ck_assert_int_eq(fixture_redis_int(&fx, "EXISTS dq:queues"), 1);
    assert_fails(CLI_HOW(&how, "-c", fx.conf_path, "-H", "127.0.0.1", "-p", "1", "stats"), 69,
                 "127.0.0.1:1");
}
END_TEST

START_TEST(broken_config_file_exits_78)
{
    FILE *f = fopen(fx.conf_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("redis = {\n  port = 6379;\n  host = ;\n};\n", f);
    ck_assert_int_eq(fclose(f), 0);
    char want[300];
    snprintf(want, sizeof want, "delayq: %s:3: syntax error", fx.conf_path);
    struct run_result *r = CLI("-c", fx.conf_path, "stats");
    assert_fails(r, 78, want);

    f = fopen(fx.conf_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("redis = {\n  port = \"6379\";\n};\n", f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(want, sizeof want, "delayq: %s:2: redis.port: expected an integer\n", fx.conf_path);
    r = CLI("stats", "-c", fx.conf_path);
    assert_fails(r, 78, "");
    ck_assert_str_eq(r->err, want);

    assert_fails(CLI("-c", "/nonexistent/delayqd.conf", "stats"), 78,
                 "cannot read /nonexistent/delayqd.conf: No such file or directory");
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    start_redis();
    Suite *s = suite_create("cli_conn");
    TCase *tc = fixture_tcase(s, "password", 30, NULL, NULL, clean_redis, NULL);
    tcase_add_test(tc, password_on_the_command_line_works_and_warns);
    tcase_add_test(tc, password_file_works_without_warning);
    tcase_add_test(tc, password_from_the_environment);
    tcase_add_test(tc, password_precedence);
    tcase_add_test(tc, password_file_errors);
    tcase_add_test(tc, password_file_keeps_it_out_of_cmdline);
    tc = fixture_tcase(s, "connection", 30, NULL, NULL, clean_redis, NULL);
    tcase_add_test(tc, redis_down_exits_69);
    tcase_add_test(tc, config_file_is_used_and_overridden);
    tcase_add_test(tc, broken_config_file_exits_78);
    int status = fixture_run_suite(s);
    stop_redis();
    return status;
}
