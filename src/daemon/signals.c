#include "daemon/signals.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "daemon/log.h"

/* Set by the handler below, read by the child's loops. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
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
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) {
        log_err("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        failed = -1;
    }
    if (failed)
        return -2;
    return getppid() == parent ? 0 : -1;
}

int signals_stop_requested(void)
{
    return stop_requested;
}
