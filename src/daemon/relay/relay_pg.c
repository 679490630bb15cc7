#include "daemon/relay/relay_pg.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "outbox/outbox_sql.h"

#define SQL_MAX 2048

struct relay_pg {
    const struct source_conf *sc;
    PGconn *conn;
    char take_sql[SQL_MAX], dead_sql[SQL_MAX], delete_sql[SQL_MAX];
};

/* `s` on one line: each run of white space (libpq's messages end their
 * lines with a newline and indent the next with a tab) one space, none at
 * the end. */
static void one_line(char *s)
{
    char *out = s;
    for (const char *p = s; *p; p++) {
        int space = *p == '\n' || *p == '\t' || *p == ' ';
        if (!space)
            *out++ = *p;
        else if (out > s && out[-1] != ' ')
            *out++ = ' ';
    }
    while (out > s && out[-1] == ' ')
        out--;
    *out = '\0';
}

/* The message of the connection's last failure, on one line. */
static void conn_error(PGconn *conn, const char *what, char *why, size_t len)
{
    snprintf(why, len, "postgres: %s: %s", what, conn ? PQerrorMessage(conn) : "out of memory");
    one_line(why);
}

/* The server's notices (and the FATAL a server sends as it shuts down)
 * into the daemon's log, on one line, rather than libpq's stderr. */
static void on_notice(void *arg, const char *message)
{
    const struct source_conf *sc = arg;
    char line[600];
    snprintf(line, sizeof line, "%s", message);
    one_line(line);
    log_info("source %s: postgres says: %s", sc->name, line);
}

struct relay_pg *relay_pg_new(const struct source_conf *sc)
{
    struct relay_pg *pg = calloc(1, sizeof *pg);
    if (!pg)
        return NULL;
    pg->sc = sc;
    const char *s = sc->schema, *t = sc->table;
    /* Times as Unix ms; a delay as what is left of it now, on the
     * database's clock, so that rows that waited (Redis down) are not
     * late twice and a clock skew between the hosts does not matter. */
    snprintf(pg->take_sql, sizeof pg->take_sql,
             "SELECT id, op, queue, coalesce(job_id, ''), coalesce(type, ''), payload, "
             "coalesce(floor(extract(epoch FROM run_at) * 1000)::bigint, -1), "
             "greatest(0, ceil(extract(epoch FROM created_at + coalesce(delay, interval '0')"
             " - clock_timestamp()) * 1000))::bigint, "
             "coalesce(priority, -1), coalesce(max_attempts, 0), "
             "coalesce(floor(extract(epoch FROM expire_at) * 1000)::bigint, -1), "
             "coalesce(ceil(extract(epoch FROM ttl) * 1000)::bigint, -1) "
             "FROM %s.%s WHERE id <> ALL($2::bigint[]) "
             "ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED", s, t);
    snprintf(pg->dead_sql, sizeof pg->dead_sql,
             "INSERT INTO %s.%s_dead (id, op, queue, job_id, type, payload, run_at, delay, "
             "priority, max_attempts, expire_at, ttl, created_at, reason) "
             "SELECT o.id, o.op, o.queue, o.job_id, o.type, o.payload, o.run_at, o.delay, "
             "o.priority, o.max_attempts, o.expire_at, o.ttl, o.created_at, d.reason "
             "FROM %s.%s o JOIN unnest($1::bigint[], $2::text[]) AS d(id, reason) "
             "ON o.id = d.id", s, t, s, t);
    /* The range lets the planner take the primary key for any batch size:
     * with the array alone it scanned the whole table from 500 ids on
     * (docs/benchmarks.md, "The PostgreSQL outbox relay"). */
    snprintf(pg->delete_sql, sizeof pg->delete_sql,
             "DELETE FROM %s.%s WHERE id BETWEEN $2 AND $3 AND id = ANY($1::bigint[])", s, t);
    return pg;
}

