/* The exec handler, running real shell scripts written to the test's
 * directory. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handler_test.h"

/* Exits as the first line of its input says. */
static const char modes_sh[] =
    "#!/bin/sh\n"
    "read mode\n"
    "case \"$mode\" in\n"
    "  ok) exit 0 ;;\n"
    "  later) echo 'try later' >&2; exit 75 ;;\n"
    "  fail) echo progress >&2; printf 'boom: disk on fire\\n\\n' >&2; exit 3 ;;\n"
    "  quiet) exit 4 ;;\n"
    "  signal) kill -TERM $$; sleep 5 ;;\n"
    "  noeol) printf 'first line\\nno newline at the end' >&2; exit 5 ;;\n"
    "  long) i=0; while [ $i -lt 100 ]; do printf 0123456789 >&2; i=$((i+1)); done\n"
    "        echo >&2; exit 6 ;;\n"
    "esac\n"
    "exit 99\n";

static void open_script(struct ht *t, const char *name, const char *text,
                        const char *more_settings, int64_t timeout_ms)
{
    const char *path = ht_write(name, text, 0755);
    char settings[1024];
    snprintf(settings, sizeof settings, "argv = [\"%s\"];\nenv = [\"OUT=%s\"];\n%s",
             path, ht_dir, more_settings);
    ht_open_ok(t, ht_handler_dir(), "exec.so", settings, timeout_ms);
}

static dq_handler_result run_str(struct ht *t, const char *payload, dq_handler_outcome *out)
{
    return ht_run(t, payload, strlen(payload), out);
}

/* Open descriptors of this process. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

START_TEST(exec_maps_exit_status)
{
    struct ht t;
    dq_handler_outcome out;
    int fds = count_fds();
    open_script(&t, "modes.sh", modes_sh, "", 0);
    ck_assert_int_eq(run_str(&t, "ok", &out), DQ_HANDLER_OK);
    ck_assert_int_eq(run_str(&t, "later\n", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "exit status 75: try later");
    ck_assert_int_eq(out.retry_delay_ms, -1);
    ck_assert_int_eq(run_str(&t, "fail\n", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "exit status 3: boom: disk on fire");
    ck_assert_int_eq(run_str(&t, "quiet\n", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "exit status 4");
    ck_assert_int_eq(run_str(&t, "signal\n", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "killed by signal 15");
    ck_assert_int_eq(run_str(&t, "noeol\n", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "exit status 5: no newline at the end");
    ck_assert_int_eq(run_str(&t, "long\n", &out), DQ_HANDLER_FAIL);
    ck_assert_uint_eq(strlen(out.error), strlen("exit status 6: ") + 400);
    ck_assert_int_eq(run_str(&t, "", &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "exit status 99");
    ht_close(&t);

    /* A program that cannot be executed (bad interpreter). */
    char exp[600];
    snprintf(exp, sizeof exp, "exit status 127: cannot execute %s: No such file or "
             "directory", ht_path("bad.sh"));
    open_script(&t, "bad.sh", "#!/nonexistent/sh\n", "", 0);
    ck_assert_int_eq(run_str(&t, "x", &out), DQ_HANDLER_FAIL);
    /* (Under valgrind, its own execve wrapper exits 101 instead.) */
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || !strstr(preload, "vgpreload"))
        ck_assert_str_eq(out.error, exp);
    ht_close(&t);

    int status;
    ck_assert_int_le(waitpid(-1, &status, WNOHANG), 0); /* no zombie left */
    ck_assert_int_eq(count_fds(), fds);                  /* no descriptor either */
}
END_TEST

