/*
 * outbox: the PostgreSQL outbox relay end to end (--only outbox;
 * docs/outbox.md, docs/benchmarks.md "The PostgreSQL outbox relay").
 *
 * A private redis-server, a private PostgreSQL 15 (tests/pg_fixture.h:
 * fsync and synchronous_commit off) with pg_stat_statements when it is
 * installed, the outbox's DDL, a role "relay" with the grants
 * docs/outbox.md gives it, and the real delayqd with one source on it
 * (LISTEN, poll_interval 2 s) and 2 workers of the no-op handler.  Every
 * row is an add due in an hour, so no job runs and the workers stay
 * idle.  Then:
 *
 * latency     writers (1, then 4 at once) commit rows one at a time, each
 *             its own autocommit `SELECT delayq_enqueue(...)`, and after
 *             each commit returned look for the job in Redis (ZSCORE of
 *             the delayed set every POLL_GAP_US, no other wait): commit
 *             returned -> in Redis, p50 p90 p99 max.  Also, per row, the
 *             CPU of the relay and of its PostgreSQL backend, and the time
 *             of the relay's statements (pg_stat_statements: planning and
 *             execution), with rows arriving one at a time.
 * relay b=B   a fresh daemon at batch B, on an emptied Redis; N rows
 *             inserted in one statement and committed at once; from that
 *             commit until the table is empty (wait_empty): rows/s, and
 *             per row the CPU of the relay's PostgreSQL backend, of the
 *             whole PostgreSQL server (less the bench's own backend), of
 *             the relay process, of delayqd and of redis-server; the
 *             relay's statements' time; the plans of its take and delete.
 *
 * Figures that have no column of report.h go into the row's note as
 * name=value.  --tcp, --tls and --replica do not apply: the daemon
 * reaches Redis on the unix socket.
 *
 * The environment (the PostgreSQL helpers, delayqd with its source, the
 * CPU samples, pg_stat_statements) is bench/outbox_env.c; here are the
 * measurements and the rows.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/report.h"

#ifndef HAVE_LIBPQ

int run_outbox(const struct bench_env *env, char *err, size_t errlen)
{
    (void)env, (void)err, (void)errlen;
    report_note("outbox: skipped: this delayq-bench was built without libpq");
    return 0;
}

#else

#include <errno.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/daemon_proc.h"
#include "bench/outbox_env.h"
#include "bench/redis_proc.h"
#include "lib/keys.h"
#include "outbox/outbox_sql.h"
#include "tests/pg_fixture.h"
#include "tests/testutil.h"

#define LAT_BATCH 500           /* the source's batch in the latency runs */
#define MAX_WRITERS 4
#define POLL_GAP_US 100         /* a writer's looks in Redis for its job */
#define VISIBLE_TIMEOUT_US (10 * 1000000LL)
#define EMPTY_POLL_MS 1         /* the looks for an empty table */
#define EMPTY_TIMEOUT_US (300 * 1000000LL)

/* ---- latency ------------------------------------------------------------------- */

/* What the writers share with the bench: a reason per writer, then per
 * row the latency and the statement's round trip, in ms. */
struct lat_share {
    char why[MAX_WRITERS][256];
    double v[];
};

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000L };
    nanosleep(&ts, NULL);
}

/* Wait until job `id` is in the delayed set; 0, or -1 (why). */
static int wait_visible(redisContext *rc, const char *zset, const char *id, char *why,
                        size_t len)
{
    int64_t deadline = bench_mono_us() + VISIBLE_TIMEOUT_US;
    for (;;) {
        redisReply *r = redisCommand(rc, "ZSCORE %s %s", zset, id);
        if (!r) {
            snprintf(why, len, "redis: %s", rc->errstr);
            return -1;
        }
        int found = r->type == REDIS_REPLY_STRING;
        freeReplyObject(r);
        if (found)
            return 0;
        if (bench_mono_us() > deadline) {
            snprintf(why, len, "job %s not in Redis %lld s after its commit", id,
                     VISIBLE_TIMEOUT_US / 1000000);
            return -1;
        }
        sleep_us(POLL_GAP_US);
    }
}

/* Writer `w`: wait at the gate (its EOF), then commit `n` rows one at a
 * time, each followed by the wait for its job.  Runs in a child; 0 or -1
 * (why). */