void relay_pg_disconnect(struct relay_pg *pg)
{
    if (pg->conn)
        PQfinish(pg->conn);
    pg->conn = NULL;
}

void relay_pg_free(struct relay_pg *pg)
{
    if (!pg)
        return;
    relay_pg_disconnect(pg);
    free(pg);
}

int relay_pg_connected(const struct relay_pg *pg)
{
    return pg->conn && PQstatus(pg->conn) == CONNECTION_OK;
}

/* Run a command that returns no rows; 0, or -1 with the reason. */
static int command(PGconn *conn, const char *sql, char *why, size_t len)
{
    PGresult *r = PQexec(conn, sql);
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        conn_error(conn, sql, why, len);
    PQclear(r);
    return ok ? 0 : -1;
}

/* The connection settings of the source: conninfo's may override the
 * defaults before it, the password file comes after it. */
static void conn_params(const struct source_conf *sc, const char **keys, const char **vals)
{
    int n = 0;
    keys[n] = "application_name", vals[n++] = "delayqd relay";
    keys[n] = "connect_timeout", vals[n++] = "10";
    keys[n] = "keepalives_idle", vals[n++] = "30";
    keys[n] = "keepalives_count", vals[n++] = "3";
    keys[n] = "dbname", vals[n++] = sc->conninfo;
    if (sc->password)
        keys[n] = "password", vals[n++] = sc->password;
    keys[n] = NULL, vals[n] = NULL;
}

static PGconn *open_conn(const struct source_conf *sc)
{
    const char *keys[8], *vals[8];
    conn_params(sc, keys, vals);
    return PQconnectdbParams(keys, vals, 1);
}

/* Whether the server answers and takes connections (a login it refuses
 * then is the configuration's fault, not an outage). */
static int server_answers(const struct source_conf *sc)
{
    const char *keys[8], *vals[8];
    conn_params(sc, keys, vals);
    PGPing p = PQpingParams(keys, vals, 1);
    return p == PQPING_OK;
}

/* Prepare the batch's statements on the new connection: planned once per
 * connection rather than at every batch (three quarters of a lone row's
 * query time went to planning). */
static int prepare_all(struct relay_pg *pg, char *why, size_t len)
{
    static const char *const names[] = { "dq_take", "dq_dead", "dq_delete" };
    const char *sqls[] = { pg->take_sql, pg->dead_sql, pg->delete_sql };
    const int nparams[] = { 2, 2, 3 };
    for (int i = 0; i < 3; i++) {
        PGresult *r = PQprepare(pg->conn, names[i], sqls[i], nparams[i], NULL);
        int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (!ok) {
            conn_error(pg->conn, names[i] + 3, why, len);
            return -1;
        }
    }
    return 0;
}

int relay_pg_connect(struct relay_pg *pg, char *why, size_t len)
{
    relay_pg_disconnect(pg);
    pg->conn = open_conn(pg->sc);
    if (!pg->conn || PQstatus(pg->conn) != CONNECTION_OK) {
        conn_error(pg->conn, "connect", why, len);
        relay_pg_disconnect(pg);
        return -1;
    }
    PQsetNoticeProcessor(pg->conn, on_notice, (void *)pg->sc);
    char sql[128];
    snprintf(sql, sizeof sql, "LISTEN %s", pg->sc->table);
    if (command(pg->conn, sql, why, len) < 0 || prepare_all(pg, why, len) < 0) {
        relay_pg_disconnect(pg);
        return -1;
    }
    return 0;
}

int relay_pg_lead(struct relay_pg *pg, char *why, size_t len)
{
    char key[160];
    snprintf(key, sizeof key, "delayq relay %s.%s", pg->sc->schema, pg->sc->table);
    const char *params[] = { key };
    PGresult *r = PQexecParams(pg->conn, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
                               1, NULL, params, NULL, NULL, 0);
    int rc = -1;
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        rc = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    else
        conn_error(pg->conn, "pg_try_advisory_lock", why, len);
    PQclear(r);
    if (rc < 0)
        relay_pg_disconnect(pg);
    return rc;
}

