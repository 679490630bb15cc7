#include "util/cron.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/timefmt.h"

#define SEARCH_DAYS (8 * 366)   /* how far cron_next looks */
#define MINUTE_MS INT64_C(60000)

/* ---- parsing ------------------------------------------------------------ */

struct field_spec {
    const char *name;
    int lo, hi;
    const char *const *names;   /* names[i] means lo + i; NULL: none */
};

static const char *const month_names[] = {
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
    "nov", "dec", NULL
};
static const char *const day_names[] = {
    "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const struct field_spec fields[5] = {
    { "minute", 0, 59, NULL },
    { "hour", 0, 23, NULL },
    { "day-of-month", 1, 31, NULL },
    { "month", 1, 12, month_names },
    { "day-of-week", 0, 7, day_names },
};

/* Read a number or (for fields that have them) a three-letter name at *s,
 * advancing *s.  Returns 0, or -1 with the reason in `why` (len bytes). */
static int read_value(const char **s, const struct field_spec *f, int *v,
                      char *why, size_t len)
{
    if (isdigit((unsigned char)**s)) {
        char *end;
        errno = 0;
        long n = strtol(*s, &end, 10);
        if (errno || end - *s > 4 || n < f->lo || n > f->hi) {
            snprintf(why, len, "%.*s is not in %d..%d", (int)(end - *s), *s, f->lo, f->hi);
            return -1;
        }
        *s = end;
        *v = (int)n;
        return 0;
    }
    for (int i = 0; f->names && f->names[i]; i++)
        if (strncasecmp(*s, f->names[i], 3) == 0 && !isalpha((unsigned char)(*s)[3])) {
            *s += 3;
            *v = f->lo + i;
            return 0;
        }
    snprintf(why, len, "expected %s", f->names ? "a number or a name" : "a number");
    return -1;
}

/* Parse one comma-separated item ("*", "N", "N-M", each with an optional
 * "/STEP") of field `f` into the bit set *bits. */
static int parse_item(const char *s, const char *end, const struct field_spec *f,
                      uint64_t *bits, char *why, size_t len)
{
    int lo = f->lo, hi = f->hi, step = 1, single = 0;
    if (*s == '*') {
        s++;
    } else {
        single = 1;
        if (read_value(&s, f, &lo, why, len) < 0)
            return -1;
        hi = lo;
        if (s < end && *s == '-') {
            single = 0;
            s++;
            if (read_value(&s, f, &hi, why, len) < 0)
                return -1;
            if (hi < lo) {
                snprintf(why, len, "range %d-%d runs backwards", lo, hi);
                return -1;
            }
        }
    }
    if (s < end && *s == '/') {
        /* "N/STEP": from N to the field's end, as "N-MAX/STEP". */
        if (single)
            hi = f->hi;
        s++;
        char *num_end;
        long n = strtol(s, &num_end, 10);
        if (num_end == s || num_end != end || n < 1 || n > f->hi) {
            snprintf(why, len, "step \"%.*s\" is not a whole number in 1..%d",
                     (int)(end - s), s, f->hi);
            return -1;
        }
        step = (int)n;
        s = num_end;
    }
    if (s != end) {
        snprintf(why, len, "unexpected \"%.*s\"", (int)(end - s), s);
        return -1;
    }
    for (int v = lo; v <= hi; v += step)
        *bits |= UINT64_C(1) << v;
    return 0;
}

/* Parse field number `i` (0-based), the text [s, end), into *bits. */
static int parse_field(int i, const char *s, const char *end, uint64_t *bits,
                       char *err, size_t errlen)
{
    char why[128];
    const char *item = s;
    *bits = 0;
    for (;;) {
        const char *comma = memchr(item, ',', (size_t)(end - item));
        const char *item_end = comma ? comma : end;
        if (item_end == item) {
            snprintf(why, sizeof why, "empty list item");
            goto fail;
        }
        if (parse_item(item, item_end, &fields[i], bits, why, sizeof why) < 0)
            goto fail;
        if (!comma)
            return 0;
        item = comma + 1;
    }
fail:
    snprintf(err, errlen, "field %d (%s) \"%.*s\": %s", i + 1, fields[i].name,
             (int)(end - s), s, why);
    return -1;
}

static const struct { const char *name; const char *expr; } macros[] = {
    { "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" },
    { "@monthly", "0 0 1 * *" }, { "@weekly", "0 0 * * 0" },
    { "@daily", "0 0 * * *" }, { "@midnight", "0 0 * * *" },
    { "@hourly", "0 * * * *" },
};

