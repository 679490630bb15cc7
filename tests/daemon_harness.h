/*
 * Running the real delayqd in the end-to-end tests (tests/check_daemon*.c):
 * a configuration written to a file in the fixture's directory, the
 * daemon's stderr captured to a log file there, the test handler's record
 * file, waits with deadlines, and a stop by pid.
 *
 * Each test starts its own redis-server (a checked fixture, so in Check's
 * forked child): the daemon, its workers and the server are then all in
 * the child's process group, which Check kills after the test even when
 * it fails, so nothing outlives a test.
 */
#ifndef DQ_TEST_DAEMON_HARNESS_H
#define DQ_TEST_DAEMON_HARNESS_H

#include <delayq/client.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fixture.h"

#define H_QUEUE "orders"

struct harness {
    struct redis_fixture fx;    /* this test's own server */
    dq_client *c;
    char conf[256];             /* DIR/delayqd.conf */
    char log[256];              /* DIR/delayqd.log: the daemon's stderr */
    char record[256];           /* DIR/record.log: the test handler's runs */
    char handler_dir[PATH_MAX]; /* absolute: tests/plugins/.libs */
    pid_t pid;                  /* the running daemon, or 0 */
};

/* The configuration the tests vary; h_conf_defaults fills the usual one. */
struct h_conf {
    int workers;                /* 2 */
    const char *lease;          /* "3s" */
    int batch;                  /* 8 */
    int max_attempts;           /* 5 */
    const char *backoff_base;   /* "100ms" */
    const char *backoff_cap;    /* "1s" */
    double jitter;              /* 0 */
    const char *reaper_interval; /* "200ms" */
    const char *shutdown_timeout; /* "10s" */
    const char *log_level;      /* "info" */
    /* The text inside handlers = ( ... ); NULL: type "*" to the test
     * handler, timeout "1s", recording (see h_handler). */
    const char *handlers;
    const char *extra;          /* NULL, or text appended to the file */
    const char *redis;          /* the text inside redis = { ... }; NULL:
                                   the fixture's unix_socket */
    int partitions;             /* 0: not set (1) */
};

void h_conf_defaults(struct h_conf *hc);

/* Start the checked fixture: redis, a client, the file names. */
void h_setup(struct harness *h);
/* Stop the daemon if it runs, close the client, stop redis. */
void h_teardown(struct harness *h);

/* One handler entry for the test handler, recording, in `buf`:
 * { type = TYPE; file = "testhandler.so"; timeout = TIMEOUT; [max_attempts] }
 * max_attempts 0 leaves it out. */
const char *h_handler(const struct harness *h, char *buf, size_t len, const char *type,
                      const char *timeout, int max_attempts);

/* The exec handler's program that outlives a handler's run unless it is
 * stopped: a shell that starts `sleep 60` in the background and waits,
 * having written its own pid to sh_pid and the sleep's to bg_pid (paths
 * in the fixture's directory, PATH_MAX each).  One handler entry for type
 * "*" with `timeout`, in `buf`. */
const char *h_exec_sleeper(const struct harness *h, char *buf, size_t len,
                           const char *timeout, char *sh_pid, char *bg_pid);

/* Write `hc` as the configuration file (h->conf). */
void h_write_conf(const struct harness *h, const struct h_conf *hc);
/* Write `text` as the configuration file. */
void h_write_file(const char *path, const char *text);

/* Start delayqd -f -c h->conf, stderr to h->log, and wait until its
 * workers are connected and subscribed (`workers` of them). */
void h_start(struct harness *h, int workers);

/* Send SIGTERM and wait up to `timeout_ms` for the daemon to exit; returns
 * its exit status as from waitpid, or -1 when it did not exit in time (it
 * is killed then).  Children left behind are killed too. */
int h_stop(struct harness *h, int timeout_ms);

/* Run delayqd with `args` (NULL-terminated, after the program name) to the
 * end, its stderr into `err` (NUL-terminated); returns its exit status as
 * a plain code, 128+N when killed by signal N, -1 on a timeout (10 s). */
int h_run_delayqd(const char *const *args, char *err, size_t errlen);