static int writer(const struct octx *x, int w, int writers, long n, int gate, double *lat,
                  double *rtt, char *why, size_t len)
{
    PGconn *c = oenv_pg_connect(x->pg.conninfo, why, len);
    redisContext *rc = c ? tu_redis_connect(x->redis.sock, 10000, why, len) : NULL;
    char go;
    if (!rc || read(gate, &go, 1) < 0)
        return -1;
    for (long i = 0; i < n && !bench_interrupted; i++) {
        char id[64];
        snprintf(id, sizeof id, "lat%d-%d-%ld", writers, w, i);
        const char *params[] = { BENCH_QUEUE, BENCH_TYPE, bench_payload, id };
        int64_t t0 = bench_mono_us();
        PGresult *r = PQexecParams(c, "SELECT delayq_enqueue($1, $2, $3::bytea, "
                                   "interval '1 hour', $4)", 4, NULL, params, NULL, NULL, 0);
        int64_t t1 = bench_mono_us();
        int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (!ok) {
            snprintf(why, len, "delayq_enqueue: %s", PQerrorMessage(c));
            return -1;
        }
        if (wait_visible(rc, x->zset, id, why, len) < 0)
            return -1;
        lat[i] = (double)(bench_mono_us() - t1) / 1000.0;
        rtt[i] = (double)(t1 - t0) / 1000.0;
    }
    return 0;   /* the child exits: its connections close with it */
}

/* Fork the writers, open the gate, wait for them.  0, or -1 (err). */
static int run_writers(struct octx *x, int writers, long per, struct lat_share *sh,
                       struct osample *s0, char *err, size_t errlen)
{
    long rows = per * writers;
    int gate[2];
    if (pipe(gate) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t kids[MAX_WRITERS] = { 0 };
    fflush(NULL);
    for (int w = 0; w < writers; w++) {
        if ((kids[w] = fork()) == 0) {
            close(gate[1]);
            int rc = writer(x, w, writers, per, gate[0], sh->v + w * per,
                            sh->v + rows + w * per, sh->why[w], sizeof sh->why[w]);
            _exit(rc < 0 ? 1 : 0);     /* not exit: the bench's connections are ours */
        }
    }
    close(gate[0]);
    bench_sleep_ms(200);        /* their connections made */
    oenv_sample(x, s0);
    close(gate[1]);
    int failed = 0;
    for (int w = 0; w < writers; w++) {
        int status;
        if (kids[w] < 0 || waitpid(kids[w], &status, 0) < 0 || !WIFEXITED(status)
            || WEXITSTATUS(status) != 0) {
            if (!failed)
                snprintf(err, errlen, "writer %d: %s", w,
                         sh->why[w][0] ? sh->why[w] : "failed");
            failed = 1;
        }
    }
    return failed ? -1 : 0;
}

static void latency_row(int writers, long rows, double *lat, double *rtt,
                        const struct stmt_time *st, const struct osample *a,
                        const struct osample *b)
{
    char stmts[140];
    oenv_stmt_note(st, (double)rows, stmts, sizeof stmts);
    bench_sort(lat, (size_t)rows);
    bench_sort(rtt, (size_t)rows);
    char config[48];
    snprintf(config, sizeof config, "latency w=%d", writers);
    struct report_row row;
    report_row_init(&row, "outbox", config);
    row.v[COL_JOBS] = (double)rows;
    row.v[COL_P50_MS] = bench_percentile(lat, (size_t)rows, 50);
    row.v[COL_P99_MS] = bench_percentile(lat, (size_t)rows, 99);
    row.v[COL_MAX_MS] = lat[rows - 1];
    row.v[COL_SECONDS] = (double)(b->wall_us - a->wall_us) / 1e6;
    row.v[COL_DAEMON_US_PER_JOB] = (double)(b->daemon - a->daemon) / (double)rows;
    snprintf(row.note, sizeof row.note,
             "commit->in redis, b=%d; p90_ms=%.2f commit_rtt_p50_ms=%.2f "
             "pg_relay_us/row=%.1f %s relay_us/row=%.1f (redis CPU not counted: the "
             "writers' polls are in it)", LAT_BATCH,
             bench_percentile(lat, (size_t)rows, 90), bench_percentile(rtt, (size_t)rows, 50),
             (double)(b->backend - a->backend) / (double)rows, stmts,
             (double)(b->relay - a->relay) / (double)rows);
    report_add(&row);
}

/* `rows` rows from `writers` writers at once, with the daemon at
 * LAT_BATCH (started by the caller).  0, or -1 (err). */
static int run_latency(struct octx *x, int writers, long rows, char *err, size_t errlen)
{
    bench_progress("outbox: latency, %d writer%s, %ld rows", writers, writers > 1 ? "s" : "",
                   rows);
    long per = rows / writers;
    rows = per * writers;
    size_t bytes = sizeof(struct lat_share) + 2 * (size_t)rows * sizeof(double);
    struct lat_share *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        snprintf(err, errlen, "mmap: %s", strerror(errno));
        return -1;
    }
    memset(sh, 0, bytes);
    struct osample a, b;
    struct stmt_time st;
    int rc = oenv_stmt_reset(x, err, errlen);
    if (rc == 0)
        rc = run_writers(x, writers, per, sh, &a, err, errlen);
    oenv_sample(x, &b);
    if (rc == 0)
        rc = oenv_stmt_read(x, &st, err, errlen);
    if (rc == 0 && bench_interrupted) {
        snprintf(err, errlen, "interrupted");
        rc = -1;
    }
    if (rc == 0)
        rc = oenv_same_relay(&a, &b, err, errlen);
    if (rc == 0)
        latency_row(writers, rows, sh->v, sh->v + rows, &st, &a, &b);
    munmap(sh, bytes);
    return rc;
}

