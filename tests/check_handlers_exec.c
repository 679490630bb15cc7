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

#include "fixture.h"
#include "handler_test.h"
#include "run_prog.h"

/* The PATH a program gets when the daemon has none, as documented. */
#define EXEC_DEFAULT_PATH_TEXT "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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
    snprintf(settings, sizeof settings, "argv = [\"%s\"];\nsetenv = { OUT = \"%s\"; };\n%s",
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

/* Writes the environment it was started with (as execve gave it: a shell
 * adds PWD to what `env` shows) to $OUT/env, one variable a line, sorted. */
static const char env_sh[] =
    "#!/bin/sh\n"
    "tr '\\0' '\\n' < /proc/$$/environ | LC_ALL=C sort > \"$OUT/env\"\n";

/* Whether `line` is one of text's lines. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return 1;
    return 0;
}

/* What a systemd service's environment may hold, besides the usual. */
static void set_daemon_environment(void)
{
    setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
    setenv("DB_PASSWORD", "s3cret-from-a-drop-in", 1);
    setenv("INVOCATION_ID", "0123456789abcdef", 1);
    setenv("HOME", "/var/lib/delayq", 1);
    setenv("LANG", "C.UTF-8", 1);
    setenv("DELAYQ_JOB_ID", "stale", 1);
}

/* Open env_sh with `settings` after its argv, run one job, and return what
 * the program's environment was (malloc'd). */
static char *environment_of_program(const char *settings)
{
    struct ht t;
    dq_handler_outcome out;
    char text[1024];
    snprintf(text, sizeof text, "argv = [\"%s\"];\n%s", ht_write("env.sh", env_sh, 0755),
             settings);
    ht_open_ok(&t, ht_handler_dir(), "exec.so", text, 0);
    ck_assert_int_eq(run_str(&t, "", &out), DQ_HANDLER_OK);
    ht_close(&t);
    char *got = ht_read(ht_path("env"), NULL);
    ck_assert_ptr_nonnull(got);
    return got;
}

START_TEST(exec_passes_payload_and_job_variables)
{
    struct ht t;
    dq_handler_outcome out;
    ht_write("payload.sh",
             "#!/bin/sh\n"
             "cat > \"$OUT/payload\"\n"
             "grep '^SigIgn' /proc/$$/status > \"$OUT/sigign\"\n"
             "if [ -e /proc/$$/fd/77 ]; then echo leaked > \"$OUT/fd\"; fi\n", 0755);
    char settings[1024];
    snprintf(settings, sizeof settings, "argv = [\"%s\"];\nsetenv = { OUT = \"%s\"; };",
             ht_path("payload.sh"), ht_dir);
    ht_open_ok(&t, ht_handler_dir(), "exec.so", settings, 0);

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

/* The program gets PATH, LANG, what env and setenv name, and the job's
 * variables: nothing else of the daemon's environment. */
START_TEST(exec_program_gets_a_minimal_environment)
{
    set_daemon_environment();
    setenv("PATH", "/opt/delayq/bin:/usr/bin:/bin", 1);
    char settings[512], want[2048];
    snprintf(settings, sizeof settings,
             "env = [\"HOME\"];\n"
             "setenv = { OUT = \"%s\"; GREETING = \"bonjour, tout le monde\"; "
             "EMPTY = \"\"; };", ht_dir);
    char *got = environment_of_program(settings);
    snprintf(want, sizeof want,
             "DELAYQ_ATTEMPT=2\n"
             "DELAYQ_FENCE=4242\n"
             "DELAYQ_JOB_ID=j-42\n"
             "DELAYQ_JOB_TYPE=order.cancel\n"
             "DELAYQ_MAX_ATTEMPTS=5\n"
             "DELAYQ_QUEUE=q1\n"
             "EMPTY=\n"
             "GREETING=bonjour, tout le monde\n"
             "HOME=/var/lib/delayq\n"
             "LANG=C.UTF-8\n"
             "OUT=%s\n"
             "PATH=/opt/delayq/bin:/usr/bin:/bin\n", ht_dir);
    ck_assert_msg(!strstr(got, "NOTIFY_SOCKET"), "the program sees NOTIFY_SOCKET:\n%s", got);
    ck_assert_msg(!strstr(got, "s3cret"), "the program sees the secret:\n%s", got);
    ck_assert_str_eq(got, want);
    free(got);

    /* Without settings: only PATH, LANG and the job's variables.  HOME is
     * not passed unless named. */
    ht_write("env.sh", "#!/bin/sh\ntr '\\0' '\\n' < /proc/$$/environ | LC_ALL=C sort > "
             "\"$DELAYQ_QUEUE\"\n", 0755);
    struct ht t;
    dq_handler_outcome out;
    snprintf(settings, sizeof settings, "argv = [\"%s\"];", ht_path("env.sh"));
    ht_open_ok(&t, ht_handler_dir(), "exec.so", settings, 0);
    dq_handler_job job;
    ht_job(&job, "", 0);
    job.queue = ht_path("bare");
    ck_assert_int_eq(handler_run(&t.lh, &job, &out), DQ_HANDLER_OK);
    ht_close(&t);
    got = ht_read(ht_path("bare"), NULL);
    ck_assert_ptr_nonnull(got);
    snprintf(want, sizeof want,
             "DELAYQ_ATTEMPT=2\n"
             "DELAYQ_FENCE=4242\n"
             "DELAYQ_JOB_ID=j-42\n"
             "DELAYQ_JOB_TYPE=order.cancel\n"
             "DELAYQ_MAX_ATTEMPTS=5\n"
             "DELAYQ_QUEUE=%s\n"
             "LANG=C.UTF-8\n"
             "PATH=/opt/delayq/bin:/usr/bin:/bin\n", ht_path("bare"));
    ck_assert_str_eq(got, want);
    free(got);
}
END_TEST

/* A daemon without PATH gives a default one, without LANG none; setenv
 * overrides both. */
START_TEST(exec_path_default_and_overrides)
{
    set_daemon_environment();
    unsetenv("PATH");
    unsetenv("LANG");
    char settings[512];
    snprintf(settings, sizeof settings, "setenv = { OUT = \"%s\"; };", ht_dir);
    char *got = environment_of_program(settings);
    ck_assert_msg(has_line(got, "PATH=" EXEC_DEFAULT_PATH_TEXT), "%s", got);
    ck_assert_msg(!strstr(got, "LANG"), "%s", got);
    free(got);

    setenv("PATH", "", 1); /* empty is none */
    got = environment_of_program(settings);
    ck_assert_msg(has_line(got, "PATH=" EXEC_DEFAULT_PATH_TEXT), "%s", got);
    free(got);

    setenv("PATH", "/usr/bin:/bin", 1);
    setenv("LANG", "de_DE.UTF-8", 1);
    snprintf(settings, sizeof settings,
             "setenv = { OUT = \"%s\"; PATH = \"/srv/bin:/usr/bin:/bin\"; LANG = \"C\"; };",
             ht_dir);
    got = environment_of_program(settings);
    ck_assert_msg(has_line(got, "LANG=C"), "%s", got);
    ck_assert_msg(has_line(got, "PATH=/srv/bin:/usr/bin:/bin"), "%s", got);
    ck_assert_msg(!strstr(strstr(got, "PATH=") + 1, "PATH="), "%s", got); /* once */
    ck_assert_msg(!strstr(strstr(got, "LANG=") + 1, "LANG="), "%s", got);
    free(got);
}
END_TEST

/* env naming a variable the daemon lacks: logged, and no variable.
 * env = ["NAME=value"], the form of releases that passed the whole
 * environment: still sets it, with a warning that hides the value. */
START_TEST(exec_env_absent_and_old_form)
{
    set_daemon_environment();
    unsetenv("TZ");
    ht_log_clear();
    char settings[512];
    snprintf(settings, sizeof settings,
             "env = [\"TZ\", \"OUT=%s\", \"API_TOKEN=tok-123=456\"];", ht_dir);
    char *got = environment_of_program(settings);
    ck_assert_msg(has_line(got, "API_TOKEN=tok-123=456"), "%s", got);
    ck_assert_msg(!strstr(got, "TZ="), "%s", got);
    free(got);
    ck_assert_msg(strstr(ht_log_text, "exec: env names TZ, which delayqd's environment "
                                      "does not have: the program will not have it "
                                      "either\n"), "%s", ht_log_text);
    ck_assert_msg(strstr(ht_log_text, "exec: env item \"API_TOKEN=...\": env names "
                                      "variables to pass through; set this one with "
                                      "setenv = { API_TOKEN = \"...\"; }\n"),
                  "%s", ht_log_text);
    ck_assert_msg(!strstr(ht_log_text, "tok-123"), "the log shows the value: %s",
                  ht_log_text);
}
END_TEST

/* The job's variables are the running job's, from job to job, however long
 * its strings (the buffer they live in is reused and grows). */
START_TEST(exec_job_variables_follow_the_job)
{
    struct ht t;
    dq_handler_outcome out;
    ht_write("id.sh", "#!/bin/sh\nprintf '%s %s %s' \"$DELAYQ_JOB_ID\" \"$DELAYQ_ATTEMPT\" "
             "\"$DELAYQ_FENCE\" > \"$OUT/id\"\n", 0755);
    char settings[512];
    snprintf(settings, sizeof settings, "argv = [\"%s\"];\nsetenv = { OUT = \"%s\"; };",
             ht_path("id.sh"), ht_dir);
    ht_open_ok(&t, ht_handler_dir(), "exec.so", settings, 0);
    static char long_id[3000];
    memset(long_id, 'x', sizeof long_id - 1);
    const char *ids[] = { "a", long_id, "order:17", long_id + 2000 };
    for (int i = 0; i < 4; i++) {
        dq_handler_job job;
        ht_job(&job, "", 0);
        job.id = ids[i];
        job.attempt = i + 1;
        job.fence = INT64_C(9007199254740000) + i;  /* beyond 32 bits */
        ck_assert_int_eq(handler_run(&t.lh, &job, &out), DQ_HANDLER_OK);
        char want[3100];
        snprintf(want, sizeof want, "%s %d %lld", ids[i], i + 1, (long long)job.fence);
        char *got = ht_read(ht_path("id"), NULL);
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, want);
        free(got);
    }
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

/* The test's cancel service: says yes once its time has come. */
static int64_t cancel_at_ms;
static int cancelled_by_then(const dq_handler_job *job)
{
    (void)job;
    return tu_mono_ms() >= cancel_at_ms;
}

/* A program whose job is cancelled while it runs is killed with its
 * process group within the handler's 20 ms look, and the outcome says
 * so; the same program without a cancel runs to its end. */
START_TEST(exec_cancel_kills_the_process_group)
{
    struct ht t;
    dq_handler_outcome out;
    open_script(&t, "slow.sh",
                "#!/bin/sh\n"
                "sleep 10 &\n"
                "echo $! > \"$OUT/bg\"\n"
                "wait\n", "", 0);
    t.host.cancelled = cancelled_by_then;   /* the handler keeps &t.host */
    int64_t t0 = tu_mono_ms();
    cancel_at_ms = t0 + 200;
    ck_assert_int_eq(run_str(&t, "", &out), DQ_HANDLER_FAIL);
    int64_t took = tu_mono_ms() - t0;
    ck_assert_str_eq(out.error, "cancelled");
    ck_assert_msg(took >= 190 && took < 400, "took %lld ms", (long long)took);
    char *bg = ht_read(ht_path("bg"), NULL);
    ck_assert_ptr_nonnull(bg);
    pid_t pid = atoi(bg);
    free(bg);
    int gone = 0;
    for (int k = 0; k < 100 && !(gone = !tu_process_running(pid)); k++)
        usleep(10000);
    ck_assert_msg(gone, "the program's child %d still runs", (int)pid);
    ht_close(&t);
}
END_TEST

/* Settings refused at init, as `delayqd -t` refuses them.  A `why` that
 * starts with ':' follows the configuration file's name: a setting's own
 * line (the settings start at line 5). */
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
        { "argv = \"/bin/true\";", ":5: handlers.[0].settings.argv: expected a list of "
                                   "strings, such as [\"a\", \"b\"]" },
        { "argv = [\"/bin/true\"];\nenv = [\"HOME\",\n \"NO SPACE\"];",
          ":7: handlers.[0].settings.env.[1]: \"NO SPACE\" is not a variable name "
          "(letters, digits and _, not starting with a digit)" },
        { "argv = [\"/bin/true\"];\nenv = [\"=x\"];",
          ":6: handlers.[0].settings.env.[0]: a variable name is missing" },
        { "argv = [\"/bin/true\"];\nenv = [\"9LIVES=1\"];",
          ":6: handlers.[0].settings.env.[0]: \"9LIVES\" is not a variable name "
          "(letters, digits and _, not starting with a digit)" },
        { "argv = [\"/bin/true\"];\nenv = [\"DELAYQ_JOB_ID\"];",
          ":6: handlers.[0].settings.env.[0]: DELAYQ_JOB_ID is set by the handler for "
          "each job" },
        { "argv = [\"/bin/true\"];\nenv = [\"DELAYQ_QUEUE=wrong\"];",
          ":6: handlers.[0].settings.env.[0]: DELAYQ_QUEUE is set by the handler for "
          "each job" },
        { "argv = [\"/bin/true\"];\nenv = [\"HOME\", \"TZ\", \"HOME\"];",
          ":6: handlers.[0].settings.env.[2]: HOME is named twice" },
        { "argv = [\"/bin/true\"];\nenv = (\"HOME\", 7);",
          ":6: handlers.[0].settings.env.[1]: expected a string" },
        { "argv = [\"/bin/true\"];\nsetenv = {\n  A = \"1\";\n  DELAYQ_ATTEMPT = \"1\";\n};",
          ":8: handlers.[0].settings.setenv.DELAYQ_ATTEMPT: DELAYQ_ATTEMPT is set by the "
          "handler for each job" },
        { "argv = [\"/bin/true\"];\nsetenv = { RETRIES = 3; };",
          ":6: handlers.[0].settings.setenv.RETRIES: expected a string" },
        { "argv = [\"/bin/true\"];\nsetenv = { flag = true; };",
          ":6: handlers.[0].settings.setenv.flag: expected a string" },
        { "argv = [\"/bin/true\"];\nsetenv = { my-var = \"x\"; };",
          ":6: handlers.[0].settings.setenv.my-var: \"my-var\" is not a variable name "
          "(letters, digits and _, not starting with a digit)" },
        { "argv = [\"/bin/true\"];\nsetenv = [\"A=1\"];",
          ":6: handlers.[0].settings.setenv: expected a group of strings, such as "
          "{ KEY = \"value\"; }" },
        { "argv = [\"/bin/true\"];\nsetenv = { sub = { A = \"1\"; }; };",
          ":6: handlers.[0].settings.setenv.sub: expected a string" },
        { "argv = [\"/bin/true\"];\nenv = [\"HOME\"];\nsetenv = { HOME = \"/srv\"; };",
          ":7: handlers.[0].settings.setenv.HOME: HOME is in env too: pass it through "
          "or set it, not both" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ht t;
        char err[1024], exp[1024];
        ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "exec.so", cases[i].settings, 0,
                                 err, sizeof err), -1);
        snprintf(exp, sizeof exp, "handler %s/exec.so: %s%s", ht_handler_dir(),
                 cases[i].why[0] == ':' ? ht_path("handlers.conf") : "", cases[i].why);
        ck_assert_str_eq(err, exp);
    }
}
END_TEST

