/*
 * The `schedules` list of delayqd.conf: recurring schedules declared in
 * the file, each for one of the file's queues.  The reaper stores them in
 * Redis at start and after each reload or reconnect (reaper_sched.c); one
 * whose definition is unchanged keeps its next tick there.
 */
#ifndef DQ_DCONFIG_SCHED_H
#define DQ_DCONFIG_SCHED_H

#include <delayq/client.h>
#include <libconfig.h>
#include <stddef.h>

#include "config/conf_reader.h"
#include "daemon/dconfig_types.h"

/* The strings point into the daemon_conf's cfg. */
struct sched_conf {
    const char *queue;
    const char *name;
    const char *expr;
    const char *tz;             /* "" for UTC */
    const char *type;
    const char *payload;        /* "" by default */
    int max_attempts;           /* 0: the consumer's default */
    dq_catch_up catch_up;
    int line;
};

/* Entry `i` of the list (a read_list callback): checked (name, queue
 * name, type, expression, zone, catch_up) with conf_fail at its line. */
void dconfig_read_schedule(struct conf_reader *r, const config_setting_t *s, size_t i,
                           void *out);

/* Each schedule names a queue of the file, and each (queue, name) once. */
void dconfig_check_schedules(struct conf_reader *r, const struct daemon_conf *dc);

#endif
