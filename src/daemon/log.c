#include "daemon/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The log's settings: written at start-up and after fork, read by every
 * log call of this process. */
static struct {
    enum log_target target;
    int level;
    int journal;        /* stderr is read by the journal: "<N>" prefixes */
    char role[16];
} log_state = { LOG_TO_STDERR, DQ_LOG_INFO, 0, "sup" };

static const char *const level_names[] = { "debug", "info", "warn", "err" };

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return DQ_LOG_WARN;
    if (strcmp(s, "error") == 0)
        return DQ_LOG_ERR;
    return -1;
}

void log_setup(enum log_target target, int level)
{
    log_state.target = target;
    log_state.level = level;
    /* systemd sets JOURNAL_STREAM when stderr goes to the journal, which
     * stamps lines itself and reads priorities from "<N>" prefixes. */
    log_state.journal = getenv("JOURNAL_STREAM") != NULL;
    if (target == LOG_TO_SYSLOG)
        openlog("delayqd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_set_role(const char *role)
{
    snprintf(log_state.role, sizeof log_state.role, "%s", role);
}

void log_set_level(int level)
{
    log_state.level = level;
}

int log_enabled(int level)
{
    return level >= log_state.level;
}

static int syslog_priority(int level)
{
    static const int prio[] = { LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR };
    return prio[level < 0 ? 0 : (level > 3 ? 3 : level)];
}

void log_vmsg(int level, const char *fmt, va_list ap)
{
    if (!log_enabled(level))
        return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* One line per event: a newline inside a message would forge another. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (log_state.target == LOG_TO_SYSLOG) {
        syslog(syslog_priority(level), "[%s] %s", log_state.role, msg);
        return;
    }
    if (log_state.journal) {
        fprintf(stderr, "<%d>[%s %d] %s\n", syslog_priority(level), log_state.role,
                (int)getpid(), msg);
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "%s.%03d %-5s [%s %d] %s\n", stamp, (int)(tv.tv_usec / 1000),
            level_names[level < 0 ? 0 : (level > 3 ? 3 : level)], log_state.role,
            (int)getpid(), msg);
}

void log_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}