static enum relay_op parse_op(const char *s)
{
    return strcmp(s, "cancel") == 0 ? RELAY_CANCEL
           : strcmp(s, "replace") == 0 ? RELAY_REPLACE : RELAY_ADD;
}

static int64_t field_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void batch_free(struct relay_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->rows[i].payload)
            PQfreemem(b->rows[i].payload);
    free(b->rows);
    PQclear(b->result);
    *b = (struct relay_batch){ 0 };
}

/* Fill b->rows from the result; -1 when out of memory. */
static int read_rows(PGresult *r, struct relay_batch *b)
{
    int n = PQntuples(r);
    b->result = r;
    b->rows = calloc(n ? (size_t)n : 1, sizeof *b->rows);
    if (!b->rows)
        return -1;
    for (int i = 0; i < n; i++) {
        struct relay_row *row = &b->rows[i];
        b->n++;
        row->id = field_i64(r, i, 0);
        row->op = parse_op(PQgetvalue(r, i, 1));
        row->queue = PQgetvalue(r, i, 2);
        row->job_id = PQgetvalue(r, i, 3);
        row->type = PQgetvalue(r, i, 4);
        row->payload = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, 5),
                                       &row->payload_len);
        if (!row->payload)
            return -1;
        row->at_ms = field_i64(r, i, 6);
        row->delay_ms = field_i64(r, i, 7);
        row->priority = (int)field_i64(r, i, 8);
        row->max_attempts = (int)field_i64(r, i, 9);
        row->expire_at_ms = field_i64(r, i, 10);
        row->ttl_ms = field_i64(r, i, 11);
    }
    return 0;
}

int relay_pg_take(struct relay_pg *pg, int max, const char *held, struct relay_batch *b,
                  char *why, size_t len)
{
    *b = (struct relay_batch){ 0 };
    if (command(pg->conn, "BEGIN", why, len) < 0) {
        relay_pg_disconnect(pg);
        return -1;
    }
    char limit[16];
    snprintf(limit, sizeof limit, "%d", max);
    const char *params[] = { limit, held };
    PGresult *r = PQexecPrepared(pg->conn, "dq_take", 2, params, NULL, NULL, 0);
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        conn_error(pg->conn, "take rows", why, len);
        PQclear(r);
        relay_pg_disconnect(pg);
        return -1;
    }
    if (read_rows(r, b) < 0) {
        snprintf(why, len, "out of memory for %d rows", PQntuples(r));
        relay_pg_abort(pg, b);
        return -1;
    }
    if (b->n == 0)
        relay_pg_abort(pg, b);
    return 0;
}

void relay_pg_abort(struct relay_pg *pg, struct relay_batch *b)
{
    char why[200];
    if (relay_pg_connected(pg) && command(pg->conn, "ROLLBACK", why, sizeof why) < 0)
        relay_pg_disconnect(pg);
    batch_free(b);
}

/* Append to buf (size cap, used *at) a text array element: quoted, with
 * backslashes and quotes escaped.  -1 when it does not fit. */
static int put_text(char *buf, size_t cap, size_t *at, const char *s)
{
    if (*at + 2 * strlen(s) + 4 > cap)
        return -1;
    buf[(*at)++] = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf[(*at)++] = '\\';
        buf[(*at)++] = *s;
    }
    buf[(*at)++] = '"';
    buf[*at] = '\0';
    return 0;
}

/* The ids of the batch's rows done with (applied and dead, or only the
 * dead ones) as an array literal, and with `reasons` the dead rows'
 * reasons as another; malloc'd. */