/* Both `delayqd -t` and `delayqd -f` refuse h->conf with exit 78 and one
 * line that names FILE:LINE and contains `what`. */
void h_assert_refused(const struct harness *h, int line, const char *what);

/* ---- waiting (time: tu_now_ms, tu_mono_ms, tu_sleep_ms in testutil.h) ---- */

/* Poll `cond(arg)` every 10 ms until it is true or `timeout_ms` passed;
 * returns the last value. */
int h_wait(int timeout_ms, int (*cond)(void *arg), void *arg);

/* ---- the record file ---- */

#define H_OVERLAP 2
struct h_run {
    char id[DQ_ID_MAX + 1];
    int attempt;
    pid_t pid;
    int end;                    /* 0: a "start" line, 1: an "end" line,
                                   H_OVERLAP: the run found the job's lock
                                   held by a live run (lock_dir) */
    int64_t ms;
    int64_t fence;              /* the fence the handler was given */
    char said[64];              /* a "say:N:TEXT" payload's TEXT, else "" */
};

/* Every line of the record file, in order; free the array. */
size_t h_records(const struct harness *h, struct h_run **out);
/* How many runs started (the record file's "start" lines). */
int h_starts(const struct harness *h);
/* Lines for `id` of one kind (end 0 or 1); the first one in *first (may
 * be NULL). */
int h_count(const struct h_run *r, size_t n, const char *id, int end,
            struct h_run *first);
/* Wait until `id` has at least `n` lines of the kind; returns the count. */
int h_wait_record(const struct harness *h, const char *id, int end, int n,
                  int timeout_ms);
/* Workers busy lately: live children of the daemon whose pid is in the
 * tail of the record file (never the reaper), each once, in `out`, and
 * in `lines` (may be NULL) how many of the tail's lines are theirs;
 * returns how many (at most `max`). */
size_t h_busy_workers(const struct harness *h, pid_t *out, int *lines, size_t max);

/* ---- the log ---- */

/* Lines of the daemon's log that contain `needle`. */
int h_log_count(const struct harness *h, const char *needle);
/* Wait until at least `n` lines contain `needle`; returns the count. */
int h_wait_log(const struct harness *h, const char *needle, int n, int timeout_ms);
/* The pid of the newest child of role `role` ("relay0", "settle", "reap")
 * whose log line contains `needle`, or 0 when no line does. */
pid_t h_log_pid(const struct harness *h, const char *role, const char *needle);
/* The whole log, for failure messages (static buffer, the last 3000 bytes). */
const char *h_log_tail(const struct harness *h);

/* ---- Redis ---- */

/* Enqueue one job of type "t" (or `type`) on H_QUEUE; fails the test on
 * error.  `id` may be NULL.  Returns the due time (server ms). */
int64_t h_enqueue(struct harness *h, const char *id, const char *type,
                  const char *payload, int64_t delay_ms, int max_attempts);
/* Job number `i` of h_enqueue_numbered: its payload (a string that lives
 * as long as the call) and its due time (server ms). */
typedef void (*h_job_fn)(int i, void *arg, const char **payload, int64_t *at_ms);
/* Enqueue `n` jobs of type "t" on H_QUEUE, ids PREFIX0 .. PREFIX(n-1),
 * each as `job` says, 1,000 to a dq_enqueue_many call; fails the test on
 * error. */
void h_enqueue_numbered(struct harness *h, int n, const char *prefix, h_job_fn job,
                        void *arg);
/* dq_show's state, or -1 when the job is gone; `info` (may be NULL) gets
 * the rest (free it with dq_job_info_free when the state is not -1). */
int h_state(struct harness *h, const char *id, dq_job_info *info);
/* Wait until the job is gone (1) or the deadline passes (0). */
int h_wait_gone(struct harness *h, const char *id, int timeout_ms);
/* Wait until the job is in `state`; returns 1, or 0 at the deadline. */
int h_wait_state(struct harness *h, const char *id, dq_state state, int timeout_ms);
/* Wait until nothing is delayed, due or processing; 1, or 0 at the deadline. */
int h_wait_idle(struct harness *h, int timeout_ms);

#endif