/* ---- throughput ----------------------------------------------------------------- */

/* The first scan node of the plan `explain` shows: "index" (an index or
 * bitmap scan), "seq", or "?". */
static const char *scan_of(struct octx *x, const char *explain)
{
    char err[300];
    PGresult *r = oenv_sql_run(x->conn, explain, err, sizeof err);
    const char *kind = "?";
    for (int i = 0; r && i < PQntuples(r); i++) {
        const char *line = PQgetvalue(r, i, 0);
        if (strstr(line, "Scan")) {
            kind = strstr(line, "Seq Scan") ? "seq" : "index";
            break;
        }
    }
    PQclear(r);
    return kind;
}

/* The plans of the relay's take and delete (relay_pg.c) of a `batch`-row
 * batch on the full table, as "take=index delete=seq", with literals of
 * the first `batch` ids standing for the delete's parameters (the array
 * and, since the relay bounds it, the range). */
static void relay_plans(struct octx *x, int batch, char *out, size_t len)
{
    char take[256], err[300];
    snprintf(take, sizeof take, "EXPLAIN SELECT id FROM " OUTBOX_DEFAULT_TABLE
             " ORDER BY id LIMIT %d FOR UPDATE SKIP LOCKED", batch);
    size_t cap = (size_t)batch * 24 + 128, at;
    char *del = malloc(cap);
    long long first;
    const char *dk = "?";
    if (del && oenv_sql_long(x->conn, "SELECT min(id) FROM " OUTBOX_DEFAULT_TABLE, &first,
                             err, sizeof err) == 0) {
        at = (size_t)snprintf(del, cap, "EXPLAIN DELETE FROM " OUTBOX_DEFAULT_TABLE
                              " WHERE id BETWEEN %lld AND %lld AND id = ANY('{", first,
                              first + batch - 1);
        for (int i = 0; i < batch; i++)
            at += (size_t)snprintf(del + at, cap - at, "%s%lld", i ? "," : "", first + i);
        snprintf(del + at, cap - at, "}'::bigint[])");
        dk = scan_of(x, del);
    }
    free(del);
    snprintf(out, len, "take=%s delete=%s", scan_of(x, take), dk);
}

/* Wait until the outbox table has no row: first until Redis has the
 * `rows` jobs (ZCARD, cheap, every ms), then until the last batch's
 * delete committed (EXISTS, every ms; the scan would cost PostgreSQL
 * more if it ran all along).  0, or -1 (err). */
static int wait_empty(struct octx *x, long long z0, long rows, char *err, size_t errlen)
{
    int64_t deadline = bench_mono_us() + EMPTY_TIMEOUT_US;
    long long any = 1;
    while (any) {
        long long z = tu_redis_int(x->rc, "ZCARD %s", x->zset);
        if (z < 0) {
            snprintf(err, errlen, "redis: ZCARD failed");
            return -1;
        }
        if (z - z0 >= rows
            && oenv_sql_long(x->conn, "SELECT EXISTS (SELECT 1 FROM " OUTBOX_DEFAULT_TABLE
                             ")::int", &any, err, errlen) < 0)
            return -1;
        if (any && (bench_mono_us() > deadline || bench_interrupted)) {
            char why[600];
            daemon_proc_last_problem(&x->daemon, why, sizeof why);
            snprintf(err, errlen, "the outbox is not empty after %lld s%s%s",
                     EMPTY_TIMEOUT_US / 1000000, why[0] ? "; last problem: " : "", why);
            return -1;
        }
        if (any)
            bench_sleep_ms(EMPTY_POLL_MS);
    }
    return 0;
}

