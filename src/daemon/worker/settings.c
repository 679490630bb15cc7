#include "daemon/worker/settings.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/conf_reader.h"
#include "util/timefmt.h"

struct dq_settings {
    const config_setting_t *group; /* borrowed; NULL: no settings */
    struct conf_reader reader;     /* keeps the first problem in error */
    char error[512];               /* the first problem, "" if none */
    char prefix[256];              /* "handlers.[0].settings.": names members */
    unsigned char *asked;          /* per member of group: 1 once looked up */
    size_t nmembers;
};

static void setting_path(const config_setting_t *st, char *buf, size_t len);

dq_settings *settings_new(const config_setting_t *group)
{
    dq_settings *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (group && config_setting_is_group(group) && config_setting_length(group) > 0) {
        s->nmembers = (size_t)config_setting_length(group);
        s->asked = calloc(s->nmembers, 1);
        if (!s->asked) {
            free(s);
            return NULL;
        }
    }
    s->group = group;
    conf_reader_init(&s->reader, NULL, s->error, sizeof s->error);
    if (group) {
        setting_path(group, s->prefix, sizeof s->prefix - 1);
        strcat(s->prefix, ".");
    }
    return s;
}

void settings_free(dq_settings *s)
{
    if (s)
        free(s->asked);
    free(s);
}

const char *settings_error(const dq_settings *s)
{
    return s && s->error[0] ? s->error : NULL;
}

void settings_clear_error(dq_settings *s)
{
    conf_reader_init(&s->reader, NULL, s->error, sizeof s->error);
}

/* Where `st` is in the file, as a libconfig path: "handlers.[0].settings.argv".
 * Elements of lists and arrays have no name and show as "[N]". */
