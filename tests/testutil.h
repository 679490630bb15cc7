/*
 * What the tests and the benchmark share: time, processes read from /proc,
 * a private redis-server started and stopped by pid, raw Redis commands,
 * and the wait for a delayqd to be ready.  Nothing here depends on Check
 * (delayq-bench links this file and not Check); the tests' Check layer is
 * fixture.c and daemon_harness.c, built on top of it.
 *
 * Errors come back as -1 with one line in the caller's buffer; nothing
 * here exits or asserts.
 */
#ifndef DQ_TEST_TESTUTIL_H
#define DQ_TEST_TESTUTIL_H

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* ---- time ---- */

int64_t tu_clock_us(clockid_t id);  /* clock_gettime in µs */
int64_t tu_now_ms(void);        /* CLOCK_REALTIME: comparable to Redis TIME */
int64_t tu_mono_ms(void);       /* CLOCK_MONOTONIC */
/* Sleep `ms` (nothing when ms <= 0), the whole time even across signals. */
void tu_sleep_ms(int64_t ms);

/* ---- processes, from /proc ---- */

/* The fields of /proc/PID/stat the tests and the bench use; the times
 * are in clock ticks (sysconf(_SC_CLK_TCK) a second). */
struct tu_proc_stat {
    pid_t pid;
    pid_t ppid;
    char state;                 /* 'R', 'S', ... 'Z' a zombie */
    int64_t utime, stime;       /* CPU of the process itself */
    int64_t cutime, cstime;     /* of its children it waited for */
    unsigned long long start;   /* ticks after boot: with the pid, names one
                                   process for good (pids are reused) */
    char comm[32];              /* its name: "delayqd", "delayqd-admin" ... */
};

/* Read /proc/PID/stat into *ps; 0, or -1 when there is no such process. */
int tu_proc_stat(pid_t pid, struct tu_proc_stat *ps);

/* Call `fn` with every process /proc lists (those that vanish while it
 * reads are skipped) until `fn` returns non-zero.  Returns 0, or -1 when
 * /proc cannot be read. */
int tu_proc_each(int (*fn)(const struct tu_proc_stat *ps, void *arg), void *arg);

/* The live (not zombie) children of `parent` but its admin process (named
 * "delayqd-admin"): for a delayqd, its workers and its reaper.  Their pids
 * in `pids`, and when `start` is not NULL their start times; returns how
 * many (at most `max`). */
size_t tu_children(pid_t parent, pid_t *pids, unsigned long long *start, size_t max);

/* The live admin process (named "delayqd-admin") of delayqd `parent`;
 * 0 when there is none. */
pid_t tu_admin_pid(pid_t parent);

/* Whether `pid` runs (a zombie does not).  Works for a process that is not
 * our child too, where waitpid cannot tell. */
int tu_process_running(pid_t pid);

/* The pid a program wrote to `path` (a decimal number), waiting up to
 * `timeout_ms` for the file to hold one; 0 when it never did. */
pid_t tu_read_pid(const char *path, int timeout_ms);

/*
 * Stop `pid`: SIGTERM, then SIGKILL after `timeout_ms`.  For our child,
 * returns its wait status when it exited by itself in time, -1 when it had
 * to be killed; for a process that is not our child (its parent reaps it),
 * waits until it is gone and returns -1.
 */
int tu_stop_process(pid_t pid, int timeout_ms);

/* tu_stop_process, then SIGKILL to the children `pid` had before it was
 * asked to stop and that still run (the same processes: the start time is
 * checked), so that none outlives it. */
int tu_stop_process_tree(pid_t pid, int timeout_ms);

/* Flags of tu_spawn, tu_child_prepare and tu_redis_spawn. */
#define TU_DIE_WITH_PARENT 1    /* SIGTERM to the child when its parent dies
                                   (PR_SET_PDEATHSIG): for a process that must
                                   never outlive the program, not for one a
                                   forked test starts for its parent */

/* In a child about to exec: no core files (from processes a test kills
 * or crashes on purpose), none of the parent's descriptors beyond 0, 1
 * and 2 (its Redis connections), and TU_DIE_WITH_PARENT. */
void tu_child_prepare(int flags);

/*
 * Start argv[0] with `argv` (NULL-terminated): stdin and stdout on
 * /dev/null, stderr appended to the file `log` (NULL: shared with ours),
 * after tu_child_prepare(flags).  Returns the pid, or -1 with the reason.
 * A child that cannot run the program says so on its stderr and exits 127.
 */
pid_t tu_spawn(char *const argv[], const char *log, int flags, char *err, size_t errlen);

/* ---- files ---- */

/* A new directory $TMPDIR/PREFIX.XXXXXX (TMPDIR default /tmp) in `dir`;
 * 0, or -1 with the reason. */
int tu_make_temp_dir(const char *prefix, char *dir, size_t dirlen, char *err, size_t errlen);

/* Remove `path` and, for a directory, everything below it (directories
 * are made u+rwx first); 0 (also when it did not exist), or -1 with errno
 * set. */
int tu_remove_tree(const char *path);

/* Copy the file `from` to `to` (made or truncated), as a test keeps a
 * daemon's log past its directory; 0, or -1 with errno set. */
int tu_copy_file(const char *from, const char *to);

/* ---- redis-server ---- */

/* The redis-server to run: `given` (may be NULL), else $REDIS_SERVER, else
 * the first on PATH or in /usr/bin, /usr/sbin, /usr/local/bin.  Fills
 * `out`; returns 0, or -1 when there is none. */
int tu_redis_find(const char *given, char *out, size_t outlen);

/*
 * Start `server` with only persistence off, on the unix socket `sock` (no
 * TCP), its files and its log (DIR/redis.log) in `dir`, by tu_spawn with
 * `flags`; wait (10 s at most) until it answers PING.  Sets *pid and
 * returns 0, or returns -1 with the reason (a server that started is
 * stopped then, *pid 0).
 */
int tu_redis_spawn(const char *server, const char *dir, const char *sock, int flags,
                   pid_t *pid, char *err, size_t errlen);

/* The same with `extra` arguments (NULL-ended, may be NULL) after the
 * others: a later "--port" replaces the first, "--tls-port" adds TLS. */
int tu_redis_spawn_with(const char *server, const char *dir, const char *sock,
                        char *const *extra, int flags, pid_t *pid, char *err, size_t errlen);

/* A blocking connection to the unix socket `sock`; connecting and each
 * command time out after `timeout_ms`.  NULL with the reason. */
redisContext *tu_redis_connect(const char *sock, int timeout_ms, char *err, size_t errlen);

/* Run a command (printf-style, as redisCommand) and return its integer
 * reply, the length of an array reply, 0 for a status reply ("OK"); -1 on
 * any error. */
long long tu_redis_int(redisContext *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
long long tu_redis_vint(redisContext *rc, const char *fmt, va_list ap);
/* tu_redis_vint on a connection of its own to `sock`, made (with
 * `timeout_ms`) and closed here; -1 when it cannot connect. */
long long tu_redis_vint_at(const char *sock, int timeout_ms, const char *fmt, va_list ap);
/* A loopback TCP port that was free a moment ago, or -1. */
int tu_free_port(void);

/* How many CLIENT LIST lines contain `needle`; -1 when Redis cannot be
 * asked. */
int tu_redis_clients_with(redisContext *rc, const char *needle);

/* Whether a delayqd with `workers` workers on this server is in its steady
 * state (1, else 0): each worker has subscribed to its wake channel and
 * claimed once (EVALSHA), and the reaper has reaped once. */
int tu_delayqd_ready(redisContext *rc, int workers);

#endif