/* Every row relayed once, none dead: the delayed set grew by `rows`. */
static int check_relayed(struct octx *x, long long z0, long rows, char *err, size_t errlen)
{
    long long z1 = tu_redis_int(x->rc, "ZCARD %s", x->zset), dead;
    if (oenv_sql_long(x->conn, "SELECT count(*) FROM " OUTBOX_DEFAULT_TABLE "_dead", &dead,
                      err, errlen) < 0)
        return -1;
    if (z1 - z0 == rows && dead == 0)
        return 0;
    snprintf(err, errlen, "%lld jobs in Redis for %ld rows, %lld dead rows", z1 - z0, rows,
             dead);
    return -1;
}

static void relay_row(int batch, long rows, const char *plan, const struct stmt_time *st,
                      const struct osample *a, const struct osample *b)
{
    char stmts[140];
    oenv_stmt_note(st, (double)rows, stmts, sizeof stmts);
    char config[48];
    snprintf(config, sizeof config, "relay b=%d", batch);
    struct report_row row;
    report_row_init(&row, "outbox", config);
    double n = (double)rows;
    row.v[COL_JOBS] = n;
    row.v[COL_SECONDS] = (double)(b->wall_us - a->wall_us) / 1e6;
    row.v[COL_JOBS_PER_S] = n / row.v[COL_SECONDS];
    row.v[COL_REDIS_US_PER_JOB] = (double)(b->redis - a->redis) / n;
    row.v[COL_DAEMON_US_PER_JOB] = (double)(b->daemon - a->daemon) / n;
    int64_t pg_all = (b->pg_all - a->pg_all) - (b->own_backend - a->own_backend);
    snprintf(row.note, sizeof row.note,
             "commit->table empty; pg_relay_us/row=%.1f pg_all_us/row=%.1f %s "
             "relay_us/row=%.1f plans: %s", (double)(b->backend - a->backend) / n,
             (double)pg_all / n, stmts, (double)(b->relay - a->relay) / n, plan);
    report_add(&row);
}

/* A fresh daemon at `batch`; `rows` rows committed at once; the time
 * until the table is empty.  0, or -1 (err). */
static int run_relay(struct octx *x, int batch, long rows, char *err, size_t errlen)
{
    bench_progress("outbox: relay at batch %d, %ld rows", batch, rows);
    oenv_daemon_stop(x);
    /* Each batch size starts from an empty Redis, so that the sets' sizes
     * do not favour the first. */
    if (tu_redis_int(x->rc, "FLUSHALL") < 0) {
        snprintf(err, errlen, "redis: FLUSHALL failed");
        return -1;
    }
    if (oenv_daemon_start(x, batch, err, errlen) < 0
        || oenv_sql_ok(x->conn, "VACUUM " OUTBOX_DEFAULT_TABLE, err, errlen) < 0)
        return -1;
    long long z0 = tu_redis_int(x->rc, "ZCARD %s", x->zset);
    char sql[512], plan[40];
    snprintf(sql, sizeof sql, "INSERT INTO " OUTBOX_DEFAULT_TABLE " (queue, job_id, type, "
             "payload, delay) SELECT '" BENCH_QUEUE "', 'tp%d-' || g, '" BENCH_TYPE "', "
             "'%s'::bytea, interval '1 hour' FROM generate_series(1, %ld) g",
             batch, bench_payload, rows);
    if (oenv_sql_ok(x->conn, "BEGIN", err, errlen) < 0
        || oenv_sql_ok(x->conn, sql, err, errlen) < 0)
        return -1;
    relay_plans(x, batch, plan, sizeof plan);
    struct osample a, b;
    struct stmt_time st;
    if (oenv_stmt_reset(x, err, errlen) < 0)
        return -1;
    oenv_sample(x, &a);
    a.wall_us = bench_mono_us();
    if (oenv_sql_ok(x->conn, "COMMIT", err, errlen) < 0
        || wait_empty(x, z0, rows, err, errlen) < 0)
        return -1;
    int64_t end_us = bench_mono_us();
    oenv_sample(x, &b);
    b.wall_us = end_us;
    if (oenv_same_relay(&a, &b, err, errlen) < 0 || check_relayed(x, z0, rows, err, errlen) < 0
        || oenv_stmt_read(x, &st, err, errlen) < 0)
        return -1;
    relay_row(batch, rows, plan, &st, &a, &b);
    return 0;
}