/* `delayqd -t` on a configuration whose exec entry has `settings`: its
 * exit status, and its standard error in r. */
static int check_config(const char *settings, struct run_result *r)
{
    char text[2048];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"orders\"; } );\n"
             "handlers = (\n"
             "  { type = \"order.cancel\"; file = \"exec.so\";\n"
             "    settings = {\n"
             "      argv = [ \"/bin/true\" ];\n"
             "%s\n"
             "    };\n"
             "  }\n"
             ");\n", ht_path("redis.sock"), ht_handler_dir(), settings);
    const char *conf = ht_write("delayqd.conf", text, 0600);
    struct run_opts o = { .env = { "LANG=C", NULL } };
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-t", "-c", (char *)conf,
                           NULL };
    run_prog(&o, argv, r);
    return r->status;
}

/* delayqd -t refuses bad env and setenv settings in one line naming the
 * file and line, with the configuration error's exit status; it shows the
 * warnings of settings it accepts. */
START_TEST(delayqd_checks_exec_environment_settings)
{
    static struct run_result r;
    char want[1024];
    const char *conf = ht_path("delayqd.conf");
    ck_assert_int_eq(check_config("      env = [ \"HOME\", \"NOTIFY SOCKET\" ];", &r), 78);
    snprintf(want, sizeof want, "delayqd: %s:5: handler %s/exec.so: %s:8: "
             "handlers.[0].settings.env.[1]: \"NOTIFY SOCKET\" is not a variable name "
             "(letters, digits and _, not starting with a digit)\n", conf,
             ht_handler_dir(), conf);
    ck_assert_str_eq(r.err, want);

    ck_assert_int_eq(check_config("      setenv = {\n        DB_HOST = \"db1\";\n"
                                  "        DB_PORT = 5432;\n      };", &r), 78);
    snprintf(want, sizeof want, "delayqd: %s:5: handler %s/exec.so: %s:10: "
             "handlers.[0].settings.setenv.DB_PORT: expected a string\n", conf,
             ht_handler_dir(), conf);
    ck_assert_str_eq(r.err, want);

    ck_assert_int_eq(check_config("      setenv = { DELAYQ_JOB_TYPE = \"x\"; };", &r), 78);
    ck_assert_msg(strstr(r.err, ":8: handlers.[0].settings.setenv.DELAYQ_JOB_TYPE: "
                         "DELAYQ_JOB_TYPE is set by the handler for each job\n"),
                  "%s", r.err);

    ck_assert_int_eq(check_config("      env = [ \"HOME\", \"TOKEN=t0ps3cret\" ];\n"
                                  "      setenv = { DB_HOST = \"db1\"; };", &r), 0);
    ck_assert_msg(strstr(r.err, "exec: env item \"TOKEN=...\": env names variables to "
                         "pass through; set this one with setenv = { TOKEN = \"...\"; }"),
                  "%s", r.err);
    ck_assert_msg(!strstr(r.err, "t0ps3cret"), "%s", r.err);
    ck_assert_msg(strstr(r.out, "configuration OK (1 queue, 1 handler)"), "%s", r.out);
}
END_TEST

void add_exec_tcase(Suite *s)
{
    TCase *tc = fixture_tcase(s, "exec", 20, NULL, NULL, ht_tmp_setup, ht_tmp_teardown);
    tcase_add_test(tc, exec_maps_exit_status);
    tcase_add_test(tc, exec_passes_payload_and_job_variables);
    tcase_add_test(tc, exec_program_gets_a_minimal_environment);
    tcase_add_test(tc, exec_path_default_and_overrides);
    tcase_add_test(tc, exec_env_absent_and_old_form);
    tcase_add_test(tc, exec_job_variables_follow_the_job);
    tcase_add_test(tc, exec_copes_with_big_input_and_output);
    tcase_add_test(tc, exec_timeout_kills_the_process_group);
    tcase_add_test(tc, exec_cancel_kills_the_process_group);
    tcase_add_test(tc, exec_refuses_bad_settings);
    tcase_add_test(tc, delayqd_checks_exec_environment_settings);
}
