#include "daemon/signals.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Set by the handler below, read by the child's loops. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void set_handler(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

void signals_ignore_pipe(void)
{
    set_handler(SIGPIPE, SIG_IGN);
}

int signals_child_setup(pid_t parent)
{
    static const int reset[] = { SIGCHLD, SIGUSR1, SIGALRM, SIGQUIT };
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        set_handler(reset[i], SIG_DFL);
    /* The supervisor relays SIGUSR2 ("the sentinels moved the master") to
     * every child; a connection behind Sentinel handles it (rconn.c), and
     * until then, or without Sentinel, it must not kill. */
    set_handler(SIGUSR2, SIG_IGN);
    set_handler(SIGTERM, on_stop_signal);
    set_handler(SIGINT, on_stop_signal);
    set_handler(SIGHUP, SIG_IGN);
    signals_ignore_pipe();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    return getppid() == parent ? 0 : -1;
}

int signals_stop_requested(void)
{
    return stop_requested;
}
