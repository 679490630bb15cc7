/*
 * idle: what delayqd costs Redis when there is nothing to do.  The daemon
 * runs 8 workers on an empty queue (plus its reaper); after it settled,
 * the Redis commands it sends over a window (--idle-seconds, 30 s by
 * default: one full idle-claim period of every worker) are counted from
 * INFO's total_commands_processed, less the bench's own INFO calls.  Then
 * the same with the queue in 12 partitions, whose idle look asks each.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/daemon_proc.h"
#include "bench/measure.h"
#include "bench/redis_proc.h"
#include "bench/report.h"

#define IDLE_WORKERS 8
#define IDLE_PARTS 12
#define SETTLE_MS 1000

/* "evalsha=9 publish=0 ..." for the commands of a delta, but INFO. */
static void list_calls(const struct info_snap *d, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < d->ncmds && used < outlen; i++) {
        if (strcmp(d->cmds[i].name, "info") == 0 || d->cmds[i].calls <= 0)
            continue;
        int w = snprintf(out + used, outlen - used, "%s%s=%.0f", used ? " " : "",
                         d->cmds[i].name, d->cmds[i].calls);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (!out[0])
        snprintf(out, outlen, "none");
}

/* One idle row, the queue in `parts` partitions (0: not partitioned). */
static int idle_row(const struct bench_env *env, int parts, char *err, size_t errlen)
{
    struct report_row row;
    char config[48], on[16] = "";
    if (parts > 1)
        snprintf(on, sizeof on, " p=%d", parts);
    snprintf(config, sizeof config, "w=%d %ds%s", IDLE_WORKERS, env->opt.idle_s, on);
    report_row_init(&row, "idle", config);
    bench_progress("idle %s", config);
    struct redis_proc rp;
    struct daemon_proc dp;
    memset(&dp, 0, sizeof dp);
    redisContext *rc = NULL;
    int ret = -1;
    if (redis_proc_start(&rp, env->redis_server, err, errlen) < 0)
        goto done;
    struct daemon_spec spec = { .workers = IDLE_WORKERS, .batch = 16, .partitions = parts };
    if (daemon_proc_start(&dp, env, &rp, &spec, err, errlen) < 0)
        goto done;
    if (!(rc = redis_proc_connect(&rp, err, errlen)))
        goto done;
    bench_sleep_ms(SETTLE_MS);
    struct info_snap i0, i1, d;
    struct cpu_sample c0, c1;
    if (info_take(rc, &i0, err, errlen) < 0)
        goto done;
    measure_cpu(&c0, rp.pid, dp.pid);
    bench_sleep_ms((int64_t)env->opt.idle_s * 1000);
    measure_cpu(&c1, rp.pid, dp.pid);
    if (info_take(rc, &i1, err, errlen) < 0)
        goto done;
    if (bench_interrupted) {
        snprintf(err, errlen, "interrupted");
        goto done;
    }
    info_delta(&i1, &i0, &d);
    double secs = (double)(c1.wall_us - c0.wall_us) / 1e6;
    /* The first INFO is counted in the second snapshot; the second is not. */
    double cmds = d.total_commands - info_cmd(&d, "info").calls;
    row.v[COL_CMDS_PER_S] = cmds / secs;
    row.v[COL_DAEMON_CPU_MS_PER_S] = (double)(c1.daemon_us - c0.daemon_us) / 1000 / secs;
    row.v[COL_SECONDS] = secs;
    char calls[120];
    list_calls(&d, calls, sizeof calls);
    snprintf(row.note, sizeof row.note,
             "%.3f redis cmds/s (%s); delayqd CPU %.2f ms/s, redis %.2f ms/s",
             row.v[COL_CMDS_PER_S], calls, row.v[COL_DAEMON_CPU_MS_PER_S],
             (double)(c1.redis_us - c0.redis_us) / 1000 / secs);
    report_add(&row);
    ret = 0;
done:
    if (ret < 0)
        bench_err_prefix(err, errlen, config);
    if (rc)
        redisFree(rc);
    daemon_proc_stop(&dp, 15000);
    redis_proc_stop(&rp);
    return ret;
}

int run_idle(const struct bench_env *env, char *err, size_t errlen)
{
    if (idle_row(env, 0, err, errlen) < 0)
        return -1;
    return idle_row(env, IDLE_PARTS, err, errlen);
}
