#define _GNU_SOURCE
#include "exec_run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXEC_CHECK_MS 100   /* how often to look for the child's exit while
                               its pipes are open (a background process may
                               hold them after the child is gone) */
#define EXEC_STOP_CHECK_MS 20 /* how often to ask the caller's stop */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The last complete line seen on the child's stderr, without its newline,
 * cut at EXEC_LINE_MAX bytes; a final line without a newline counts. */
struct line_tail {
    char cur[EXEC_LINE_MAX + 1];
    size_t len;
};

static void tail_feed(struct line_tail *t, char *last, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            while (t->len > 0 && (t->cur[t->len - 1] == ' ' || t->cur[t->len - 1] == '\t'))
                t->len--;
            if (t->len > 0) {
                memcpy(last, t->cur, t->len);
                last[t->len] = '\0';
            }
            t->len = 0;
        } else if (buf[i] != '\r' && t->len < EXEC_LINE_MAX) {
            t->cur[t->len++] = buf[i];
        }
    }
}

static void tail_end(struct line_tail *t, char *last)
{
    if (t->len > 0)
        tail_feed(t, last, "\n", 1);
}

static void write_str(int fd, const char *s)
{
    ssize_t w = write(fd, s, strlen(s));
    (void)w;
}

/* Move a pipe end off descriptors 0-2, where the child's dup2 would clobber
 * it (a daemon may have closed its standard streams). */
static int off_stdio(int *fd)
{
    if (*fd > 2)
        return 0;
    int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0)
        return -1;
    close(*fd);
    *fd = nfd;
    return 0;
}

static int make_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    return off_stdio(&p[0]) < 0 || off_stdio(&p[1]) < 0 ? -1 : 0;
}

/* Between fork and exec: async-signal-safe calls only.  Gives the program
 * clean signal dispositions and mask (a daemon's ignored SIGPIPE would
 * otherwise be inherited) and no descriptors but 0-2. */
