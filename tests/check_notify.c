/*
 * delayqd under systemd's Type=notify: READY=1 once every worker can
 * claim, RELOADING=1 and READY=1 around SIGHUP, STOPPING=1 on SIGTERM,
 * WATCHDOG=1 when asked for, all through a fake NOTIFY_SOCKET.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_harness.h"

static struct harness H;

static void setup(void)
{
    h_setup(&H);
}

static void teardown(void)
{
    h_teardown(&H);
}

/* A datagram socket at DIR/NAME standing in for systemd's. */
static int notify_socket(char *path, size_t len, const char *name)
{
    snprintf(path, len, "%s/%s", H.fx.dir, name);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = { 0, 100 * 1000 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Read datagrams until one equals `want`, for up to `timeout_ms`; the
 * others read on the way are appended to `seen` (for messages). */
static int wait_message(int fd, const char *want, int timeout_ms, char *seen, size_t len)
{
    int64_t end = tu_mono_ms() + timeout_ms;
    while (tu_mono_ms() < end) {
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        size_t used = strlen(seen);
        snprintf(seen + used, len - used, "%s;", buf);
        if (strcmp(buf, want) == 0)
            return 1;
    }
    return 0;
}

START_TEST(ready_reloading_and_stopping_reach_systemd)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    char path[300], seen[2048] = "";
    int fd = notify_socket(path, sizeof path, "notify.sock");
    setenv("NOTIFY_SOCKET", path, 1);
    h_start(&H, 2);
    unsetenv("NOTIFY_SOCKET");
    ck_assert_msg(wait_message(fd, "READY=1", 5000, seen, sizeof seen),
                  "no READY=1 (saw: %s); log:\n%s", seen, h_log_tail(&H));
    /* Ready means claiming: the supervisor said so only once every worker
     * had connected. */
    ck_assert_int_eq(h_log_count(&H, "ready: every worker is connected"), 1);
    seen[0] = '\0';
    kill(H.pid, SIGHUP);
    ck_assert_msg(wait_message(fd, "RELOADING=1", 5000, seen, sizeof seen),
                  "no RELOADING=1 (saw: %s)", seen);
    ck_assert_msg(wait_message(fd, "READY=1", 5000, seen, sizeof seen),
                  "no READY=1 after the reload (saw: %s)", seen);
    seen[0] = '\0';
    kill(H.pid, SIGTERM);
    ck_assert_msg(wait_message(fd, "STOPPING=1", 5000, seen, sizeof seen),
                  "no STOPPING=1 (saw: %s)", seen);
    int status = h_stop(&H, 10000);
    ck_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
}
END_TEST

START_TEST(watchdog_is_fed_when_asked_for)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    char path[300], seen[4096] = "";
    int fd = notify_socket(path, sizeof path, "watchdog.sock");
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "400000", 1);   /* fed every 200 ms */
    h_start(&H, 2);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    int fed = 0;
    int64_t end = tu_mono_ms() + 1500;
    while (tu_mono_ms() < end)
        fed += wait_message(fd, "WATCHDOG=1", (int)(end - tu_mono_ms()), seen, sizeof seen);
    ck_assert_msg(fed >= 4, "WATCHDOG=1 %d times in 1.5 s (saw: %s)", fed, seen);
    close(fd);
}
END_TEST

START_TEST(no_socket_no_messages)
{
    /* Outside systemd nothing is sent and nothing fails. */
    struct h_conf hc;
    h_conf_defaults(&hc);
    h_write_conf(&H, &hc);
    unsetenv("NOTIFY_SOCKET");
    h_start(&H, 2);
    int status = h_stop(&H, 10000);
    ck_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(h_log_count(&H, "notify"), 0);
}
END_TEST

/* A program that the exec handler runs under the real daemon gets neither
 * NOTIFY_SOCKET nor a secret of the service's environment; it gets PATH
 * and its job's variables. */
START_TEST(exec_programs_get_no_notify_socket)
{
    char envfile[300], script[1200], handlers[2048];
    snprintf(envfile, sizeof envfile, "%s/program.env", H.fx.dir);
    snprintf(script, sizeof script, "tr '\\\\0' '\\\\n' < /proc/$$/environ > %s.tmp && "
             "mv %s.tmp %s", envfile, envfile, envfile);
    snprintf(handlers, sizeof handlers,
             "{ type = \"*\"; file = \"%s\"; timeout = \"1s\";\n"
             "  settings = { argv = [\"/bin/sh\", \"-c\", \"%s\"]; }; }",
             fixture_build_path("handlers/.libs/exec.so"), script);
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = 1;
    hc.handlers = handlers;
    h_write_conf(&H, &hc);
    char path[300], seen[2048] = "";
    int fd = notify_socket(path, sizeof path, "notify.sock");
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("DB_PASSWORD", "s3cret-from-a-drop-in", 1);
    h_start(&H, 1);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("DB_PASSWORD");
    ck_assert_msg(wait_message(fd, "READY=1", 5000, seen, sizeof seen),
                  "no READY=1 (saw: %s); log:\n%s", seen, h_log_tail(&H));
    h_enqueue(&H, "env-1", "t", "", 0, 0);
    ck_assert_msg(h_wait_gone(&H, "env-1", 5000), "the job did not run; log:\n%s",
                  h_log_tail(&H));
    FILE *f = fopen(envfile, "r");
    ck_assert_msg(f != NULL, "the program wrote no %s", envfile);
    char got[4096];
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    ck_assert_msg(!strstr(got, "NOTIFY_SOCKET"), "the program sees NOTIFY_SOCKET:\n%s", got);
    ck_assert_msg(!strstr(got, "s3cret"), "the program sees the secret:\n%s", got);
    ck_assert_msg(strstr(got, "DELAYQ_JOB_ID=env-1\n"), "%s", got);
    ck_assert_msg(strncmp(got, "PATH=", 5) == 0 || strstr(got, "\nPATH="), "%s", got);
    ck_assert_int_eq(h_stop(&H, 10000), 0);
    close(fd);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("notify");
    TCase *tc = fixture_tcase(s, "sd_notify", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, ready_reloading_and_stopping_reach_systemd);
    tcase_add_test(tc, watchdog_is_fed_when_asked_for);
    tcase_add_test(tc, no_socket_no_messages);
    tcase_add_test(tc, exec_programs_get_no_notify_socket);
    return fixture_run_suite(s);
}
