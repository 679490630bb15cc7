/*
 * Reading and writing durations and points in time, as users type them on
 * the command line and in the config file.
 */
#ifndef DQ_TIMEFMT_H
#define DQ_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parse a duration: a sequence of <number><unit> with units ms, s, m, h, d
 * ("500ms", "30s", "15m", "2h", "1d", "1h30m"), or a bare whole number of
 * seconds.  Returns 0 and sets *ms, or -1 with *why set to a constant phrase.
 */
int timefmt_parse_duration(const char *s, int64_t *ms, const char **why);

/*
 * Parse a point in time: Unix seconds ("1767225600", "1767225600.250") or
 * ISO-8601 ("2026-01-01T00:00:00Z", "2026-01-01 09:30:00+02:00",
 * "2026-01-01T09:30"; no offset means local time).  Returns 0 and sets *ms
 * to Unix milliseconds, or -1 with *why set.
 */
int timefmt_parse_time(const char *s, int64_t *ms, const char **why);

/* "350ms", "42s", "15m 3s", "2h 5m", "3d 4h": short, for tables. */
void timefmt_duration(char *buf, size_t len, int64_t ms);

/* "2026-01-01T00:00:00.000Z". */
void timefmt_iso(char *buf, size_t len, int64_t ms);

#endif
