/*
 * Reading libconfig settings, with one kind of message (see conf_reader.h).
 */
#include "config/conf_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/timefmt.h"

void conf_reader_init(struct conf_reader *r, const char *path, char *err, size_t errlen)
{
    r->path = path;
    r->err = err;
    r->errlen = errlen;
    r->failed = 0;
    if (errlen)
        err[0] = '\0';
}

/* Messages quote the user's strings ('%s'), and a libconfig string may hold
 * any byte ("\n" is an escape): make the message the one line promised, a
 * '?' for each control character. */
static void make_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int conf_fail(struct conf_reader *r, const config_setting_t *s, const char *fmt, ...)
{
    if (r->failed)
        return -1;
    r->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *file = s ? config_setting_source_file(s) : NULL;
    if (!file)
        file = r->path ? r->path : "(config)";
    unsigned line = s ? config_setting_source_line(s) : 0;
    if (line > 0)
        snprintf(r->err, r->errlen, "%s:%u: %s", file, line, msg);
    else
        snprintf(r->err, r->errlen, "%s: %s", file, msg);
    make_one_line(r->err);
    return -1;
}

/* Can the file be read at all?  libconfig only says "file I/O error". */
static int check_readable(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(EISDIR));
        return -1;
    }
    if (S_ISREG(st.st_mode) && st.st_size == 0) {
        snprintf(err, errlen, "%s: the file is empty", path);
        return -1;
    }
    return 0;
}

int conf_read_file(config_t *cfg, const char *path, char *err, size_t errlen)
{
    if (check_readable(path, err, errlen) < 0)
        return -1;
    if (config_read_file(cfg, path))
        return 0;
    const char *file = config_error_file(cfg);
    if (config_error_type(cfg) == CONFIG_ERR_FILE_IO)
        snprintf(err, errlen, "cannot read %s", file ? file : path);
    else
        snprintf(err, errlen, "%s:%d: %s", file ? file : path, config_error_line(cfg),
                 config_error_text(cfg));
    return -1;
}

void conf_name(const config_setting_t *s, const char *prefix, char *buf, size_t len)
{
    const char *name = config_setting_name(s);
    if (name)
        snprintf(buf, len, "%s%s", prefix, name);
    else
        snprintf(buf, len, "%s[%d]", prefix, config_setting_index(s));
}

/* A `group` that is not one is refused too: a list's elements have no
 * names (strcmp on NULL crashed `log = ( 1 );`), and a scalar would pass
 * with every setting left out. */
int conf_check_keys(struct conf_reader *r, const config_setting_t *group,
                    const char *prefix, const char *const *known)
{
    size_t plen = strlen(prefix);
    if (!config_setting_is_group(group))    /* the prefix without its last '.' */
        return conf_fail(r, group, "%.*s: expected a group { ... }",
                         (int)(plen ? plen - 1 : 0), prefix);
    int n = config_setting_length(group);
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        int ok = 0;
        for (const char *const *k = known; *k; k++)
            ok |= strcmp(*k, name) == 0;
        if (!ok)
            return conf_fail(r, s, "unknown setting '%s%s'", prefix, name);
    }
    return 0;
}

/* "NAME: message" for setting `s`, named by conf_name; returns -1. */
__attribute__((format(printf, 4, 5)))
static int bad_value(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                     const char *fmt, ...)
{
    char name[256], msg[400];
    conf_name(s, prefix, name, sizeof name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return conf_fail(r, s, "%s: %s", name, msg);
}

static int wrong_type(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                      const char *what)
{
    return bad_value(r, s, prefix, "expected %s", what);
}

int conf_string(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                const char **out)
{
    if (!s)
        return 0;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return wrong_type(r, s, prefix, "a string");
    *out = config_setting_get_string(s);
    return 0;
}

int conf_int(struct conf_reader *r, const config_setting_t *s, const char *prefix,
             long long min, long long max, long long *out)
{
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
        return wrong_type(r, s, prefix, "an integer");
    long long v = config_setting_get_int64(s);
    if (v < min || v > max)
        return bad_value(r, s, prefix, "%lld is out of range (%lld to %lld)", v, min, max);
    *out = v;
    return 0;
}

int conf_bool(struct conf_reader *r, const config_setting_t *s, const char *prefix,
              int *out)
{
    if (!s)
        return 0;
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return wrong_type(r, s, prefix, "true or false");
    *out = config_setting_get_bool(s) ? 1 : 0;
    return 0;
}

int conf_float(struct conf_reader *r, const config_setting_t *s, const char *prefix,
               double min, double max, double *out)
{
    if (!s)
        return 0;
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
        return wrong_type(r, s, prefix, "a number");
    double v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                      : (double)config_setting_get_int64(s);
    if (v < min || v > max)
        return bad_value(r, s, prefix, "%g is out of range (%g to %g)", v, min, max);
    *out = v;
    return 0;
}

int conf_duration(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                  int64_t min_ms, int64_t *out)
{
    if (!s)
        return 0;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return wrong_type(r, s, prefix, "a duration string with a unit, like \"30s\"");
    const char *v = config_setting_get_string(s);
    const char *why;
    int64_t ms;
    if (timefmt_parse_duration(v, &ms, &why) < 0)
        return bad_value(r, s, prefix, "bad duration \"%s\": %s", v, why);
    if (ms < min_ms)
        return bad_value(r, s, prefix, "must be at least %lldms", (long long)min_ms);
    *out = ms;
    return 0;
}