static void setting_path(const config_setting_t *st, char *buf, size_t len)
{
    const config_setting_t *chain[32];
    size_t n = 0;
    for (const config_setting_t *p = st; p && !config_setting_is_root(p) && n < 32;
         p = config_setting_parent(p))
        chain[n++] = p;
    size_t used = 0;
    buf[0] = '\0';
    while (n-- > 0 && used < len) {
        const char *name = config_setting_name(chain[n]);
        const char *dot = used ? "." : "";
        int w = name ? snprintf(buf + used, len - used, "%s%s", dot, name)
                     : snprintf(buf + used, len - used, "%s[%d]", dot,
                                config_setting_index(chain[n]));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/*
 * The reader that keeps the first problem.  The accessors take a const
 * dq_settings (a handler cannot change its settings); the reader is the
 * host's bookkeeping, in an object settings_new allocated, so writing
 * through the cast is sound.
 */
static struct conf_reader *reader(const dq_settings *s)
{
    return &((dq_settings *)s)->reader;
}

/* Record "FILE:LINE: PATH: WHAT" for `st` (PATH its place in the file, so
 * that elements of lists and groups are named too), unless a problem is
 * recorded already. */
static void record(const dq_settings *s, const config_setting_t *st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void record(const dq_settings *s, const config_setting_t *st, const char *fmt, ...)
{
    char path[256], what[300];
    setting_path(st, path, sizeof path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    conf_fail(reader(s), st, "%s: %s", path, what);
}

/* The member `name` of the settings group, or NULL when absent.  Notes
 * that it was asked for (bookkeeping, as in record). */
static const config_setting_t *member(const dq_settings *s, const char *name)
{
    if (!s || !s->group || !name || !config_setting_is_group(s->group))
        return NULL;
    const config_setting_t *st = config_setting_get_member(s->group, name);
    int i = st ? config_setting_index(st) : -1;
    if (i >= 0 && (size_t)i < s->nmembers)
        ((dq_settings *)s)->asked[i] = 1;
    return st;
}

int settings_unread(const dq_settings *s, char *buf, size_t len)
{
    for (size_t i = 0; s && i < s->nmembers; i++) {
        if (s->asked[i])
            continue;
        const config_setting_t *st = config_setting_get_elem(s->group, (unsigned)i);
        if (!st)
            continue;
        char name[300];
        conf_name(st, s->prefix, name, sizeof name);
        struct conf_reader where;
        conf_reader_init(&where, NULL, buf, len);
        conf_fail(&where, st, "%s", name);
        return 1;
    }
    return 0;
}

static const char *get_string(const dq_settings *s, const char *name, const char *def)
{
    const config_setting_t *st = member(s, name);
    const char *v = def;
    if (st)
        conf_string(reader(s), st, s->prefix, &v);
    return v;
}

static int64_t get_int(const dq_settings *s, const char *name, int64_t def)
{
    const config_setting_t *st = member(s, name);
    long long v = def;
    if (st)
        conf_int(reader(s), st, s->prefix, LLONG_MIN, LLONG_MAX, &v);
    return v;
}

static int get_bool(const dq_settings *s, const char *name, int def)
{
    const config_setting_t *st = member(s, name);
    int v = def;
    if (st)
        conf_bool(reader(s), st, s->prefix, &v);
    return v;
}

#define DURATION_EXPECTED "expected a duration such as \"30s\""

/* A duration string ("500ms", "30s", "1h30m"); a bare integer counts as
 * seconds, as a bare number does in a duration string. */
static int64_t get_duration_ms(const dq_settings *s, const char *name, int64_t def)
{
    const config_setting_t *st = member(s, name);
    if (!st)
        return def;
    int t = config_setting_type(st);
    if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
        long long sec = config_setting_get_int64(st);
        if (sec < 0 || sec > INT64_MAX / 1000) {
            record(s, st, DURATION_EXPECTED);
            return def;
        }
        return (int64_t)sec * 1000;
    }
    if (t != CONFIG_TYPE_STRING) {
        record(s, st, DURATION_EXPECTED);
        return def;
    }
    int64_t ms;
    const char *why = NULL;
    if (timefmt_parse_duration(config_setting_get_string(st), &ms, &why) < 0) {
        record(s, st, "%s%s%s", DURATION_EXPECTED, why ? ": " : "", why ? why : "");
        return def;
    }
    return ms;
}

/* The list or array `name` (with `group`, the group `name`), or NULL
 * (absent, or recorded as the wrong type). */
static const config_setting_t *get_list(const dq_settings *s, const char *name, int group)
{
    const config_setting_t *st = member(s, name);
    if (!st)
        return NULL;
    if (group ? !config_setting_is_group(st)
              : !config_setting_is_list(st) && !config_setting_is_array(st)) {
        record(s, st, group ? "expected a group of strings, such as { KEY = \"value\"; }"
                            : "expected a list of strings, such as [\"a\", \"b\"]");
        return NULL;
    }
    return st;
}

static size_t list_len(const dq_settings *s, const char *name, int group)
{
    const config_setting_t *st = get_list(s, name, group);
    int n = st ? config_setting_length(st) : 0;
    return n > 0 ? (size_t)n : 0;
}

/* Element i of that list or group, or NULL past its end. */
static const config_setting_t *list_elem(const dq_settings *s, const char *name, size_t i,
                                         int group)
{
    const config_setting_t *st = get_list(s, name, group);
    if (!st || i >= (size_t)config_setting_length(st))
        return NULL;
    return config_setting_get_elem(st, (unsigned)i);
}

/* The string in `el`, or NULL, recorded as the wrong type. */
static const char *elem_string(const dq_settings *s, const config_setting_t *el)
{
    if (config_setting_type(el) != CONFIG_TYPE_STRING) {
        record(s, el, "expected a string");
        return NULL;
    }
    return config_setting_get_string(el);
}

static size_t get_list_len(const dq_settings *s, const char *name)
{
    return list_len(s, name, 0);
}

static const char *get_list_item(const dq_settings *s, const char *name, size_t i)
{
    const config_setting_t *el = list_elem(s, name, i, 0);
    return el ? elem_string(s, el) : NULL;
}

static size_t get_group_len(const dq_settings *s, const char *name)
{
    return list_len(s, name, 1);
}

static const char *get_group_item(const dq_settings *s, const char *name, size_t i,
                                  const char **value)
{
    const config_setting_t *el = list_elem(s, name, i, 1);
    *value = el ? elem_string(s, el) : NULL;
    return el ? config_setting_name(el) : NULL;
}

/* A handler's verdict on a value it read: recorded like a wrong type, at
 * the element when there is one, else at the setting, else (absent) at the
 * settings group with the name in the message. */
static void reject(const dq_settings *s, const char *name, size_t i, const char *why)
{
    const config_setting_t *st = member(s, name);
    if (st && i != DQ_SETTING_WHOLE && config_setting_is_aggregate(st)
        && i < (size_t)config_setting_length(st))
        st = config_setting_get_elem(st, (unsigned)i);
    if (st)
        record(s, st, "%s", why);
    else if (s && s->group)
        record(s, s->group, "%s: %s", name, why);
}

/* For a host without a log: handlers may call host->log unconditionally. */
static void no_log(enum dq_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void no_log(enum dq_log_level level, const char *fmt, ...)
{
    (void)level;
    (void)fmt;
}

/* The cancel service of a host that runs no worker (a configuration
 * check, a test): no job is ever cancelled.  A worker sets its own. */
static int never_cancelled(const dq_handler_job *job)
{
    (void)job;
    return 0;
}

dq_host settings_host(settings_log_fn log, int64_t timeout_ms)
{
    dq_host h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.abi_version = DQ_HANDLER_ABI_VERSION;
    h.setting_string = get_string;
    h.setting_int = get_int;
    h.setting_bool = get_bool;
    h.setting_duration_ms = get_duration_ms;
    h.setting_list_len = get_list_len;
    h.setting_list_item = get_list_item;
    h.setting_error = settings_error;
    h.log = log ? log : no_log;
    h.timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    h.setting_group_len = get_group_len;
    h.setting_group_item = get_group_item;
    h.setting_reject = reject;
    h.job_size = sizeof(dq_handler_job);
    h.cancelled = never_cancelled;
    return h;
}