__attribute__((noreturn))
static void child(char *const argv[], char *const env[], int in_fd, int err_fd, long maxfd)
{
    setpgid(0, 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0 && null <= 2) /* keep it out of the way of the dup2s */
        null = fcntl(null, F_DUPFD_CLOEXEC, 3);
    if (null < 0 || dup2(in_fd, 0) < 0 || dup2(null, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(127);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    if (close_range(3, ~0U, 0) < 0)
#endif
        for (long fd = 3; fd < maxfd; fd++)
            close((int)fd);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, env);
    int e = errno;
    write_str(2, "cannot execute ");
    write_str(2, argv[0]);
    write_str(2, ": ");
    write_str(2, strerror(e));
    write_str(2, "\n");
    _exit(127);
}

/* What the parent keeps while the child runs. */
struct run {
    pid_t pid;
    int in_fd, err_fd;          /* -1 once closed */
    const char *input;
    size_t len, off;
    struct line_tail tail;
    char *last;                 /* the result's last_line */
    const struct exec_stop *stop; /* NULL: never asked */
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Feed more input; stop at the end, or when the child stopped reading. */
static void on_writable(struct run *rn)
{
    ssize_t w = write(rn->in_fd, rn->input + rn->off, rn->len - rn->off);
    if (w > 0)
        rn->off += (size_t)w;
    if (rn->off >= rn->len || (w < 0 && errno != EAGAIN && errno != EINTR))
        close_fd(&rn->in_fd);
}

/* Read what stderr has; at most `rounds` reads (a busy writer must not keep
 * us here). */
static void on_readable(struct run *rn, int rounds)
{
    char buf[4096];
    while (rn->err_fd >= 0 && rounds-- > 0) {
        ssize_t n = read(rn->err_fd, buf, sizeof buf);
        if (n > 0) {
            tail_feed(&rn->tail, rn->last, buf, (size_t)n);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            close_fd(&rn->err_fd);
        break;
    }
}

static void reap(pid_t pid, int *status)
{
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
}

/* Kill the child and its process group, and reap it. */
static void kill_group(struct run *rn, int *status)
{
    kill(-rn->pid, SIGKILL);
    kill(rn->pid, SIGKILL);
    reap(rn->pid, status);
}

/*
 * Run the child to its end, the deadline (0: none) or the caller's stop.
 * Returns 1 with *status when it exited, 0 when it was killed at the
 * deadline, 2 when it was killed because the stop said so.
 */
static int supervise(struct run *rn, int64_t deadline, int *status)
{
    int nap = 1;
    for (;;) {
        if (waitpid(rn->pid, status, WNOHANG) == rn->pid) {
            on_readable(rn, 256);
            return 1;
        }
        if (rn->stop && rn->stop->fn(rn->stop->arg)) {
            kill_group(rn, status);
            return 2;
        }
        int64_t left = deadline ? deadline - now_ms() : -1;
        if (deadline && left <= 0) {
            kill_group(rn, status);
            return 0;
        }
        struct pollfd p[2];
        nfds_t n = 0;
        if (rn->in_fd >= 0)
            p[n++] = (struct pollfd){ .fd = rn->in_fd, .events = POLLOUT };
        if (rn->err_fd >= 0)
            p[n++] = (struct pollfd){ .fd = rn->err_fd, .events = POLLIN };
        if (n == 0 && !deadline && !rn->stop) {
            reap(rn->pid, status);
            return 1;
        }
        /* With no pipes left, the child is about to exit, or has closed
         * them: look again soon, then less and less often. */
        int wait = n ? EXEC_CHECK_MS : nap;
        nap = nap < 50 ? nap * 2 : 50;
        if (rn->stop && wait > EXEC_STOP_CHECK_MS)
            wait = EXEC_STOP_CHECK_MS;
        if (left >= 0 && left < wait)
            wait = (int)left;
        if (poll(p, n, wait) <= 0)
            continue;
        for (nfds_t i = 0; i < n; i++) {
            if (!p[i].revents)
                continue;
            if (p[i].fd == rn->in_fd)
                on_writable(rn);
            else if (p[i].fd == rn->err_fd)
                on_readable(rn, 16);
        }
    }
}

static void fail(struct exec_result *r, const char *what)
{
    r->kind = EXEC_ERROR;
    snprintf(r->last_line, sizeof r->last_line, "%s: %s", what, strerror(errno));
}

void exec_run(char *const argv[], char *const env[], const void *input, size_t len,
              int64_t timeout_ms, const struct exec_stop *stop, struct exec_result *r)
{
    memset(r, 0, sizeof *r);
    int in[2] = { -1, -1 }, er[2] = { -1, -1 };
    if (make_pipe(in) < 0 || make_pipe(er) < 0) {
        fail(r, "pipe");
        goto out;
    }
    long maxfd = sysconf(_SC_OPEN_MAX);
    if (maxfd < 0 || maxfd > 65536)
        maxfd = 65536;

    /* Writing to a child that stopped reading raises SIGPIPE: hold it, and
     * discard it below unless it was pending already. */
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    sigprocmask(SIG_BLOCK, &pipe_set, &old);

    struct run rn = { .input = input, .len = len, .last = r->last_line, .stop = stop };
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    rn.pid = fork();
    if (rn.pid < 0) {
        fail(r, "fork");
    } else {
        if (rn.pid == 0)
            child(argv, env, in[0], er[1], maxfd);
        setpgid(rn.pid, rn.pid); /* also in the child: whichever runs first */
        close_fd(&in[0]);
        close_fd(&er[1]);
        rn.in_fd = in[1];
        rn.err_fd = er[0];
        in[1] = er[0] = -1;
        fcntl(rn.in_fd, F_SETFL, O_NONBLOCK);
        fcntl(rn.err_fd, F_SETFL, O_NONBLOCK);
        if (len == 0)
            close_fd(&rn.in_fd);
        int status = 0;
        int how = supervise(&rn, deadline, &status);
        if (how == 0) {
            r->kind = EXEC_TIMEOUT;
        } else if (how == 2) {
            r->kind = EXEC_STOPPED;
        } else if (WIFSIGNALED(status)) {
            r->kind = EXEC_SIGNALED;
            r->code = WTERMSIG(status);
        } else {
            r->kind = EXEC_EXITED;
            r->code = WEXITSTATUS(status);
        }
        tail_end(&rn.tail, r->last_line);
        close_fd(&rn.in_fd);
        close_fd(&rn.err_fd);
    }
    if (!was_pending) {
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = { 0, 0 };
            sigtimedwait(&pipe_set, NULL, &zero);
        }
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
out:
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&er[i]);
    }
}
