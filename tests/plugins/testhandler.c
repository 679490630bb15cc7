/*
 * The handler the daemon's end-to-end tests run (tests/check_daemon*.c):
 * it does what the job's payload asks, and records every run.
 *
 * Settings:
 *   record = "/path/file";   # optional: append one line when a run starts
 *                            # and one when it ends
 *   lock_dir = "/path/dir";  # optional: each run holds an flock on
 *                            # DIR/<id>; a run that finds it held by a live
 *                            # process (two runs of one job at once)
 *                            # records an "overlap" line
 *
 * Record lines, "<id> <attempt> <pid> start|end <unix ms> <fence>" (the
 * fence -1 when the daemon does not hand one over; then, for a "say:"
 * payload, its TEXT), are each
 * written with one write(2) to a file opened O_APPEND, so the lines of
 * concurrent workers never interleave.  A run with a "start" but no "end"
 * line was killed.
 *
 * Payloads:
 *   ok            OK
 *   retry         RETRY, error "asked to retry"
 *   retry-once    RETRY on attempt 1, OK afterwards
 *   retry-in:N    RETRY with retry_delay_ms N, error "asked to retry"
 *   fail          FAIL, error "asked to fail"
 *   segv          dies of SIGSEGV (on every attempt)
 *   segv-first    dies of SIGSEGV on attempt 1, OK afterwards
 *   hang          sleeps for ever
 *   hang-first    sleeps for ever on attempt 1, OK afterwards
 *   sleep:N       sleeps N ms, then OK
 *   say:N:TEXT    sleeps N ms, then OK; the record lines carry TEXT (a
 *                 test sees which payload ran)
 *   watch:N       sleeps up to N ms, asking host->cancelled every 5 ms:
 *                 FAIL "stopped: cancelled" as soon as it says so, else
 *                 OK (sleep:N and hang ignore a cancel)
 *   exit          _exit(3)
 *   fail-while:PATH  FAIL, error "fail-while: PATH exists", while PATH
 *                 exists; OK once it is gone (a test removes the file to
 *                 let a dead job succeed when requeued)
 * anything else is a FAIL saying so.
 */
#include <delayq/handler.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

struct th_state {
    const dq_host *host;
    int fd;     /* the record file, or -1 */
    char *lock_dir;     /* or NULL */
    int has_fence;      /* the daemon's jobs have their fence */
};

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void record(const struct th_state *st, const dq_handler_job *job, const char *what)
{
    if (st->fd < 0)
        return;
    char line[400];
    const char *p = job->payload;
    const char *said = strncmp(p, "say:", 4) == 0 ? strchr(p + 4, ':') : NULL;
    int n = snprintf(line, sizeof line, "%s %d %d %s %lld %lld%s%.60s\n", job->id,
                     job->attempt, (int)getpid(), what, (long long)realtime_ms(),
                     st->has_fence ? (long long)job->fence : -1LL, said ? " " : "",
                     said ? said + 1 : "");
    if (n > 0 && (size_t)n < sizeof line && write(st->fd, line, (size_t)n) != n)
        (void)0;    /* a test that misses the line fails on its own */
}

/* Sleep `ms` in full: the worker's SIGTERM handler interrupts nanosleep,
 * and a job in hand must still run to its end. */
static void sleep_ms(int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
}

