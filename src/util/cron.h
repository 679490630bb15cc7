/*
 * Recurring schedules' expressions and their fire times.
 *
 * An expression is the five-field cron syntax (minute hour day-of-month
 * month day-of-week: "*", numbers, lists "1,15", ranges "1-5", steps
 * "*\/5", "10-50/20" and "5/15" (from 5 on), month names jan..dec, day
 * names sun..sat, 7 for Sunday, and Vixie cron's rule that when both day
 * fields are restricted a day matching either fires), "@every DURATION"
 * (whole seconds, at least 1s), or @hourly, @daily (@midnight), @weekly,
 * @monthly, @yearly (@annually).
 *
 * Cron fields are wall-clock times in an IANA zone of the system's tzdata
 * ("UTC" when none is named).  Across daylight-saving changes each wall
 * time fires at most once: a time the clocks skip fires once at the first
 * minute after the jump (02:30 on the day Berlin goes from 02:00 to 03:00
 * fires at 03:00), a time that happens twice fires at its first
 * occurrence only.  "@every" counts real time, whatever the zone.
 *
 * Computing in a zone sets TZ for the length of the call and restores it:
 * the callers (the CLI, the daemon's reaper) are single-threaded.
 */
#ifndef DQ_CRON_H
#define DQ_CRON_H

#include <stddef.h>
#include <stdint.h>

#define CRON_EXPR_MAX 256
#define CRON_TZ_MAX 64

struct cron_expr {
    int64_t every_ms;       /* > 0: "@every"; the bit sets are unused */
    uint64_t minutes;       /* bit n: minute n fires (0..59) */
    uint32_t hours;         /* 0..23 */
    uint32_t mdays;         /* 1..31 */
    uint16_t months;        /* 1..12 */
    uint8_t wdays;          /* 0..6, Sunday 0 */
    int mday_star;          /* the day-of-month field began with '*' */
    int wday_star;          /* the day-of-week field began with '*' */
};

/* Parse `s`.  Returns 0, or -1 with one line in `err` naming the field and
 * the reason ("field 2 (hour) \"25\": 25 is not in 0..23"). */
int cron_parse(const char *s, struct cron_expr *e, char *err, size_t errlen);

/* Check a zone name against the system's tzdata ($TZDIR or
 * /usr/share/zoneinfo).  Returns 0, or -1 with the reason in `err`. */
int cron_check_zone(const char *tz, char *err, size_t errlen);

/*
 * The first fire time strictly after `after_ms` (Unix ms) in zone `tz`
 * (checked with cron_check_zone; NULL or "" is UTC).  For "@every" that
 * is after_ms + the interval: the caller passes the previous tick.  Cron
 * times are whole minutes.  Returns -1 when nothing fires in the next
 * eight years (as "0 0 31 2 *").
 */
int64_t cron_next(const struct cron_expr *e, const char *tz, int64_t after_ms);

#endif
