/*
 * What a run measures besides wall time: CPU of processes, read from
 * /proc/PID/stat, and Redis's own counters, read from INFO.
 *
 * CPU is utime + stime + cutime + cstime in clock ticks (10 ms at the
 * usual USER_HZ = 100), so a figure is only as good as the CPU it sums:
 * a run should burn at least a few hundred ms.  For delayqd the whole
 * process tree is summed (the supervisor, its workers and reaper, their
 * children); a child that exited and was reaped in between is in its
 * parent's cutime/cstime.
 */
#ifndef DQ_BENCH_MEASURE_H
#define DQ_BENCH_MEASURE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CPU (user + system) of one process in µs, the system part in *sys_us
 * (may be NULL); -1 when it is gone. */
int64_t measure_proc_cpu_us(pid_t pid, int64_t *sys_us);

/* The time on a CPU of every thread of one process in µs, exact (the
 * scheduler's count, where the above is in 10 ms ticks); -1 when the
 * kernel keeps none, or the process is gone. */
int64_t measure_proc_runtime_us(pid_t pid);

/* The same for `root` and all its descendants (found by scanning
 * /proc/star/stat for parent pids); -1 when root is gone. */
int64_t measure_tree_cpu_us(pid_t root, int64_t *sys_us);

/* The CPU of a run's processes at one instant. */
struct cpu_sample {
    int64_t wall_us;        /* CLOCK_MONOTONIC */
    int64_t redis_us;       /* redis-server, user + system */
    int64_t redis_sys_us;   /* ... of which system (the kernel) */
    int64_t daemon_us;      /* the delayqd tree; 0 without a daemon */
    int64_t daemon_sys_us;
    int64_t self_us;        /* this process */
};

/* `daemon` may be 0 (no daemon in this run). */
void measure_cpu(struct cpu_sample *s, pid_t redis, pid_t daemon);

/* Percent of redis-server's (daemon 0) or delayqd's (daemon 1) CPU between
 * two samples that was spent in the kernel. */
double measure_sys_pct(const struct cpu_sample *a, const struct cpu_sample *b, int daemon);

#define INFO_MAX_CMDS 160

struct cmd_stat {
    char name[48];          /* "evalsha", "zadd", ... */
    double calls;
    double usec;            /* time inside the command, as Redis counts it */
};

/* The INFO fields the bench uses (stats, commandstats, memory). */
struct info_snap {
    double total_commands;  /* total_commands_processed */
    double used_memory;
    size_t ncmds;
    struct cmd_stat cmds[INFO_MAX_CMDS];
};

/* Take "INFO stats commandstats memory".  Returns 0, or -1 with the
 * reason.  The INFO call itself is counted in the next snapshot's
 * total_commands (Redis counts a command once it finished). */
int info_take(redisContext *rc, struct info_snap *s, char *err, size_t errlen);

/* after - before, per command (commands absent before count from 0). */
void info_delta(const struct info_snap *after, const struct info_snap *before,
                struct info_snap *out);

/* Add the delta d to the sum acc (a command new to acc is appended). */
void info_accumulate(struct info_snap *acc, const struct info_snap *d);

/* A command's entry in `s` (zeroes when absent). */
struct cmd_stat info_cmd(const struct info_snap *s, const char *name);

/*
 * The commands of a delta as text, most time first, skipping `skip`
 * (e.g. "evalsha") and the bench's own INFO, each as "name us/job" (usec / jobs) with calls/job
 * when it is not about 1: "zadd 0.41 hmget 0.38(0.02/job)".  Only
 * commands with time or calls are listed; at most `max` of them.
 */
void info_breakdown(const struct info_snap *delta, double jobs, const char *skip,
                    size_t max, char *out, size_t outlen);

#endif