static int parse_every(const char *s, struct cron_expr *e, char *err, size_t errlen)
{
    while (*s == ' ' || *s == '\t')
        s++;
    const char *why;
    int64_t ms;
    if (timefmt_parse_duration(s, &ms, &why) < 0) {
        snprintf(err, errlen, "@every \"%s\": %s", s, why);
        return -1;
    }
    /* Whole seconds: each tick's job id names its second. */
    if (ms < 1000 || ms % 1000) {
        snprintf(err, errlen, "@every \"%s\": the interval must be whole seconds, "
                 "at least 1s", s);
        return -1;
    }
    e->every_ms = ms;
    return 0;
}

int cron_parse(const char *s, struct cron_expr *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    if (!s || strlen(s) > CRON_EXPR_MAX) {
        snprintf(err, errlen, "expression is missing or longer than %d bytes",
                 CRON_EXPR_MAX);
        return -1;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '@') {
        if (strncmp(s, "@every", 6) == 0 && (s[6] == ' ' || s[6] == '\t'))
            return parse_every(s + 6, e, err, errlen);
        for (size_t i = 0; i < sizeof macros / sizeof macros[0]; i++)
            if (strcmp(s, macros[i].name) == 0)
                return cron_parse(macros[i].expr, e, err, errlen);
        snprintf(err, errlen, "\"%s\" is not one of @every DURATION, @hourly, @daily, "
                 "@weekly, @monthly, @yearly", s);
        return -1;
    }
    const char *start[6], *end[5];
    int n = 0;
    for (const char *p = s; *p;) {
        if (n == 5) {
            n = 6;
            break;
        }
        start[n] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        end[n++] = p;
        while (*p == ' ' || *p == '\t')
            p++;
    }
    if (n != 5) {
        snprintf(err, errlen, "expected 5 fields (minute hour day-of-month month "
                 "day-of-week), got %s%d", n > 5 ? "more than " : "", n > 5 ? 5 : n);
        return -1;
    }
    uint64_t bits[5];
    for (int i = 0; i < 5; i++)
        if (parse_field(i, start[i], end[i], &bits[i], err, errlen) < 0)
            return -1;
    e->minutes = bits[0];
    e->hours = (uint32_t)bits[1];
    e->mdays = (uint32_t)bits[2];
    e->months = (uint16_t)bits[3];
    /* 7 is Sunday as well as 0. */
    e->wdays = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f);
    e->mday_star = *start[2] == '*';
    e->wday_star = *start[4] == '*';
    return 0;
}

/* ---- zones -------------------------------------------------------------- */

int cron_check_zone(const char *tz, char *err, size_t errlen)
{
    if (!tz || !*tz || strcmp(tz, "UTC") == 0)
        return 0;
    if (strlen(tz) > CRON_TZ_MAX || tz[0] == '/' || strstr(tz, "..")
        || strpbrk(tz, " \t:,")) {
        snprintf(err, errlen, "time zone \"%.64s\" is not an IANA zone name "
                 "(as Europe/Berlin)", tz);
        return -1;
    }
    const char *dir = getenv("TZDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", tz);
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "time zone \"%s\" is not in the system's tzdata (%s)",
                 tz, path);
        return -1;
    }
    return 0;
}

/* TZ set to a zone for the length of a computation, and put back. */
struct zone_guard {
    char *old;
    int had;
};

static void zone_enter(struct zone_guard *g, const char *tz)
{
    const char *old = getenv("TZ");
    g->had = old != NULL;
    g->old = old ? strdup(old) : NULL;
    setenv("TZ", tz && *tz ? tz : "UTC", 1);
    tzset();
}

static void zone_leave(struct zone_guard *g)
{
    if (g->had && g->old)
        setenv("TZ", g->old, 1);
    else
        unsetenv("TZ");
    free(g->old);
    tzset();
}

/* ---- next fire time ----------------------------------------------------- */

/* A wall-clock minute. */
struct wall {
    int y, mo, d, h, mi;
};

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int64_t wall_key(const struct wall *w)
{
    return (days_from_civil(w->y, w->mo, w->d) * 24 + w->h) * 60 + w->mi;
}

static void wall_of(time_t t, struct wall *w)
{
    struct tm tm;
    localtime_r(&t, &tm);
    *w = (struct wall){ tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                        tm.tm_min };
}

