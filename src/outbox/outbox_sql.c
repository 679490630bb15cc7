/*
 * The outbox's DDL, written from one template (below) with the schema and
 * the table put in.  Both are checked identifiers (outbox_check_name), so
 * nothing is quoted and nothing a user types can change the SQL's shape.
 */
#include "outbox/outbox_sql.h"

#include <stdlib.h>
#include <string.h>

const char *const outbox_columns[] = {
    "id", "op", "queue", "job_id", "type", "payload", "run_at", "delay",
    "priority", "max_attempts", "expire_at", "ttl", "created_at", NULL
};
const char *const outbox_dead_columns[] = { "reason", "dead_at", NULL };

/* @S@ is the schema, @T@ the table. */
static const char template_sql[] =
"-- The delayq outbox (docs/outbox.md), written by `delayq outbox sql`.\n"
"--\n"
"-- A service adds and cancels its jobs here, inside its own transactions,\n"
"-- with the functions below: a rolled-back transaction leaves no job, a\n"
"-- committed one is relayed to Redis by delayqd (its `sources` setting),\n"
"-- each row once, in commit order.  Rows the relay cannot apply go to\n"
"-- @T@_dead with the reason.  Running this again changes nothing\n"
"-- but the functions, which it replaces.\n"
"BEGIN;\n"
"SET LOCAL client_min_messages = warning;  -- no 'already exists, skipping'\n"
"\n"
"CREATE SCHEMA IF NOT EXISTS @S@;\n"
"\n"
"CREATE TABLE IF NOT EXISTS @S@.@T@ (\n"
"    id           bigserial PRIMARY KEY,\n"
"    op           text NOT NULL DEFAULT 'add'\n"
"                 CHECK (op IN ('add', 'cancel', 'replace')),\n"
"    queue        text NOT NULL,\n"
"    job_id       text,           -- NULL (add only): the relay names it SOURCE:ID\n"
"    type         text,           -- the handler's job type (add, replace)\n"
"    payload      bytea NOT NULL DEFAULT ''::bytea,\n"
"    run_at       timestamptz,    -- due then; or ...\n"
"    delay        interval CHECK (delay >= interval '0'), -- ... this long after\n"
"                                 -- created_at (NULL: at once)\n"
"    priority     smallint CHECK (priority BETWEEN 0 AND 9), -- NULL: normal (5)\n"
"    max_attempts integer CHECK (max_attempts >= 1),         -- NULL: the handler's\n"
"    expire_at    timestamptz,    -- not run if not started by then; or ...\n"
"    ttl          interval CHECK (ttl > interval '0'), -- ... this long after\n"
"                                 -- its due time\n"
"    created_at   timestamptz NOT NULL DEFAULT now(),\n"
"    CHECK (op = 'add' OR job_id IS NOT NULL),\n"
"    CHECK (op = 'cancel' OR type IS NOT NULL)\n"
");\n"
"\n"
"CREATE TABLE IF NOT EXISTS @S@.@T@_dead (\n"
"    id           bigint PRIMARY KEY,\n"
"    op           text NOT NULL,\n"
"    queue        text NOT NULL,\n"
"    job_id       text,\n"
"    type         text,\n"
"    payload      bytea NOT NULL,\n"
"    run_at       timestamptz,\n"
"    delay        interval,\n"
"    priority     smallint,\n"
"    max_attempts integer,\n"
"    expire_at    timestamptz,\n"
"    ttl          interval,\n"
"    created_at   timestamptz NOT NULL,\n"
"    reason       text NOT NULL,  -- why the relay could not apply it\n"
"    dead_at      timestamptz NOT NULL DEFAULT now()\n"
");\n"
"\n"
"-- A commit that added rows wakes the relay (it also looks every few\n"
"-- seconds, in case a notification is lost).\n"
"CREATE OR REPLACE FUNCTION @S@.@T@_notify() RETURNS trigger\n"
"LANGUAGE plpgsql AS $$\n"
"BEGIN\n"
"    PERFORM pg_notify('@T@', '');\n"
"    RETURN NULL;\n"
"END $$;\n"
"DROP TRIGGER IF EXISTS @T@_notify ON @S@.@T@;\n"
"CREATE TRIGGER @T@_notify AFTER INSERT ON @S@.@T@\n"
"    FOR EACH STATEMENT EXECUTE FUNCTION @S@.@T@_notify();\n"
"\n"
"-- The rows of one job are numbered in commit order: a writer holds this\n"
"-- lock from before it takes a row id until its transaction ends, so a\n"
"-- second writer of the same job waits for the first to commit.\n"
"CREATE OR REPLACE FUNCTION @S@.@T@_lock(queue text, job_id text) RETURNS void\n"
"LANGUAGE sql AS $$\n"
"    SELECT pg_advisory_xact_lock(hashtextextended('@S@.@T@:' || $1 || ':' || $2, 0))\n"
"$$;\n"
"\n"
"-- One row; its id.  Checks what the table's constraints do not name.\n"
"CREATE OR REPLACE FUNCTION @S@.@T@_put(op text, queue text, job_id text,\n"
"    type text, payload bytea, run_at timestamptz, delay interval,\n"
"    priority integer, max_attempts integer, ttl interval) RETURNS bigint\n"
"LANGUAGE plpgsql AS $$\n"
"#variable_conflict use_variable\n"
"BEGIN\n"
"    IF queue IS NULL OR queue = '' THEN\n"
"        RAISE EXCEPTION 'delayq: % needs a queue', op;\n"
"    END IF;\n"
"    IF op <> 'add' AND (job_id IS NULL OR job_id = '') THEN\n"
"        RAISE EXCEPTION 'delayq: % needs the job''s id', op;\n"
"    END IF;\n"
"    IF op <> 'cancel' AND (type IS NULL OR type = '') THEN\n"
"        RAISE EXCEPTION 'delayq: % needs a job type', op;\n"
"    END IF;\n"
"    IF delay < interval '0' THEN\n"
"        RAISE EXCEPTION 'delayq: delay % is negative', delay;\n"
"    END IF;\n"
"    IF job_id IS NOT NULL THEN\n"
"        PERFORM @S@.@T@_lock(queue, job_id);\n"
"    END IF;\n"
"    INSERT INTO @S@.@T@ (op, queue, job_id, type, payload, run_at, delay,\n"
"                          priority, max_attempts, ttl)\n"
"    VALUES (op, queue, job_id, type, coalesce(payload, ''::bytea), run_at, delay,\n"
"            priority, max_attempts, ttl);\n"
"    -- Not RETURNING: that would need SELECT on the table too.\n"
"    RETURN currval('@S@.@T@_id_seq');\n"
"END $$;\n"
"\n"
"-- Add a job, due `delay` after this transaction began (or at `run_at`).\n"
"-- An id that a waiting or recently finished job has is left alone.\n"
"CREATE OR REPLACE FUNCTION @S@.delayq_enqueue(queue text, type text,\n"
"    payload bytea, delay interval DEFAULT interval '0', job_id text DEFAULT NULL,\n"
"    priority integer DEFAULT NULL, max_attempts integer DEFAULT NULL,\n"
"    ttl interval DEFAULT NULL) RETURNS bigint\n"
"LANGUAGE sql AS $$\n"
"    SELECT @S@.@T@_put('add', $1, $5, $2, $3, NULL, $4, $6, $7, $8)\n"
"$$;\n"
"CREATE OR REPLACE FUNCTION @S@.delayq_enqueue(queue text, type text,\n"
"    payload bytea, run_at timestamptz, job_id text DEFAULT NULL,\n"
"    priority integer DEFAULT NULL, max_attempts integer DEFAULT NULL,\n"
"    ttl interval DEFAULT NULL) RETURNS bigint\n"
"LANGUAGE sql AS $$\n"
"    SELECT @S@.@T@_put('add', $1, $5, $2, $3, $4, NULL, $6, $7, $8)\n"
"$$;\n"
"\n"
"-- Reschedule the waiting job `job_id` (this payload, type and time), or\n"
"-- add it when there is none.\n"
"CREATE OR REPLACE FUNCTION @S@.delayq_replace(queue text, type text,\n"
"    payload bytea, delay interval, job_id text,\n"
"    priority integer DEFAULT NULL, max_attempts integer DEFAULT NULL,\n"
"    ttl interval DEFAULT NULL) RETURNS bigint\n"
"LANGUAGE sql AS $$\n"
"    SELECT @S@.@T@_put('replace', $1, $5, $2, $3, NULL, $4, $6, $7, $8)\n"
"$$;\n"
"CREATE OR REPLACE FUNCTION @S@.delayq_replace(queue text, type text,\n"
"    payload bytea, run_at timestamptz, job_id text,\n"
"    priority integer DEFAULT NULL, max_attempts integer DEFAULT NULL,\n"
"    ttl interval DEFAULT NULL) RETURNS bigint\n"
"LANGUAGE sql AS $$\n"
"    SELECT @S@.@T@_put('replace', $1, $5, $2, $3, $4, NULL, $6, $7, $8)\n"
"$$;\n"
"\n"
"-- Cancel the job `job_id`, waiting or running (delayq cancel).\n"
"CREATE OR REPLACE FUNCTION @S@.delayq_cancel(queue text, job_id text) RETURNS bigint\n"
"LANGUAGE sql AS $$\n"
"    SELECT @S@.@T@_put('cancel', $1, $2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)\n"
"$$;\n"
"\n"
"COMMIT;\n";