START_TEST(exec_passes_payload_and_environment)
{
    struct ht t;
    dq_handler_outcome out;
    ht_write("env.sh",
             "#!/bin/sh\n"
             "cat > \"$OUT/payload\"\n"
             "env | grep '^DELAYQ_' | sort > \"$OUT/env\"\n"
             "printf '%s|%s' \"$FOO\" \"$FROM_DAEMON\" > \"$OUT/vars\"\n"
             "grep '^SigIgn' /proc/$$/status > \"$OUT/sigign\"\n"
             "if [ -e /proc/$$/fd/77 ]; then echo leaked > \"$OUT/fd\"; fi\n", 0755);
    /* The configured env overrides the daemon's; the job's variables
     * override both. */
    char settings[1024];
    snprintf(settings, sizeof settings, "argv = [\"%s\"];\n"
             "env = [\"OUT=%s\", \"FOO=bar baz\", \"DELAYQ_QUEUE=wrong\"];",
             ht_path("env.sh"), ht_dir);
    ht_open_ok(&t, ht_handler_dir(), "exec.so", settings, 0);

    setenv("FROM_DAEMON", "yes", 1);
    setenv("DELAYQ_JOB_ID", "stale", 1);
    int fd = open("/dev/null", O_RDONLY);     /* not close-on-exec */
    ck_assert_int_eq(dup2(fd, 77), 77);
    close(fd);
    struct sigaction ign = { .sa_handler = SIG_IGN }, old;
    sigaction(SIGPIPE, &ign, &old);           /* as the daemon does */

    static const char payload[] = "line one\nbin\0ary\xff end";
    ck_assert_int_eq(ht_run(&t, payload, sizeof payload - 1, &out), DQ_HANDLER_OK);
    sigaction(SIGPIPE, &old, NULL);
    close(77);

    size_t len;
    char *got = ht_read(ht_path("payload"), &len);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(len, sizeof payload - 1);
    ck_assert_int_eq(memcmp(got, payload, len), 0);
    free(got);
    got = ht_read(ht_path("env"), NULL);
    ck_assert_str_eq(got, "DELAYQ_ATTEMPT=2\n"
                          "DELAYQ_JOB_ID=j-42\n"
                          "DELAYQ_JOB_TYPE=order.cancel\n"
                          "DELAYQ_MAX_ATTEMPTS=5\n"
                          "DELAYQ_QUEUE=q1\n");
    free(got);
    got = ht_read(ht_path("vars"), NULL);
    ck_assert_str_eq(got, "bar baz|yes");
    free(got);
    /* No standard signal ignored, SIGPIPE least of all.  (Signals 32 and 33
     * belong to the C library, which refuses to touch them: they stay as
     * whoever started the test left them.) */
    got = ht_read(ht_path("sigign"), NULL);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(strncmp(got, "SigIgn:\t", 8) == 0, "%s", got);
    unsigned long long ignored = strtoull(got + 8, NULL, 16);
    ck_assert_msg((ignored & 0x7fffffffULL) == 0, "%s", got);
    free(got);
    ck_assert_ptr_null(ht_read(ht_path("fd"), NULL));
    ht_close(&t);
}
END_TEST

