#include "util/timefmt.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DURATION_MAX_MS (INT64_C(100) * 365 * 86400 * 1000) /* a century */

/* Milliseconds in a unit at s (advancing *s past it), or 0 if none. */
static int64_t unit_ms(const char **s)
{
    static const struct { const char *name; int64_t ms; } units[] = {
        { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
        { "d", 86400000 },
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (strncmp(*s, units[i].name, n) == 0) {
            *s += n;
            return units[i].ms;
        }
    }
    return 0;
}

int timefmt_parse_duration(const char *s, int64_t *ms, const char **why)
{
    if (!s || !*s) {
        *why = "empty duration";
        return -1;
    }
    int64_t total = 0;
    int parts = 0;
    while (*s) {
        if (!isdigit((unsigned char)*s)) {
            *why = "expected a number (durations look like 500ms, 30s, 15m, 2h, 1d)";
            return -1;
        }
        errno = 0;
        char *end;
        long long n = strtoll(s, &end, 10);
        if (errno || n > DURATION_MAX_MS) {
            *why = "duration is too long (over 100 years)";
            return -1;
        }
        s = end;
        int64_t unit = *s ? unit_ms(&s) : (parts == 0 ? 1000 : 0);
        if (!unit) {
            *why = "unknown unit (use ms, s, m, h or d)";
            return -1;
        }
        if (n > (DURATION_MAX_MS - total) / unit) {
            *why = "duration is too long (over 100 years)";
            return -1;
        }
        total += n * unit;
        parts++;
    }
    *ms = total;
    return 0;
}

/* Read exactly `digits` digits into *v. */
static int read_digits(const char **s, int digits, int *v)
{
    int n = 0;
    for (int i = 0; i < digits; i++) {
        if (!isdigit((unsigned char)(*s)[i]))
            return -1;
        n = n * 10 + ((*s)[i] - '0');
    }
    *s += digits;
    *v = n;
    return 0;
}

/* Optional ".fff...": milliseconds from the first three digits. */
static int read_fraction(const char **s, int64_t *ms)
{
    *ms = 0;
    if (**s != '.')
        return 0;
    (*s)++;
    if (!isdigit((unsigned char)**s))
        return -1;
    int64_t scale = 100;
    for (; isdigit((unsigned char)**s); (*s)++) {
        *ms += (**s - '0') * scale;
        scale /= 10;
    }
    return 0;
}

static int parse_unix(const char *s, int64_t *ms, const char **why)
{
    errno = 0;
    char *end;
    long long sec = strtoll(s, &end, 10);
    int64_t frac = 0;
    const char *p = end;
    if (errno || sec < 0 || sec > INT64_C(253402300799) || read_fraction(&p, &frac) < 0 || *p) {
        *why = "not a Unix time in seconds";
        return -1;
    }
    *ms = (int64_t)sec * 1000 + frac;
    return 0;
}

/* The zone suffix: "Z", "+HH:MM", "+HHMM", "+HH", or nothing (local). */
static int parse_zone(const char *s, int *has_zone, int *offset_s)
{
    *has_zone = 0;
    *offset_s = 0;
    if (!*s)
        return 0;
    *has_zone = 1;
    if ((*s == 'Z' || *s == 'z') && !s[1])
        return 0;
    if (*s != '+' && *s != '-')
        return -1;
    int sign = *s++ == '-' ? -1 : 1, hh, mm = 0;
    if (read_digits(&s, 2, &hh) < 0)
        return -1;
    if (*s == ':')
        s++;
    if (*s && read_digits(&s, 2, &mm) < 0)
        return -1;
    if (*s || hh > 23 || mm > 59)
        return -1;
    *offset_s = sign * (hh * 3600 + mm * 60);
    return 0;
}

static int parse_iso(const char *s, int64_t *ms, const char **why)
{
    struct tm tm = { 0 };
    int y, mo, d, h = 0, mi = 0, sec = 0;
    int64_t frac = 0;
    *why = "not an ISO-8601 time (like 2026-01-31T09:30:00Z)";
    if (read_digits(&s, 4, &y) < 0 || *s++ != '-' || read_digits(&s, 2, &mo) < 0
        || *s++ != '-' || read_digits(&s, 2, &d) < 0)
        return -1;
    if (*s == 'T' || *s == 't' || *s == ' ') {
        s++;
        if (read_digits(&s, 2, &h) < 0 || *s++ != ':' || read_digits(&s, 2, &mi) < 0)
            return -1;
        if (*s == ':' && (s++, read_digits(&s, 2, &sec) < 0 || read_fraction(&s, &frac) < 0))
            return -1;
    }
    int has_zone, offset;
    if (parse_zone(s, &has_zone, &offset) < 0)
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
        *why = "ISO-8601 time has a field out of range";
        return -1;
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    time_t t = has_zone ? timegm(&tm) - offset : mktime(&tm);
    if (t == (time_t)-1 || tm.tm_mday != d) {
        *why = "ISO-8601 time names a day that does not exist";
        return -1;
    }
    *ms = (int64_t)t * 1000 + frac;
    return 0;
}

int timefmt_parse_time(const char *s, int64_t *ms, const char **why)
{
    if (!s || !*s) {
        *why = "empty time";
        return -1;
    }
    size_t digits = strspn(s, "0123456789");
    if (digits > 4 || s[digits] == '\0' || (digits > 0 && s[digits] == '.'))
        return parse_unix(s, ms, why);
    return parse_iso(s, ms, why);
}

/* The magnitude is taken unsigned: the value may come from Redis, and the
 * negation of INT64_MIN does not fit an int64_t. */
void timefmt_duration(char *buf, size_t len, int64_t ms)
{
    const char *sign = ms < 0 ? "-" : "";
    uint64_t abs_ms = ms < 0 ? -(uint64_t)ms : (uint64_t)ms;
    unsigned long long s = abs_ms / 1000, m = s / 60, h = m / 60, d = h / 24;
    if (abs_ms < 1000)
        snprintf(buf, len, "%s%llums", sign, (unsigned long long)abs_ms);
    else if (s < 60)
        snprintf(buf, len, "%s%llu.%llus", sign, s, (unsigned long long)(abs_ms % 1000 / 100));
    else if (m < 60)
        snprintf(buf, len, "%s%llum %llus", sign, m, s % 60);
    else if (h < 24)
        snprintf(buf, len, "%s%lluh %llum", sign, h, m % 60);
    else
        snprintf(buf, len, "%s%llud %lluh", sign, d, h % 24);
}

/* Seconds and milliseconds rounded down: a time before 1970 is the second
 * before it plus 0..999 ms, not a negative fraction (which C's division
 * gives, and which printed as "...:59.-250Z"). */
void timefmt_iso(char *buf, size_t len, int64_t ms)
{
    int64_t sec = ms / 1000, frac = ms % 1000;
    if (frac < 0) {
        sec--;
        frac += 1000;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    char base[32];
    if (!gmtime_r(&t, &tm) || !strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm))
        snprintf(base, sizeof base, "@%lld", (long long)sec);
    snprintf(buf, len, "%s.%03lldZ", base, (long long)frac);
}