static char *id_array(const struct relay_batch *b, int dead_only, char **reasons)
{
    size_t cap = 24 * b->n + 4, rcap = (2 * RELAY_REASON_MAX + 4) * b->n + 4;
    char *ids = malloc(cap), *rs = reasons ? malloc(rcap) : NULL;
    if (!ids || (reasons && !rs)) {
        free(ids);
        free(rs);
        return NULL;
    }
    size_t at = 0, rat = 0;
    ids[at++] = '{';
    if (rs)
        rs[rat++] = '{';
    for (size_t i = 0; i < b->n; i++) {
        const struct relay_row *r = &b->rows[i];
        if (r->outcome == ROW_HELD || (dead_only && r->outcome != ROW_DEAD))
            continue;
        at += (size_t)snprintf(ids + at, cap - at, "%s%lld", at > 1 ? "," : "",
                               (long long)r->id);
        if (rs) {
            if (rat > 1)
                rs[rat++] = ',';
            put_text(rs, rcap, &rat, r->reason);
        }
    }
    ids[at++] = '}';
    ids[at] = '\0';
    if (rs) {
        rs[rat++] = '}';
        rs[rat] = '\0';
        *reasons = rs;
    }
    return ids;
}

/* Run one prepared statement of the finish; 0 or -1 (why). */
static int run(struct relay_pg *pg, const char *name, int n, const char *const *params,
               char *why, size_t len)
{
    PGresult *r = PQexecPrepared(pg->conn, name, n, params, NULL, NULL, 0);
    int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        conn_error(pg->conn, n == 2 ? "move dead rows" : "delete rows", why, len);
    PQclear(r);
    return ok ? 0 : -1;
}

int relay_pg_finish(struct relay_pg *pg, struct relay_batch *b, char *why, size_t len)
{
    int any_dead = 0;
    const struct relay_row *lo_row = NULL, *hi_row = NULL;   /* the rows done with */
    for (size_t i = 0; i < b->n; i++) {
        any_dead |= b->rows[i].outcome == ROW_DEAD;
        if (b->rows[i].outcome != ROW_HELD) {
            lo_row = lo_row ? lo_row : &b->rows[i];
            hi_row = &b->rows[i];
        }
    }
    char *reasons = NULL;
    char *dead_ids = any_dead ? id_array(b, 1, &reasons) : NULL;
    char *all_ids = id_array(b, 0, NULL);
    int rc = -1;
    if (!all_ids || (any_dead && !dead_ids)) {
        snprintf(why, len, "out of memory");
        goto done;
    }
    /* Row ids ascend through the batch (the take's order).  Held rows
     * stay (relay_defer.h). */
    char lo[24], hi[24];
    snprintf(lo, sizeof lo, "%lld", lo_row ? (long long)lo_row->id : 0LL);
    snprintf(hi, sizeof hi, "%lld", hi_row ? (long long)hi_row->id : 0LL);
    const char *dead_params[] = { dead_ids, reasons };
    const char *all_params[] = { all_ids, lo, hi };
    if ((any_dead && run(pg, "dq_dead", 2, dead_params, why, len) < 0)
        || (lo_row && run(pg, "dq_delete", 3, all_params, why, len) < 0)
        || command(pg->conn, "COMMIT", why, len) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0)
        relay_pg_disconnect(pg);    /* the transaction goes with it */
    free(dead_ids);
    free(reasons);
    free(all_ids);
    batch_free(b);
    return rc;
}

int relay_pg_wait(struct relay_pg *pg, int64_t ms, char *why, size_t len)
{
    int got = 0;
    PGnotify *n;
    if (!PQconsumeInput(pg->conn))
        goto lost;
    while ((n = PQnotifies(pg->conn))) {
        got = 1;
        PQfreemem(n);
    }
    if (got)
        return 1;
    struct pollfd p = { .fd = PQsocket(pg->conn), .events = POLLIN };
    int rc = poll(&p, 1, (int)ms);
    if (rc < 0 && errno != EINTR) {
        snprintf(why, len, "postgres: poll: %s", strerror(errno));
        relay_pg_disconnect(pg);
        return -1;
    }
    if (rc <= 0)
        return 0;
    if (!PQconsumeInput(pg->conn))
        goto lost;
    while ((n = PQnotifies(pg->conn))) {
        got = 1;
        PQfreemem(n);
    }
    return got;
lost:
    conn_error(pg->conn, "connection", why, len);
    relay_pg_disconnect(pg);
    return -1;
}

