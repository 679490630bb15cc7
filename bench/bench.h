/*
 * delayq-bench: measures delayq on this machine against a private
 * redis-server and the real delayqd (docs/benchmarks.md).
 *
 * The program is a handful of runs (drain, lateness, enqueue, idle, scale,
 * ceiling, cluster, producer, outbox), each in its own file, that share
 * what is declared here: the options, the resolved paths, time helpers,
 * and the bulk enqueue used to prepare every run.
 */
#ifndef DQ_BENCH_H
#define DQ_BENCH_H

#include <delayq/client.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_QUEUE "bench"
#define BENCH_TYPE "bench"
#define BENCH_PAYLOAD_LEN 32    /* bytes of every job's payload */
#define BENCH_CHUNK 10000       /* jobs per dq_enqueue_many call (the library
                                   sends them as a pipeline of 1000-job calls) */

enum bench_run {
    RUN_ENQUEUE,
    RUN_CEILING,
    RUN_DRAIN,
    RUN_LATENESS,
    RUN_IDLE,
    RUN_SCALE,
    RUN_CLUSTER,
    RUN_PRODUCER,
    RUN_OUTBOX,                 /* the PostgreSQL outbox relay (needs libpq) */
    RUN_COUNT
};

struct bench_opts {
    long n;                     /* jobs per drain, enqueue and ceiling run */
    int quick;                  /* smoke run: tiny sizes, no scale run */
    unsigned runs;              /* bit (1 << enum bench_run) per run to do */
    int scale_10m;              /* add the 10M-job scale point */
    int idle_s;                 /* length of the idle window */
    double lateness_s;          /* length of each lateness run */
    int lateness_workers;       /* workers and claim batch of the lateness */
    int lateness_batch;         /* runs: 2 and 16, the example config's */
    const char *redis_server;   /* NULL: search */
    const char *delayqd;        /* NULL: TOP/delayqd */
    const char *json, *csv;     /* NULL: not written */
};

/* What every run needs: the options and the programs it starts. */
struct bench_env {
    struct bench_opts opt;
    char redis_server[PATH_MAX];
    char delayqd[PATH_MAX];
    char handler_dir[PATH_MAX]; /* absolute: holds noop.so */
};

/* Every run has this signature: 0 when done (its rows reported), -1 with
 * a one-line reason in `err`.  A run starts and stops its own processes. */
typedef int (*bench_run_fn)(const struct bench_env *env, char *err, size_t errlen);

int run_enqueue(const struct bench_env *env, char *err, size_t errlen);
int run_ceiling(const struct bench_env *env, char *err, size_t errlen);
int run_drain(const struct bench_env *env, char *err, size_t errlen);
int run_lateness(const struct bench_env *env, char *err, size_t errlen);
int run_idle(const struct bench_env *env, char *err, size_t errlen);
int run_scale(const struct bench_env *env, char *err, size_t errlen);
int run_cluster(const struct bench_env *env, char *err, size_t errlen);
int run_producer(const struct bench_env *env, char *err, size_t errlen);
int run_outbox(const struct bench_env *env, char *err, size_t errlen);

/* ---- time (common.c) ---- */

int64_t bench_real_ms(void);    /* CLOCK_REALTIME, comparable to Redis TIME */
int64_t bench_real_us(void);
int64_t bench_mono_us(void);
int64_t bench_self_cpu_us(void);    /* this process's CPU time */
void bench_sleep_ms(int64_t ms);
/* Sleep until CLOCK_REALTIME reaches `ms` (returns at once if it has). */
void bench_sleep_until_real_ms(int64_t ms);

/* ---- helpers (common.c) ---- */

/* Progress for the person running the bench, on stderr. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set by SIGINT/SIGTERM; long waits give up when it is set. */
extern volatile int bench_interrupted;

/* --keep: leave each run's directory (redis and delayqd logs, the
 * configuration, the lateness record) in place for a post-mortem. */
extern int bench_keep;
/* --replica: every server started has a replica (redis_proc.c), and the
 * daemon and the bench's clients use durability "replicated". */
extern int bench_replica;

/* --tcp: the daemon reaches Redis over TCP on loopback instead of the
 * unix socket; --tls DIR: over TLS, with the certificates that
 * tests/tls-certs.sh made in DIR (ca.crt, server.crt, server.key).  The
 * bench's own client stays on the unix socket. */
extern int bench_tcp;
extern const char *bench_tls_dir;

/* A client of the server listening on `sock`; NULL with the reason. */
dq_client *bench_client(const char *sock, char *err, size_t errlen);

/*
 * Enqueue `n` jobs of BENCH_TYPE with a BENCH_PAYLOAD_LEN-byte payload on
 * BENCH_QUEUE, with generated ids, pipelined in chunks of BENCH_CHUNK.
 * Job i is due at `at0_ms + i * spacing_ms` (Unix ms; in the past is fine).
 * Returns 0, or -1 with the reason.
 */
int bench_fill(dq_client *c, long n, int64_t at0_ms, double spacing_ms, char *err,
               size_t errlen);

/* The same, each job due within the `window_ms` before `due_ms`, in an
 * order of due times unrelated to the order of ids (the drain's worst case
 * for the record buckets: each claim reads many buckets). */
int bench_fill_scattered(dq_client *c, long n, int64_t due_ms, int window_ms, char *err,
                         size_t errlen);

/* `n` jobs all due at `due_ms`, a third each high, normal and low. */
int bench_fill_priorities(dq_client *c, long n, int64_t due_ms, char *err, size_t errlen);

/* Put "PREFIX: " in front of the message in err (a row's config). */
void bench_err_prefix(char *err, size_t errlen, const char *prefix);

/* The payload every job carries. */
extern const char bench_payload[BENCH_PAYLOAD_LEN + 1];

/* Percentile p (0..100) of sorted values, by nearest rank. */
double bench_percentile(const double *sorted, size_t n, double p);
/* Sort doubles in place, ascending. */
void bench_sort(double *v, size_t n);

#endif
