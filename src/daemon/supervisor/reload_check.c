#include "config.h"

#include "daemon/supervisor/reload_check.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/slots.h"
#include "daemon/supervisor/qparts_record.h"
#include "daemon/worker/handlers.h"

void reload_check_init(struct reload_check *rc)
{
    *rc = (struct reload_check){ .fd = -1 };
}

static void free_conf(struct daemon_conf *conf)
{
    if (conf) {
        dconfig_free(conf);
        free(conf);
    }
}

/* In the child: the checks, the reason to `fd`, the exit status. */
static void run_checks(const struct daemon_conf *old, const struct daemon_conf *conf, int fd)
{
    char err[800] = "";
    struct handler_table t;
    int code = DAEMON_EXIT_OK;
    if (handlers_open(&t, conf, err, sizeof err) < 0) {
        code = DAEMON_EXIT_CONFIG;
    } else {
        handlers_close(&t);
        enum qparts_outcome out = qparts_reload_check(old, conf, err, sizeof err);
        code = out == QPARTS_OK ? DAEMON_EXIT_OK
               : out == QPARTS_REFUSED ? DAEMON_EXIT_CONFIG : DAEMON_EXIT_UNAVAILABLE;
    }
    size_t len = strlen(err);
    if (len > 0 && write(fd, err, len) < 0)
        code = code ? code : DAEMON_EXIT_OSERR;
    _exit(code);
}

int reload_check_start(struct reload_check *rc, const struct daemon_conf *old,
                       struct daemon_conf *conf, void (*in_child)(void *arg), void *arg,
                       char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        free_conf(conf);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        free_conf(conf);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        in_child(arg);
        run_checks(old, conf, p[1]);
    }
    close(p[1]);
    *rc = (struct reload_check){ .pid = pid, .fd = p[0], .conf = conf,
                                 .deadline_ms = slots_now_ms() + RELOAD_CHECK_TIMEOUT_MS };
    return 0;
}

/* The child's reason, or "" (it exited before writing one). */
static void read_reason(int fd, char *buf, size_t len)
{
    ssize_t n = read(fd, buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
}

void reload_check_exited(struct reload_check *rc, int status)
{
    rc->exited = 1;
    rc->status = status;
}

int reload_check_end(struct reload_check *rc, struct daemon_conf **conf, char *err,
                     size_t errlen)
{
    int status = rc->status;
    char why[800];
    read_reason(rc->fd, why, sizeof why);
    close(rc->fd);
    struct daemon_conf *checked = rc->conf;
    int killed = rc->killed;
    reload_check_init(rc);
    *conf = NULL;
    if (WIFEXITED(status) && WEXITSTATUS(status) == DAEMON_EXIT_OK) {
        *conf = checked;
        return 0;
    }
    free_conf(checked);
    if (killed)
        snprintf(err, errlen, "the check of the new configuration did not end within %d s "
                 "(a handler's initialisation, or Redis, did not answer)",
                 RELOAD_CHECK_TIMEOUT_MS / 1000);
    else if (why[0])
        snprintf(err, errlen, "%s", why);
    else if (WIFSIGNALED(status))
        snprintf(err, errlen, "the check of the new configuration was killed by signal %d "
                 "(%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(err, errlen, "the check of the new configuration exited with status %d",
                 WEXITSTATUS(status));
    return -1;
}

void reload_check_enforce(struct reload_check *rc, int64_t now)
{
    if (!rc->pid || rc->exited || rc->killed || now < rc->deadline_ms)
        return;
    rc->killed = 1;
    if (kill(rc->pid, SIGKILL) < 0 && errno != ESRCH)
        log_err("kill(%d, SIGKILL) (the reload's check): %s", (int)rc->pid, strerror(errno));
}

void reload_check_cancel(struct reload_check *rc)
{
    if (!rc->pid)
        return;
    if (!rc->exited && kill(rc->pid, SIGKILL) < 0 && errno != ESRCH)
        log_err("kill(%d, SIGKILL) (the reload's check): %s", (int)rc->pid, strerror(errno));
    close(rc->fd);
    free_conf(rc->conf);
    reload_check_init(rc);
}