/* Whether `table` in `schema` has every column of `cols` (NULL-ended);
 * 0, or -1 with the first one missing named (or the query's failure). */
static int has_columns(PGconn *conn, const char *schema, const char *table,
                       const char *const *cols, char *why, size_t len)
{
    const char *params[] = { schema, table };
    PGresult *r = PQexecParams(conn, "SELECT column_name FROM information_schema.columns "
                               "WHERE table_schema = $1 AND table_name = $2",
                               2, NULL, params, NULL, NULL, 0);
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        conn_error(conn, "read the columns", why, len);
        PQclear(r);
        return -1;
    }
    int rc = 0;
    if (PQntuples(r) == 0) {
        snprintf(why, len, "table %s.%s does not exist, or this user cannot see it "
                 "(create it with: delayq outbox sql | psql)", schema, table);
        rc = -1;
    }
    for (size_t c = 0; rc == 0 && cols[c]; c++) {
        int found = 0;
        for (int i = 0; i < PQntuples(r) && !found; i++)
            found = strcmp(PQgetvalue(r, i, 0), cols[c]) == 0;
        if (!found) {
            snprintf(why, len, "table %s.%s has no column %s (see delayq outbox sql)",
                     schema, table, cols[c]);
            rc = -1;
        }
    }
    PQclear(r);
    return rc;
}

/* Whether the relay's role has each of `privs` (NULL-ended) on
 * `schema`.`table`; 0, or -1 naming the first grant it lacks.
 * (has_table_privilege with a list answers whether any is held.) */
static int has_privileges(PGconn *conn, const char *schema, const char *table,
                          const char *const *privs, char *why, size_t len)
{
    char qualified[2 * OUTBOX_NAME_MAX + 8];
    snprintf(qualified, sizeof qualified, "%s.%s", schema, table);
    int rc = 0;
    for (size_t i = 0; privs[i] && rc == 0; i++) {
        const char *params[] = { qualified, privs[i] };
        PGresult *r = PQexecParams(conn, "SELECT has_table_privilege($1, $2)", 2, NULL,
                                   params, NULL, NULL, 0);
        rc = -1;
        if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
            conn_error(conn, "read the privileges", why, len);
        else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0)
            snprintf(why, len, "the relay's role %s lacks %s on %s (GRANT %s ON %s TO %s)",
                     PQuser(conn), privs[i], qualified, privs[i], qualified, PQuser(conn));
        else
            rc = 0;
        PQclear(r);
    }
    return rc;
}

int relay_pg_check(const struct source_conf *sc, char *why, size_t len)
{
    PGconn *conn = open_conn(sc);
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        conn_error(conn, "connect", why, len);
        PQfinish(conn);
        /* A server that answered and refused (no such role or database,
         * a wrong password) is the configuration's fault. */
        return server_answers(sc) ? -1 : 1;
    }
    char dead[OUTBOX_NAME_MAX + 8];
    snprintf(dead, sizeof dead, "%s_dead", sc->table);
    int rc = has_columns(conn, sc->schema, sc->table, outbox_columns, why, len);
    if (rc == 0)
        rc = has_columns(conn, sc->schema, dead, outbox_columns, why, len);
    if (rc == 0)
        rc = has_columns(conn, sc->schema, dead, outbox_dead_columns, why, len);
    static const char *const on_table[] = { "SELECT", "UPDATE", "DELETE", NULL };
    static const char *const on_dead[] = { "INSERT", NULL };
    if (rc == 0)
        rc = has_privileges(conn, sc->schema, sc->table, on_table, why, len);
    if (rc == 0)
        rc = has_privileges(conn, sc->schema, dead, on_dead, why, len);
    PQfinish(conn);
    return rc;
}