static int64_t wall_key_at(time_t t)
{
    struct wall w;
    wall_of(t, &w);
    return wall_key(&w);
}

/*
 * The instant (Unix seconds) a wall-clock minute happens in the current
 * zone: its first occurrence when the clocks go back over it, and when it
 * does not exist (the clocks jump over it) the first minute after the
 * jump.  -1 when mktime cannot say.
 */
static time_t wall_to_time(const struct wall *w)
{
    int64_t want = wall_key(w);
    time_t best = -1;
    for (int dst = 0; dst <= 1; dst++) {
        struct tm tm = { .tm_year = w->y - 1900, .tm_mon = w->mo - 1, .tm_mday = w->d,
                         .tm_hour = w->h, .tm_min = w->mi, .tm_isdst = dst };
        time_t t = mktime(&tm);
        if (t != (time_t)-1 && wall_key_at(t) == want && (best == -1 || t < best))
            best = t;
    }
    if (best != -1)
        return best;
    /* Skipped: find the first minute whose wall time is past it. */
    struct tm tm = { .tm_year = w->y - 1900, .tm_mon = w->mo - 1, .tm_mday = w->d,
                     .tm_hour = w->h, .tm_min = w->mi, .tm_isdst = -1 };
    time_t t = mktime(&tm);
    if (t == (time_t)-1)
        return -1;
    t -= t % 60;
    for (int i = 0; i < 2 * 1440 && wall_key_at(t) < want; i++)
        t += 60;
    for (int i = 0; i < 2 * 1440 && wall_key_at(t - 60) > want; i++)
        t -= 60;
    return t;
}

static int day_matches(const struct cron_expr *e, int y, int mo, int d)
{
    if (!(e->months & (1u << mo)))
        return 0;
    int64_t days = days_from_civil(y, mo, d);
    int wd = (int)(((days % 7) + 11) % 7);      /* 1970-01-01 was a Thursday */
    int dom = (e->mdays >> d) & 1, dow = (e->wdays >> wd) & 1;
    /* Vixie cron: both fields restricted means either day fires. */
    if (!e->mday_star && !e->wday_star)
        return dom || dow;
    return dom && dow;
}

static int days_in_month(int y, int mo)
{
    int next_y = mo == 12 ? y + 1 : y, next_mo = mo == 12 ? 1 : mo + 1;
    return (int)(days_from_civil(next_y, next_mo, 1) - days_from_civil(y, mo, 1));
}

/* The first matching wall minute at or after `from` whose instant is at or
 * after `start` (Unix s), as that instant; -1 if none within SEARCH_DAYS. */
static time_t cron_search(const struct cron_expr *e, const struct wall *from, time_t start)
{
    int64_t day0 = days_from_civil(from->y, from->mo, from->d);
    for (int64_t day = day0; day < day0 + SEARCH_DAYS; day++) {
        struct wall w;
        civil_from_days(day, &w.y, &w.mo, &w.d);
        if (w.d > days_in_month(w.y, w.mo) || !day_matches(e, w.y, w.mo, w.d))
            continue;
        for (w.h = day == day0 ? from->h : 0; w.h < 24; w.h++) {
            if (!(e->hours & (1u << w.h)))
                continue;
            int first = (day == day0 && w.h == from->h) ? from->mi : 0;
            for (w.mi = first; w.mi < 60; w.mi++) {
                if (!(e->minutes & (UINT64_C(1) << w.mi)))
                    continue;
                time_t t = wall_to_time(&w);
                /* Before start: a wall time that happened already, the
                 * first time of two. */
                if (t != (time_t)-1 && t >= start)
                    return t;
            }
        }
    }
    return -1;
}

int64_t cron_next(const struct cron_expr *e, const char *tz, int64_t after_ms)
{
    if (e->every_ms > 0)
        return after_ms + e->every_ms;
    int64_t start_ms = (after_ms >= 0 ? after_ms / MINUTE_MS : (after_ms - MINUTE_MS + 1)
                        / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
    struct zone_guard g;
    zone_enter(&g, tz);
    time_t start = (time_t)(start_ms / 1000);
    struct wall from;
    wall_of(start, &from);
    time_t t = cron_search(e, &from, start);
    zone_leave(&g);
    return t == (time_t)-1 ? -1 : (int64_t)t * 1000;
}
