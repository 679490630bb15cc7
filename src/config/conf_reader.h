/*
 * The one way delayq reads libconfig settings: a reader that keeps the
 * first problem found (the earliest mistake is the one worth fixing) as one
 * line "FILE:LINE: message" in the caller's buffer, and typed readers of
 * one setting each, whose messages name the setting as the user wrote it
 * ("redis.port", "queues.[0].lease", "handlers.[1].settings.argv.[2]").
 *
 * Used by the `redis` group reader (redis_conf.c), the daemon's file
 * (daemon/dconfig.c) and the handlers' settings (daemon/settings.c).
 */
#ifndef DQ_CONF_READER_H
#define DQ_CONF_READER_H

#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

struct conf_reader {
    const char *path;   /* the file, for settings libconfig knows none of;
                           NULL: "(config)" */
    char *err;          /* the first problem, one line */
    size_t errlen;
    int failed;         /* a problem is recorded: later ones are dropped */
};

/* A reader reporting into err[errlen] (emptied). */
void conf_reader_init(struct conf_reader *r, const char *path, char *err, size_t errlen);

/*
 * Record a problem at setting `s`, as "FILE:LINE: message" (FILE the one
 * `s` was read from, else r->path), or at the file ("FILE: message") when
 * `s` is NULL or has no line.  Only the first problem is kept, on one
 * line: a control character (a quoted value may hold "\n") shows as '?'.
 * Returns -1, so that readers can `return conf_fail(...)`.
 */
int conf_fail(struct conf_reader *r, const config_setting_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Parse the file at `path` into `cfg` (initialised by the caller).  A
 * file that cannot be read, a directory, and an empty file (more likely
 * a mistake than a wish for every default) are refused as "cannot read
 * PATH: why" and "PATH: the file is empty"; a syntax error as
 * "FILE:LINE: what".  Returns 0, or -1 with one line in err.
 */
int conf_read_file(config_t *cfg, const char *path, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* "PREFIX" followed by the name of `s`, or "[N]" for an element of a list
 * or array, into buf: how messages name a setting. */
void conf_name(const config_setting_t *s, const char *prefix, char *buf, size_t len);

/* Refuse a member of `group` whose name is not in `known` (NULL-ended):
 * "unknown setting 'PREFIXNAME'".  A misspelt setting would otherwise be
 * silently ignored.  A `group` that is a list or a scalar is refused as
 * "PREFIX: expected a group" (PREFIX without its last '.'). */
int conf_check_keys(struct conf_reader *r, const config_setting_t *group,
                    const char *prefix, const char *const *known);

/*
 * Typed readers of setting `s`, named in messages by conf_name(s, prefix).
 * Each returns 0 with the value in *out, or -1 (*out untouched) after
 * conf_fail: "NAME: expected a string" and the like.  A NULL `s` (a
 * setting left out) returns 0 and leaves *out, the default, as it is.
 */
int conf_string(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                const char **out);
/* An integer (32 or 64 bits) within [min, max]. */
int conf_int(struct conf_reader *r, const config_setting_t *s, const char *prefix,
             long long min, long long max, long long *out);
int conf_bool(struct conf_reader *r, const config_setting_t *s, const char *prefix,
              int *out);
/* A number, integer or not, within [min, max]. */
int conf_float(struct conf_reader *r, const config_setting_t *s, const char *prefix,
               double min, double max, double *out);
/* A duration string ("500ms", "30s", "1h30m"; a bare number counts as
 * seconds) of at least `min_ms`, in ms. */
int conf_duration(struct conf_reader *r, const config_setting_t *s, const char *prefix,
                  int64_t min_ms, int64_t *out);

#endif
