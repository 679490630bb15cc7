#include "run_prog.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child: wire the pipes to 0, 1, 2, close everything else (the
 * parent's pipe ends too: standard input must see EOF), set the
 * environment and exec. */
static void child_exec(const struct run_opts *o, int in_fd, int out_fd, int err_fd,
                       char *const argv[])
{
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    for (int i = 0; i < RUN_ENV_MAX && o->env[i]; i++) {
        if (strchr(o->env[i], '='))
            putenv((char *)o->env[i]);
        else
            unsetenv(o->env[i]);
    }
    execv(argv[0], argv);
    _exit(127);
}

/* Append what is readable on `fd` to buf; returns 0 at EOF. */
static int drain(int fd, char *buf, size_t cap, size_t *len)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n <= 0)
        return n < 0 && errno == EINTR ? 1 : 0;
    size_t take = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
    memcpy(buf + *len, tmp, take);
    *len += take;
    buf[*len] = '\0';
    return 1;
}

/* Feed standard input and collect both outputs until the child closes
 * them. */
static void pump(const struct run_opts *o, int in_fd, int out_fd, int err_fd,
                 struct run_result *r)
{
    size_t sent = 0, out_len = 0, err_len = 0;
    int open_out = 1, open_err = 1;
    if (in_fd >= 0 && o->in_len == 0) {
        close(in_fd);
        in_fd = -1;
    }
    while (open_out || open_err) {
        struct pollfd p[3] = { { open_out ? out_fd : -1, POLLIN, 0 },
                               { open_err ? err_fd : -1, POLLIN, 0 },
                               { in_fd, POLLOUT, 0 } };
        ck_assert_msg(poll(p, 3, 20000) >= 1, "%s: no output for 20 s", "run_prog");
        if (p[0].revents)
            open_out = drain(out_fd, r->out, sizeof r->out, &out_len);
        if (p[1].revents)
            open_err = drain(err_fd, r->err, sizeof r->err, &err_len);
        if (in_fd >= 0 && p[2].revents) {
            ssize_t n = write(in_fd, (const char *)o->in + sent, o->in_len - sent);
            if (n > 0)
                sent += (size_t)n;
            if (n < 0 || sent == o->in_len) {
                close(in_fd);
                in_fd = -1;
            }
        }
    }
    if (in_fd >= 0)
        close(in_fd);
}

void run_prog(const struct run_opts *o, char *const argv[], struct run_result *r)
{
    memset(r, 0, sizeof *r);
    int in[2] = { -1, -1 }, out[2], err[2];
    ck_assert_int_eq(pipe(out), 0);
    ck_assert_int_eq(pipe(err), 0);
    if (o->in)
        ck_assert_int_eq(pipe(in), 0);
    else
        ck_assert_int_ge(in[0] = open("/dev/null", O_RDONLY), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        child_exec(o, in[0], out[1], err[1], argv);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    pump(o, in[1], out[0], err[0], r);
    close(out[0]);
    close(err[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}