static int th_init(const dq_host *host, const dq_settings *s, void **state,
                   char *err, size_t errlen)
{
    const char *path = host->setting_string(s, "record", NULL);
    const char *lock_dir = host->setting_string(s, "lock_dir", NULL);
    if (host->setting_error(s)) {
        snprintf(err, errlen, "%s", host->setting_error(s));
        return -1;
    }
    struct th_state *st = malloc(sizeof *st);
    if (!st) {
        snprintf(err, errlen, "testhandler: out of memory");
        return -1;
    }
    st->host = host;
    st->fd = -1;
    st->has_fence = DQ_JOB_HAS(host, fence);
    st->lock_dir = lock_dir ? strdup(lock_dir) : NULL;
    if (path && (st->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        snprintf(err, errlen, "testhandler: %s: %s", path, strerror(errno));
        free(st);
        return -1;
    }
    *state = st;
    return 0;
}

/* watch:N: sleep up to `ms`, returning early (1) once the job is
 * cancelled. */
static int watch_ms(const struct th_state *st, const dq_handler_job *job, int64_t ms)
{
    int can_ask = DQ_HOST_HAS(st->host, cancelled);
    for (int64_t slept = 0; slept < ms; slept += 5) {
        if (can_ask && st->host->cancelled(job))
            return 1;
        sleep_ms(5);
    }
    return 0;
}

static dq_handler_result th_run(const struct th_state *st, const dq_handler_job *job,
                                dq_handler_outcome *out)
{
    const char *p = job->payload;
    if (strncmp(p, "watch:", 6) == 0) {
        if (!watch_ms(st, job, strtoll(p + 6, NULL, 10)))
            return DQ_HANDLER_OK;
        snprintf(out->error, sizeof out->error, "stopped: cancelled");
        return DQ_HANDLER_FAIL;
    }
    if (strcmp(p, "ok") == 0)
        return DQ_HANDLER_OK;
    if (strcmp(p, "retry") == 0 || (strcmp(p, "retry-once") == 0 && job->attempt == 1)) {
        snprintf(out->error, sizeof out->error, "asked to retry");
        return DQ_HANDLER_RETRY;
    }
    if (strcmp(p, "retry-once") == 0)
        return DQ_HANDLER_OK;
    if (strncmp(p, "retry-in:", 9) == 0) {
        out->retry_delay_ms = strtoll(p + 9, NULL, 10);
        snprintf(out->error, sizeof out->error, "asked to retry");
        return DQ_HANDLER_RETRY;
    }
    if (strcmp(p, "fail") == 0) {
        snprintf(out->error, sizeof out->error, "asked to fail");
        return DQ_HANDLER_FAIL;
    }
    if (strcmp(p, "segv") == 0 || (strcmp(p, "segv-first") == 0 && job->attempt == 1)) {
        /* The default action, whatever a sanitizer installed: the test
         * expects the worker to die of signal 11. */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    if (strcmp(p, "hang") == 0 || (strcmp(p, "hang-first") == 0 && job->attempt == 1))
        for (;;)
            pause();
    if (strcmp(p, "segv-first") == 0 || strcmp(p, "hang-first") == 0)
        return DQ_HANDLER_OK;
    if (strncmp(p, "sleep:", 6) == 0 || strncmp(p, "say:", 4) == 0) {
        sleep_ms(strtoll(p + (p[1] == 'l' ? 6 : 4), NULL, 10));
        return DQ_HANDLER_OK;
    }
    if (strcmp(p, "exit") == 0)
        _exit(3);
    if (strncmp(p, "fail-while:", 11) == 0) {
        if (access(p + 11, F_OK) != 0 && errno == ENOENT)
            return DQ_HANDLER_OK;
        snprintf(out->error, sizeof out->error, "fail-while: %.300s exists", p + 11);
        return DQ_HANDLER_FAIL;
    }
    snprintf(out->error, sizeof out->error, "unknown payload '%.100s'", p);
    return DQ_HANDLER_FAIL;
}

/* Take the job's lock for the run; -1 when there is no lock_dir.  The
 * kernel drops the lock when the process dies, so only a live run holds
 * it. */
static int take_lock(const struct th_state *st, const dq_handler_job *job)
{
    if (!st->lock_dir)
        return -1;
    char path[700];
    snprintf(path, sizeof path, "%s/%s", st->lock_dir, job->id);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
        record(st, job, "overlap");
    return fd;
}

static dq_handler_result th_handle(void *state, const dq_handler_job *job,
                                   dq_handler_outcome *out)
{
    int lock = take_lock(state, job);
    record(state, job, "start");
    dq_handler_result res = th_run(state, job, out);
    record(state, job, "end");
    if (lock >= 0)
        close(lock);
    return res;
}

static void th_fini(void *state)
{
    struct th_state *st = state;
    if (st->fd >= 0)
        close(st->fd);
    free(st->lock_dir);
    free(st);
}

DQ_HANDLER_DEFINE("testhandler", th_init, th_handle, th_fini);