/* ---- the run -------------------------------------------------------------------- */

/* Load pg_stat_statements (with planning times) when it is installed: a
 * restart of the server.  0 (x->pgss says whether), or -1 (err). */
static int load_stmt_stats(struct octx *x, char *err, size_t errlen)
{
    if (access(PG_FIXTURE_BINDIR "/../lib/pg_stat_statements.so", R_OK) < 0)
        return 0;
    if (pg_exec(&x->pg, "ALTER SYSTEM SET shared_preload_libraries = "
                "'pg_stat_statements'") < 0
        || pg_restart(&x->pg) < 0
        || pg_exec(&x->pg, "ALTER SYSTEM SET pg_stat_statements.track_planning = on") < 0
        || pg_exec(&x->pg, "SELECT pg_reload_conf()") < 0) {
        snprintf(err, errlen, "PostgreSQL with pg_stat_statements: %s", x->pg.why);
        return -1;
    }
    x->pgss = 1;
    return 0;
}

/* Redis, PostgreSQL with the outbox, the bench's connections.  0; 1 when
 * PostgreSQL 15 cannot run here (err says why); -1 (err). */
static int setup(struct octx *x, char *err, size_t errlen)
{
    if (redis_proc_start(&x->redis, x->env->redis_server, err, errlen) < 0
        || !(x->rc = redis_proc_connect(&x->redis, err, errlen)))
        return -1;
    struct queue_keys keys;
    keys_build(&keys, DQ_DEFAULT_PREFIX, BENCH_QUEUE);
    snprintf(x->zset, sizeof x->zset, "%s", keys.key[1]);
    int rc = pg_start(&x->pg, x->redis.dir);
    if (rc != 0) {
        snprintf(err, errlen, "PostgreSQL 15: %s", x->pg.why);
        return rc;
    }
    x->pg_up = 1;
    if (load_stmt_stats(x, err, errlen) < 0
        || !(x->conn = oenv_pg_connect(x->pg.conninfo, err, errlen)))
        return -1;
    x->own_backend = PQbackendPID(x->conn);
    if (x->pgss && oenv_sql_ok(x->conn, "CREATE EXTENSION pg_stat_statements", err, errlen) < 0)
        return -1;
    snprintf(x->relay_conninfo, sizeof x->relay_conninfo, "%s user=relay", x->pg.conninfo);
    /* The relay's role as docs/outbox.md makes it: its statements are
     * then told from the bench's. */
    return oenv_load_ddl(x, err, errlen) < 0 ? -1
           : oenv_sql_ok(x->conn, "CREATE ROLE relay LOGIN; "
                         "GRANT SELECT, UPDATE, DELETE ON " OUTBOX_DEFAULT_TABLE " TO relay; "
                         "GRANT INSERT ON " OUTBOX_DEFAULT_TABLE "_dead TO relay", err, errlen);
}

static void teardown(struct octx *x)
{
    oenv_daemon_stop(x);
    PQfinish(x->conn);
    if (x->pg_up)
        pg_stop(&x->pg);
    if (x->rc)
        redisFree(x->rc);
    redis_proc_stop(&x->redis);
}

int run_outbox(const struct bench_env *env, char *err, size_t errlen)
{
    static const int full_batches[] = { 100, 500, 2000 };
    int quick = env->opt.quick;
    long lat_rows = quick ? 100 : 1000, tp_rows = quick ? 2000 : 50000;
    struct octx x;
    memset(&x, 0, sizeof x);
    x.env = env;
    int rc = setup(&x, err, errlen);
    if (rc > 0) {
        report_note("outbox: skipped: %s", err);
        err[0] = '\0';
        teardown(&x);
        return 0;
    }
    if (rc == 0)
        rc = oenv_daemon_start(&x, LAT_BATCH, err, errlen);
    if (rc == 0)
        rc = run_latency(&x, 1, lat_rows, err, errlen);
    if (rc == 0)
        rc = run_latency(&x, MAX_WRITERS, lat_rows, err, errlen);
    for (size_t i = 0; rc == 0 && i < (quick ? 1 : 3); i++)
        rc = run_relay(&x, quick ? 500 : full_batches[i], tp_rows, err, errlen);
    teardown(&x);
    return rc < 0 ? -1 : 0;
}

#endif
