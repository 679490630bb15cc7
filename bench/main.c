/*
 * delayq-bench: options, the programs to run, the runs, the report.
 *
 *   delayq-bench [-n N] [--quick] [--only RUN,...] [--json FILE] [--csv FILE]
 *                [--tcp | --tls CERTDIR]
 *                [--redis-server PATH] [--delayqd PATH] [--scale-10m]
 *                [--idle-seconds S] [--lateness-seconds S] [--lateness-workers N]
 *                [--lateness-batch B] [--keep]
 *
 * Exit codes: 0 every run done; 1 a run failed (one line on stderr says
 * which and why); 64 usage; 69 redis-server, delayqd or the no-op handler
 * not found.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/redis_proc.h"
#include "bench/report.h"
#include "tests/testutil.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 64
#define EXIT_UNAVAILABLE 69

static const struct {
    const char *name;
    bench_run_fn fn;
} runs[RUN_COUNT] = {
    [RUN_ENQUEUE] = { "enqueue", run_enqueue },
    [RUN_CEILING] = { "ceiling", run_ceiling },
    [RUN_DRAIN] = { "drain", run_drain },
    [RUN_LATENESS] = { "lateness", run_lateness },
    [RUN_IDLE] = { "idle", run_idle },
    [RUN_SCALE] = { "scale", run_scale },
    [RUN_CLUSTER] = { "cluster", run_cluster },
    [RUN_PRODUCER] = { "producer", run_producer },
    [RUN_OUTBOX] = { "outbox", run_outbox },
};

static void usage(FILE *to)
{
    fprintf(to,
            "usage: delayq-bench [options]\n"
            "  -n N                  jobs per drain, enqueue and ceiling run (100000)\n"
            "  --quick               smoke run: N=2000, lateness 1 s, idle 2 s, no scale,\n"
            "                        cluster or outbox run\n"
            "  --only RUN,...        enqueue, ceiling, drain, lateness, idle, scale, cluster,\n"
            "                        producer, outbox\n"
            "  --json FILE           write the results as JSON\n"
            "  --csv FILE            write the table as CSV\n"
            "  --redis-server PATH   (default: $REDIS_SERVER, else redis-server on PATH)\n"
            "  --delayqd PATH        (default: $TOP_BUILDDIR/delayqd, else beside this program)\n"
            "  --scale-10m           add 10M delayed jobs to the scale run (needs ~5 GB)\n"
            "  --idle-seconds S      length of the idle window (30)\n"
            "  --lateness-seconds S  length of each lateness run (10)\n"
            "  --lateness-workers N  workers in the lateness runs (2)\n"
            "  --lateness-batch B    claim batch in the lateness runs (16)\n"
            "  --keep                keep each run's directory (logs, config, records)\n"
            "  --replica             give each redis-server a replica and use durability\n"
            "                        \"replicated\" (every write waits for the replica)\n"
            "  --tcp                 the daemon reaches Redis over loopback TCP\n"
            "  --tls DIR             ... over TLS, with the certificates that\n"
            "                        tests/tls-certs.sh DIR made\n"
            "exit codes: 0 done, 1 a run failed, 64 usage, 69 a program is missing\n");
}

static void on_signal(int sig)
{
    (void)sig;
    bench_interrupted = 1;
}

/* Parse "drain,lateness" into run bits; -1 on an unknown name. */
static int parse_only(const char *list, unsigned *bits)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *bits = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < RUN_COUNT; i++)
            if (strcmp(t, runs[i].name) == 0) {
                *bits |= 1u << i;
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "delayq-bench: unknown run '%s'\n", t);
            return -1;
        }
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
    enum { O_QUICK = 256, O_ONLY, O_JSON, O_CSV, O_REDIS, O_DAEMON, O_10M, O_IDLE, O_LATE,
           O_KEEP, O_LWORKERS, O_LBATCH, O_REPLICA, O_TCP, O_TLS };
    static const struct option longopts[] = {
        { "quick", no_argument, NULL, O_QUICK },
        { "only", required_argument, NULL, O_ONLY },
        { "json", required_argument, NULL, O_JSON },
        { "csv", required_argument, NULL, O_CSV },
        { "redis-server", required_argument, NULL, O_REDIS },
        { "delayqd", required_argument, NULL, O_DAEMON },
        { "scale-10m", no_argument, NULL, O_10M },
        { "idle-seconds", required_argument, NULL, O_IDLE },
        { "lateness-seconds", required_argument, NULL, O_LATE },
        { "keep", no_argument, NULL, O_KEEP },
        { "replica", no_argument, NULL, O_REPLICA },
        { "tcp", no_argument, NULL, O_TCP },
        { "tls", required_argument, NULL, O_TLS },
        { "lateness-workers", required_argument, NULL, O_LWORKERS },
        { "lateness-batch", required_argument, NULL, O_LBATCH },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    memset(o, 0, sizeof *o);
    long n = 0;
    int idle = 0;
    double late = 0;
    unsigned only = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "n:h", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'n':
            n = strtol(optarg, &end, 10);
            if (*end || n < 1) {
                fprintf(stderr, "delayq-bench: -n wants a positive number\n");
                return -1;
            }
            break;
        case O_QUICK: o->quick = 1; break;
        case O_ONLY:
            if (parse_only(optarg, &only) < 0)
                return -1;
            break;
        case O_JSON: o->json = optarg; break;
        case O_CSV: o->csv = optarg; break;
        case O_REDIS: o->redis_server = optarg; break;
        case O_DAEMON: o->delayqd = optarg; break;
        case O_10M: o->scale_10m = 1; break;
        case O_KEEP: bench_keep = 1; break;
        case O_REPLICA: bench_replica = 1; break;
        case O_TCP: bench_tcp = 1; break;
        case O_TLS: bench_tls_dir = optarg; break;
        case O_LWORKERS:
        case O_LBATCH: {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 1000) {
                fprintf(stderr, "delayq-bench: --lateness-%s wants 1..1000\n",
                        opt == O_LWORKERS ? "workers" : "batch");
                return -1;
            }
            *(opt == O_LWORKERS ? &o->lateness_workers : &o->lateness_batch) = (int)v;
            break;
        }
        case O_IDLE:
            idle = atoi(optarg);
            if (idle < 1) {
                fprintf(stderr, "delayq-bench: --idle-seconds wants a positive number\n");
                return -1;
            }
            break;
        case O_LATE:
            late = strtod(optarg, &end);
            if (*end || late <= 0) {
                fprintf(stderr, "delayq-bench: --lateness-seconds wants a positive number\n");
                return -1;
            }
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (bench_replica && bench_tls_dir) {
        /* The replica would need TLS replication set up too. */
        fprintf(stderr, "delayq-bench: --replica and --tls cannot be combined\n");
        return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "delayq-bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    o->n = n ? n : (o->quick ? 2000 : 100000);
    o->idle_s = idle ? idle : (o->quick ? 2 : 30);
    o->lateness_s = late > 0 ? late : (o->quick ? 1 : 10);
    if (!o->lateness_workers)
        o->lateness_workers = 2;
    if (!o->lateness_batch)
        o->lateness_batch = 16;
    /* --quick (the smoke run of make check) starts no cluster either, nor
     * a PostgreSQL (tests/check_outbox covers the relay). */
    o->runs = only ? only
                   : ((1u << RUN_COUNT) - 1)
                         & ~(o->quick ? 1u << RUN_SCALE | 1u << RUN_CLUSTER | 1u << RUN_OUTBOX
                                      : 0);
    return 0;
}

