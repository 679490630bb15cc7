/*
 * The `sources` list of delayqd.conf: where jobs come from besides the
 * producers' own calls.  One kind today, a PostgreSQL outbox table
 * (docs/outbox.md), relayed to Redis by a child process of its own per
 * source (src/daemon/relay).
 */
#ifndef DQ_DCONFIG_SOURCES_H
#define DQ_DCONFIG_SOURCES_H

#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

#include "config/conf_reader.h"
#include "daemon/dconfig_types.h"
#include "outbox/outbox_sql.h"

#define SOURCE_NAME_MAX 63          /* bytes of a source's name */
#define SOURCE_BATCH_MAX 5000

struct source_conf {
    const char *name;           /* name = "..."; default: the table's name.
                                   Labels /metrics, names the jobs added
                                   without an id (NAME:ROW_ID) */
    const char *conninfo;       /* libpq's connection string or URI */
    char *password;             /* password_file's content; NULL: none */
    char schema[OUTBOX_NAME_MAX + 1];   /* table = "[schema.]table" */
    char table[OUTBOX_NAME_MAX + 1];
    int batch;                  /* rows a transaction takes; default 500 */
    int64_t poll_ms;            /* poll_interval: a look without a
                                   notification this often; default 2 s */
    int64_t grace_ms;           /* failure_grace: /healthz turns 503 once
                                   the source has failed this long; 30 s */
    int64_t replay_window_ms;   /* replay_window: an add whose job finished
                                   within this is taken as applied; 1 day */
    int line;
};

/* Entry `i` of the list (a read_list callback), checked with conf_fail at
 * its line; the password file is read here. */
void dconfig_read_source(struct conf_reader *r, const config_setting_t *s, size_t i,
                         void *out);

/* Names are unique; a build without libpq refuses any source. */
void dconfig_check_sources(struct conf_reader *r, const struct daemon_conf *dc);

/* Free what dconfig_read_source allocated (the passwords). */
void dconfig_free_sources(struct source_conf *sources, size_t n);

#endif
