/*
 * The PostgreSQL side of the outbox (docs/outbox.md): the DDL that
 * `delayq outbox sql` prints and that is installed as
 * /usr/share/delayq/outbox.sql, and the names and columns the relay
 * (src/daemon/relay) reads and `delayqd -t` checks.  One home for the
 * table's shape, so the SQL a service runs and the queries the relay
 * sends cannot drift apart.  No libpq here: the CLI prints the DDL on a
 * build without it.
 */
#ifndef DQ_OUTBOX_SQL_H
#define DQ_OUTBOX_SQL_H

#include <stddef.h>
#include <stdio.h>

#define OUTBOX_DEFAULT_SCHEMA "public"
#define OUTBOX_DEFAULT_TABLE "delayq_outbox"
/* A name's bytes: PostgreSQL's 63, less "_dead" and "_notify". */
#define OUTBOX_NAME_MAX 55

/* The columns of the outbox table, in order, and the two more its dead
 * table has (reason, dead_at). */
extern const char *const outbox_columns[];
extern const char *const outbox_dead_columns[];

/* NULL when `name` can name the schema or the table (a lower-case SQL
 * identifier: a-z, 0-9 and _, not starting with a digit, 1 to
 * OUTBOX_NAME_MAX bytes, so that it needs no quoting anywhere); otherwise
 * what is wrong with it. */
const char *outbox_check_name(const char *name);

/* Split "schema.table" or "table" (schema OUTBOX_DEFAULT_SCHEMA) into its
 * parts, each checked by outbox_check_name; 0, or -1 with the reason in
 * `why`. */
int outbox_split_table(const char *qualified, char *schema, char *table, size_t len,
                       char *why, size_t whylen);

/* Write the DDL for `schema`.`table` (both checked already); 0, or -1
 * when the write failed (errno set). */
int outbox_sql_write(FILE *out, const char *schema, const char *table);

/* The same DDL as one string (for the tests and the bench, which run it
 * on their own servers); free it.  NULL when out of memory. */
char *outbox_sql_string(const char *schema, const char *table);

#endif