/* The build tree: $TOP_BUILDDIR, else the directory of this program (its
 * parent when the program runs from libtool's .libs). */
static void build_top(char *out, size_t outlen)
{
    const char *top = getenv("TOP_BUILDDIR");
    if (top && *top) {
        snprintf(out, outlen, "%s", top);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, outlen, ".");
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    size_t len = strlen(exe);
    if (len >= 6 && strcmp(exe + len - 6, "/.libs") == 0)
        exe[len - 6] = '\0';
    snprintf(out, outlen, "%s", exe);
}

/* Make `path` unwritable by group and others, as delayqd demands of a
 * handler and its directory (a umask 002 build leaves them writable). */
static void tighten(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 022) && st.st_uid == geteuid())
        chmod(path, st.st_mode & ~(mode_t)022);
}

static int resolve_env(struct bench_env *env)
{
    if (tu_redis_find(env->opt.redis_server, env->redis_server,
                      sizeof env->redis_server) < 0) {
        fprintf(stderr, "delayq-bench: redis-server not found (install redis-server, or "
                        "give --redis-server)\n");
        return -1;
    }
    char top[PATH_MAX];
    build_top(top, sizeof top);
    if (env->opt.delayqd)
        snprintf(env->delayqd, sizeof env->delayqd, "%s", env->opt.delayqd);
    else
        snprintf(env->delayqd, sizeof env->delayqd, "%.*s/delayqd", PATH_MAX - 16, top);
    if (access(env->delayqd, X_OK) < 0) {
        fprintf(stderr, "delayq-bench: %s: %s (build it, or give --delayqd)\n", env->delayqd,
                strerror(errno));
        return -1;
    }
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/bench/.libs", top);
    if (!realpath(dir, env->handler_dir)) {
        fprintf(stderr, "delayq-bench: %s: %s (build bench/noop.la)\n", dir, strerror(errno));
        return -1;
    }
    char so[PATH_MAX + 16];
    snprintf(so, sizeof so, "%s/noop.so", env->handler_dir);
    if (access(so, R_OK) < 0) {
        fprintf(stderr, "delayq-bench: %s: %s (build bench/noop.la)\n", so, strerror(errno));
        return -1;
    }
    tighten(env->handler_dir);
    tighten(so);
    return 0;
}

