#include "daemon/supervisor/strays.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "daemon/log.h"

int strays_setup(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* Kill a stray and the process group it leads, if it leads one (the exec
 * handler's programs do).  ESRCH: it is gone already. */
static int kill_stray(pid_t pid)
{
    pid_t pgid = getpgid(pid);
    if (pgid == pid && kill(-pgid, SIGKILL) < 0 && errno != ESRCH)
        log_err("kill process group %d: %s", (int)pgid, strerror(errno));
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH) {
        log_err("kill %d: %s", (int)pid, strerror(errno));
        return 0;
    }
    return 1;
}

int strays_kill(int (*is_known)(pid_t pid, void *arg), void *arg)
{
    /* The kernel lists a thread's children here (CONFIG_PROC_CHILDREN,
     * on in Debian's kernels); the supervisor has one thread. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f) {
        static int warned;
        if (!warned++)
            log_warn("cannot list child processes (%s: %s): processes a dead worker's "
                     "handler started are not stopped", path, strerror(errno));
        return 0;
    }
    int killed = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        if (pid > 0 && !is_known((pid_t)pid, arg))
            killed += kill_stray((pid_t)pid);
    fclose(f);
    return killed;
}
