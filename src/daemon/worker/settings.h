/*
 * The host side of the handler ABI's settings and services: dq_settings over
 * a libconfig group (a handler entry's `settings = { ... }`), and the dq_host
 * function table handed to a handler's init.
 *
 * A handler reads its settings only through the accessors in dq_host, so it
 * need not link libconfig.  The accessors never fail loudly: a value of the
 * wrong type yields the caller's default, and the first such problem is
 * recorded as "FILE:LINE: handlers.[N].settings.NAME: expected ..." for
 * host->setting_error.
 */
#ifndef DQ_SETTINGS_H
#define DQ_SETTINGS_H

#include <delayq/handler.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Settings over `group` (a group setting, or NULL for no settings at all).
 * The group is borrowed: it, and every string the accessors return, stays
 * valid while its config_t lives, so the caller keeps the config_t until
 * the handler's fini has returned.  Returns NULL only when out of memory.
 * Free with settings_free.
 */
dq_settings *settings_new(const config_setting_t *group);

void settings_free(dq_settings *s);

/* The first problem met by an accessor, or NULL: the same as
 * host->setting_error, for the host's own use. */
const char *settings_error(const dq_settings *s);

/* Forget a recorded problem (before running init again, in a config check). */
void settings_clear_error(dq_settings *s);

/*
 * After init: the first member of the group that no accessor has asked for
 * (most likely a misspelt setting), as "FILE:LINE: PATH", in buf.  Returns
 * 1 if there is one, else 0.  Only a hint: a handler may read a setting
 * later than init.
 */
int settings_unread(const dq_settings *s, char *buf, size_t len);

/* The host's log service, as dq_host declares it. */
typedef void (*settings_log_fn)(enum dq_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * A dq_host table for one handler type: the settings accessors above, the
 * log service `log` (NULL: lines are dropped), the type's timeout
 * `timeout_ms` (0: none), and a `cancelled` service that never says yes
 * (a worker sets its own: handlers.h).  The handler keeps a pointer to the
 * table until its fini, so the caller stores the returned value somewhere
 * that lives as long (one per type, since the timeout differs).
 */
dq_host settings_host(settings_log_fn log, int64_t timeout_ms);

#endif