/* "7.0.15" from "Redis server v=7.0.15 sha=...". */
static void redis_version(const char *server, char *out, size_t outlen)
{
    snprintf(out, outlen, "unknown");
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "'%s' --version 2>/dev/null", server);
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    char line[256];
    if (fgets(line, sizeof line, p)) {
        const char *v = strstr(line, "v=");
        if (v)
            snprintf(out, outlen, "%.*s", (int)strcspn(v + 2, " \n"), v + 2);
    }
    pclose(p);
}

static void note_load(const char *when)
{
    char load[64] = "?";
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fgets(load, sizeof load, fp))
            load[strcspn(load, "\n")] = '\0';
        fclose(fp);
    }
    report_note("load average %s: %s", when, load);
}

int main(int argc, char **argv)
{
    struct bench_env env;
    memset(&env, 0, sizeof env);
    if (parse_args(argc, argv, &env.opt) < 0)
        return EXIT_USAGE;
    if (resolve_env(&env) < 0)
        return EXIT_UNAVAILABLE;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;      /* no SA_RESTART: sleeps end at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char version[32];
    redis_version(env.redis_server, version, sizeof version);
    report_set_machine(version);
    report_set_command(argc, argv);
    note_load("at start");
    bench_progress("redis-server %s (%s), delayqd %s, %ld jobs per run", env.redis_server,
                   version, env.delayqd, env.opt.n);

    int failed = 0;
    for (int i = 0; i < RUN_COUNT && !failed; i++) {
        if (!(env.opt.runs & (1u << i)))
            continue;
        char err[1024] = "";
        if (runs[i].fn(&env, err, sizeof err) < 0) {
            fprintf(stderr, "delayq-bench: %s: %s\n", runs[i].name, err[0] ? err : "failed");
            failed = 1;
        }
    }
    note_load("at end");
    report_finish();
    char err[512];
    if (env.opt.json && report_write_json(env.opt.json, err, sizeof err) < 0) {
        fprintf(stderr, "delayq-bench: %s\n", err);
        failed = 1;
    }
    if (env.opt.csv && report_write_csv(env.opt.csv, err, sizeof err) < 0) {
        fprintf(stderr, "delayq-bench: %s\n", err);
        failed = 1;
    }
    return failed ? EXIT_FAILED : 0;
}
