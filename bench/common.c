#include "config.h"

#include "bench/bench.h"
#include "tests/testutil.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile int bench_interrupted;
int bench_keep;
int bench_replica;
int bench_tcp;
const char *bench_tls_dir;

const char bench_payload[BENCH_PAYLOAD_LEN + 1] = "0123456789abcdef0123456789abcdef";

/* ---- time ---------------------------------------------------------------- */

int64_t bench_real_ms(void)
{
    return tu_now_ms();
}

int64_t bench_real_us(void)
{
    return tu_clock_us(CLOCK_REALTIME);
}

int64_t bench_mono_us(void)
{
    return tu_clock_us(CLOCK_MONOTONIC);
}

int64_t bench_self_cpu_us(void)
{
    return tu_clock_us(CLOCK_PROCESS_CPUTIME_ID);
}

void bench_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !bench_interrupted)
        ;
}

void bench_sleep_until_real_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR
           && !bench_interrupted)
        ;
}

/* ---- helpers ------------------------------------------------------------- */

void bench_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("delayq-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

dq_client *bench_client(const char *sock, char *err, size_t errlen)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = sock;
    opt.command_timeout_ms = 60000;     /* a 1000-job pipeline on a busy box */
    if (bench_replica)
        opt.durability = DQ_DURABILITY_REPLICATED;
    return dq_connect(&opt, err, errlen, NULL);
}

/* Job i is due at at0_ms + i * spacing_ms, less (i * 7919) % scatter_ms
 * when scatter_ms > 0: a spread that puts ids far apart next to each other
 * in the order of due times.  With `spread`, job i is high, normal or low
 * as i % 3 is 0, 1 or 2; otherwise every job is normal. */
static int fill(dq_client *c, long n, int64_t at0_ms, double spacing_ms, int scatter_ms,
                bool spread, char *err, size_t errlen)
{
    static const int levels[] = { DQ_PRIORITY_HIGH, DQ_PRIORITY_NORMAL, DQ_PRIORITY_LOW };
    dq_enqueue_req *req = calloc(BENCH_CHUNK, sizeof *req);
    if (!req) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (long done = 0; done < n && rc == 0;) {
        size_t k = n - done < BENCH_CHUNK ? (size_t)(n - done) : BENCH_CHUNK;
        for (size_t i = 0; i < k; i++) {
            long idx = done + (long)i;
            req[i] = (dq_enqueue_req){
                .queue = BENCH_QUEUE, .type = BENCH_TYPE,
                .payload = bench_payload, .payload_len = BENCH_PAYLOAD_LEN,
                .at_ms = at0_ms + (int64_t)floor((double)idx * spacing_ms)
                         - (scatter_ms > 0 ? (int64_t)(idx * 7919 % scatter_ms) : 0),
                .priority = spread ? levels[idx % 3] : 0,
            };
        }
        if (dq_enqueue_many(c, req, k, NULL, NULL) != DQ_OK) {
            snprintf(err, errlen, "enqueue: %s", dq_errmsg(c));
            rc = -1;
        } else if (bench_interrupted) {
            snprintf(err, errlen, "interrupted");
            rc = -1;
        }
        done += (long)k;
    }
    free(req);
    return rc;
}

int bench_fill(dq_client *c, long n, int64_t at0_ms, double spacing_ms, char *err,
               size_t errlen)
{
    return fill(c, n, at0_ms, spacing_ms, 0, false, err, errlen);
}

int bench_fill_priorities(dq_client *c, long n, int64_t due_ms, char *err, size_t errlen)
{
    return fill(c, n, due_ms, 0, 0, true, err, errlen);
}

int bench_fill_scattered(dq_client *c, long n, int64_t due_ms, int window_ms, char *err,
                         size_t errlen)
{
    return fill(c, n, due_ms - 1, 0, window_ms, false, err, errlen);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
}

double bench_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double rank = ceil(p / 100.0 * (double)n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    return sorted[i < n ? i : n - 1];
}

void bench_err_prefix(char *err, size_t errlen, const char *prefix)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", err);
    snprintf(err, errlen, "%s: %s", prefix, tmp);
}
