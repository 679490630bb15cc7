/*
 * The daemon's log: one line per event, tagged with the process's role
 * ("sup", "w3", "reap") and pid.  To stderr (with a "<N>" priority prefix
 * and no timestamp when the journal reads it) or to syslog.
 */
#ifndef DQ_LOG_H
#define DQ_LOG_H

#include <delayq/handler.h>
#include <stdarg.h>

enum log_target { LOG_TO_STDERR, LOG_TO_SYSLOG };

/* Parse "debug"/"info"/"warn"/"err"; -1 when unknown. */
int log_level_parse(const char *s);

void log_setup(enum log_target target, int level);
/* Name this process in every later line (after fork). */
void log_set_role(const char *role);
int log_enabled(int level);
/* Change the level (a reload). */
void log_set_level(int level);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) log_msg(DQ_LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(DQ_LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(DQ_LOG_WARN, __VA_ARGS__)
#define log_err(...) log_msg(DQ_LOG_ERR, __VA_ARGS__)

/* The same, with a va_list: the host log service handed to handlers. */
void log_vmsg(int level, const char *fmt, va_list ap);

#endif