const char *outbox_check_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "is empty";
    if (n > OUTBOX_NAME_MAX)
        return "is longer than 55 bytes";
    if (name[0] >= '0' && name[0] <= '9')
        return "starts with a digit";
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return "may hold only a-z, 0-9 and _";
    }
    return NULL;
}

int outbox_split_table(const char *qualified, char *schema, char *table, size_t len,
                       char *why, size_t whylen)
{
    const char *dot = strchr(qualified, '.');
    const char *t = dot ? dot + 1 : qualified;
    size_t slen = dot ? (size_t)(dot - qualified) : strlen(OUTBOX_DEFAULT_SCHEMA);
    if (slen >= len || strlen(t) >= len) {
        snprintf(why, whylen, "\"%s\" is too long", qualified);
        return -1;
    }
    memcpy(schema, dot ? qualified : OUTBOX_DEFAULT_SCHEMA, slen);
    schema[slen] = '\0';
    snprintf(table, len, "%s", t);
    const char *bad = outbox_check_name(schema);
    if (bad) {
        snprintf(why, whylen, "schema \"%s\" %s", schema, bad);
        return -1;
    }
    if ((bad = outbox_check_name(table))) {
        snprintf(why, whylen, "table \"%s\" %s", table, bad);
        return -1;
    }
    return 0;
}

int outbox_sql_write(FILE *out, const char *schema, const char *table)
{
    for (const char *p = template_sql; *p;) {
        if (p[0] == '@' && (p[1] == 'S' || p[1] == 'T') && p[2] == '@') {
            fputs(p[1] == 'S' ? schema : table, out);
            p += 3;
        } else {
            const char *at = strchr(p + 1, '@');
            size_t n = at ? (size_t)(at - p) : strlen(p);
            fwrite(p, 1, n, out);
            p += n;
        }
    }
    return ferror(out) ? -1 : 0;
}

char *outbox_sql_string(const char *schema, const char *table)
{
    char *sql = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&sql, &len);
    if (!f)
        return NULL;
    int rc = outbox_sql_write(f, schema, table);
    if (fclose(f) != 0 || rc < 0) {
        free(sql);
        return NULL;
    }
    return sql;
}
