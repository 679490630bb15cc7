/*
 * The benchmark's handler (delayq-bench): does nothing and succeeds, so
 * that a run measures delayq, not the work.
 *
 * Settings:
 *   lateness_file = "/path/file";   # optional: record when each job started
 *
 * With lateness_file, each job adds the line "<due_ms> <start_ms>\n":
 * the job's due time (Unix ms, Redis's clock) and the time the handler
 * was entered (CLOCK_REALTIME, ms with three decimals).  To keep the
 * handler cheap the lines are kept in memory and written in blocks of
 * whole lines (one write(2) per FLUSH_AT bytes, and the rest in fini) to a
 * file opened O_APPEND, so that the workers' blocks never interleave.  A
 * worker that is killed loses its unwritten lines: the bench checks the
 * count.  Without the setting the handler records nothing.
 */
#include <delayq/handler.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024)
#define FLUSH_AT (BUF_SIZE - 128)   /* room for one more line */

struct noop_state {
    int fd;                 /* the lateness file, or -1 */
    char *buf;
    size_t used;
};

static void flush(struct noop_state *st)
{
    size_t off = 0;
    while (off < st->used) {
        ssize_t w = write(st->fd, st->buf + off, st->used - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;      /* the bench notices the missing lines */
        off += (size_t)w;
    }
    st->used = 0;
}

static int noop_init(const dq_host *host, const dq_settings *s, void **state, char *err,
                     size_t errlen)
{
    const char *path = host->setting_string(s, "lateness_file", NULL);
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        return -1;
    }
    struct noop_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st->fd = -1;
    if (path) {
        st->buf = malloc(BUF_SIZE);
        st->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (!st->buf || st->fd < 0) {
            snprintf(err, errlen, "lateness_file %s: %s", path,
                     st->buf ? strerror(errno) : "out of memory");
            if (st->fd >= 0)
                close(st->fd);
            free(st->buf);
            free(st);
            return -1;
        }
    }
    *state = st;
    return 0;
}

static dq_handler_result noop_handle(void *state, const dq_handler_job *job,
                                     dq_handler_outcome *out)
{
    (void)out;
    struct noop_state *st = state;
    if (st->fd < 0)
        return DQ_HANDLER_OK;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(st->buf + st->used, BUF_SIZE - st->used, "%lld %lld.%03ld\n",
                     (long long)job->due_ms,
                     (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
                     (ts.tv_nsec / 1000) % 1000);
    if (n > 0 && (size_t)n < BUF_SIZE - st->used)
        st->used += (size_t)n;
    if (st->used >= FLUSH_AT)
        flush(st);
    return DQ_HANDLER_OK;
}

static void noop_fini(void *state)
{
    struct noop_state *st = state;
    if (!st)
        return;
    if (st->fd >= 0) {
        flush(st);
        close(st->fd);
    }
    free(st->buf);
    free(st);
}

DQ_HANDLER_DEFINE("noop", noop_init, noop_handle, noop_fini);
