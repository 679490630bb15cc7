#include "daemon/signals.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

#include "daemon/log.h"

/* Set by the handler below, read by the child's loops. */
static volatile sig_atomic_t stop_requested;
/* The supervisor this child was forked by (0: not a child). */
static pid_t parent_pid;
/* How long an orphan may live (signals_set_orphan_exit_ms). */
static int64_t orphan_exit_ms = SIGNALS_ORPHAN_EXIT_DEFAULT_MS;
/* The orphan's SIGALRM is armed. */
static volatile sig_atomic_t orphan_armed;

/* Arm SIGALRM (default action: the process ends) orphan_exit_ms from now,
 * once.  Called from the signal handler too: setitimer is a plain system
 * call, and errno is kept.  -1 when setitimer failed. */
static int arm_orphan_exit(void)
{
    if (orphan_armed)
        return 0;
    int saved = errno;
    struct itimerval it = { { 0, 0 }, { (time_t)(orphan_exit_ms / 1000),
                                        (suseconds_t)(orphan_exit_ms % 1000) * 1000 } };
    if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
        it.it_value.tv_usec = 1;
    int rc = setitimer(ITIMER_REAL, &it, NULL);
    if (rc == 0)
        orphan_armed = 1;
    errno = saved;
    return rc;
}

/* SIGTERM or SIGINT: stop.  When the supervisor is gone (PR_SET_PDEATHSIG
 * sends SIGTERM, after the child was given to a new parent), no one will
 * SIGKILL this process at the end of shutdown_timeout: it arms its own
 * bound, even while a handler runs and the event loop cannot. */
static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
    if (parent_pid > 0 && getppid() != parent_pid)
        arm_orphan_exit();
}

/* Install `fn` for `sig`: 0, or -1 after logging why. */
static int set_handler(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) == 0)
        return 0;
    log_err("sigaction(%s): %s", strsignal(sig), strerror(errno));
    return -1;
}

int signals_ignore_pipe(void)
{
    return set_handler(SIGPIPE, SIG_IGN);
}

int signals_child_setup(pid_t parent)
{
    static const int reset[] = { SIGCHLD, SIGUSR1, SIGALRM, SIGQUIT };
    int failed = 0;
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        failed |= set_handler(reset[i], SIG_DFL);
    /* The supervisor relays SIGUSR2 ("the sentinels moved the master") to
     * every child; a connection behind Sentinel handles it (rconn.c), and
     * until then, or without Sentinel, it must not kill. */
    failed |= set_handler(SIGUSR2, SIG_IGN);
    failed |= set_handler(SIGTERM, on_stop_signal);
    failed |= set_handler(SIGINT, on_stop_signal);
    failed |= set_handler(SIGHUP, SIG_IGN);
    failed |= signals_ignore_pipe();
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) {
        log_err("sigprocmask: %s", strerror(errno));
        failed = -1;
    }
    parent_pid = parent;
    /* Should it fail, the loops' look at getppid() (signals_parent_gone)
     * would still notice within their tick; but a child that cannot set
     * up its signals is not run at all. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) {
        log_err("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        failed = -1;
    }
    if (failed)
        return -2;
    /* Checked after: a supervisor that died before the prctl sent nothing. */
    return getppid() == parent ? 0 : -1;
}

void signals_set_orphan_exit_ms(int64_t ms)
{
    orphan_exit_ms = ms > 0 ? ms : 0;
}

int signals_parent_gone(void)
{
    if (parent_pid <= 0 || getppid() == parent_pid)
        return 0;
    stop_requested = 1;
    if (!orphan_armed && arm_orphan_exit() < 0)
        log_err("setitimer: %s: this orphan's life is not bounded", strerror(errno));
    return 1;
}

int64_t signals_orphan_ms_left(void)
{
    struct itimerval it;
    if (!orphan_armed || getitimer(ITIMER_REAL, &it) < 0)
        return -1;
    return (int64_t)it.it_value.tv_sec * 1000 + it.it_value.tv_usec / 1000;
}

int signals_stop_requested(void)
{
    return stop_requested;
}