START_TEST(exec_copes_with_big_input_and_output)
{
    struct ht t;
    dq_handler_outcome out;
    /* Chatter on stderr before reading stdin: neither side may block. */
    open_script(&t, "chatty.sh",
                "#!/bin/sh\n"
                "head -c 300000 /dev/zero | tr '\\0' x >&2\n"
                "echo >&2; echo 'last words' >&2\n"
                "wc -c > \"$OUT/count\"\n"
                "exit 9\n", "", 0);
    size_t n = 4 << 20;
    char *big = malloc(n + 1);
    memset(big, 'p', n);
    big[n] = '\0';
    ck_assert_int_eq(ht_run(&t, big, n, &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "exit status 9: last words");
    char *count = ht_read(ht_path("count"), NULL);
    ck_assert_int_eq(atol(count), (long)n);
    free(count);
    ht_close(&t);

    /* A program that does not read its input: EPIPE, and no SIGPIPE kills
     * us, although it is not ignored here. */
    signal(SIGPIPE, SIG_DFL);
    open_script(&t, "deaf.sh", "#!/bin/sh\nexit 0\n", "", 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ht_run(&t, big, n, &out), DQ_HANDLER_OK);
    sigset_t pending;
    sigpending(&pending);
    ck_assert(!sigismember(&pending, SIGPIPE));
    free(big);
    ht_close(&t);
}
END_TEST

START_TEST(exec_timeout_kills_the_process_group)
{
    struct ht t;
    dq_handler_outcome out;
    open_script(&t, "slow.sh",
                "#!/bin/sh\n"
                "sleep 10 &\n"
                "echo $! > \"$OUT/bg\"\n"
                "echo $$ > \"$OUT/sh\"\n"
                "wait\n", "timeout = \"200ms\";", 0);
    int64_t t0 = tu_mono_ms();
    ck_assert_int_eq(run_str(&t, "", &out), DQ_HANDLER_RETRY);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_str_eq(out.error, "timeout after 200 ms");
    ck_assert_msg(took >= 190 && took < 1000, "took %lld ms", (long long)took);
    int status;
    ck_assert_int_le(waitpid(-1, &status, WNOHANG), 0); /* reaped */
    char *bg = ht_read(ht_path("bg"), NULL), *sh = ht_read(ht_path("sh"), NULL);
    ck_assert_ptr_nonnull(bg);
    ck_assert_ptr_nonnull(sh);
    pid_t pids[2] = { atoi(bg), atoi(sh) };
    free(bg);
    free(sh);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_gt(pids[i], 1);
        int gone = 0;
        for (int k = 0; k < 100 && !(gone = !tu_process_running(pids[i])); k++)
            usleep(10000);
        ck_assert_msg(gone, "process %d still runs", (int)pids[i]);
    }
    ht_close(&t);

    /* The default: the type's timeout less a margin, here 500 - 50 ms. */
    open_script(&t, "slow.sh", "#!/bin/sh\nexec sleep 10\n", "", 500);
    ck_assert_int_eq(run_str(&t, "", &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "timeout after 450 ms");
    ht_close(&t);

    /* A longer timeout than the type's works, with a warning. */
    ht_log_clear();
    open_script(&t, "slow.sh", "#!/bin/sh\nexit 0\n", "timeout = \"2s\";", 1000);
    ck_assert_ptr_nonnull(strstr(ht_log_text, "its timeout is not shorter than the type's"));
    ht_close(&t);
}
END_TEST

START_TEST(exec_refuses_bad_settings)
{
    static const struct { const char *settings, *why; } cases[] = {
        { "", "exec: argv is required: the program and its arguments, such as "
              "[\"/usr/local/bin/prog\", \"arg\"]" },
        { "argv = [];", "exec: argv is required: the program and its arguments, "
                        "such as [\"/usr/local/bin/prog\", \"arg\"]" },
        { "argv = [\"prog\"];", "exec: argv[0] \"prog\" must be an absolute path (no "
                               "shell, no PATH search)" },
        { "argv = [\"/nonexistent/prog\"];", "exec: /nonexistent/prog: No such file or "
                                            "directory" },
        { "argv = [\"/bin/true\"]; env = [\"NOEQUALS\"];",
          "exec: env item \"NOEQUALS\": expected NAME=VALUE" },
        { "argv = [\"/bin/true\"]; env = [\"=x\"];",
          "exec: env item \"=x\": expected NAME=VALUE" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ht t;
        char err[1024], exp[1024];
        ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "exec.so", cases[i].settings, 0,
                                 err, sizeof err), -1);
        snprintf(exp, sizeof exp, "handler %s/exec.so: %s", ht_handler_dir(), cases[i].why);
        ck_assert_str_eq(err, exp);
    }
    struct ht t;
    char err[1024];
    ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "exec.so", "argv = \"/bin/true\";", 0,
                             err, sizeof err), -1);
    ck_assert_msg(strstr(err, ":5: handlers.[0].settings.argv: expected a list of strings"),
                  "%s", err);
}
END_TEST

void add_exec_tcase(Suite *s)
{
    TCase *tc = fixture_tcase(s, "exec", 20, NULL, NULL, ht_tmp_setup, ht_tmp_teardown);
    tcase_add_test(tc, exec_maps_exit_status);
    tcase_add_test(tc, exec_passes_payload_and_environment);
    tcase_add_test(tc, exec_copes_with_big_input_and_output);
    tcase_add_test(tc, exec_timeout_kills_the_process_group);
    tcase_add_test(tc, exec_refuses_bad_settings);
}
