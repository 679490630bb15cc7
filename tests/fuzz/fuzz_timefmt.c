/*
 * Fuzz target: durations and times as users type them (the command line,
 * delayqd.conf) and as the tools print them (src/util/timefmt.c).
 *
 * The input is parsed as a duration and as a time.  These must hold: an
 * accepted duration is within 0..100 years; a refusal says why; a time
 * between 1970 and the year 9999, printed in ISO-8601, reads back as the
 * same millisecond; and printing any millisecond count, as a duration or a
 * time (the values printed come from Redis, so any int64), stays within
 * the buffer and prints a time with three digits of milliseconds.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "util/timefmt.h"

#define CENTURY_MS (INT64_C(100) * 365 * 86400 * 1000)
#define YEAR_9999_END_MS INT64_C(253402300799999)

/* Local time with daylight saving, without depending on tzdata. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    return 0;
}

/* "....T..:..:..<.mmm>Z": the milliseconds are three digits. */
static void check_iso_shape(const char *s)
{
    size_t n = strlen(s);
    FUZZ_ASSERT(n >= 5 && s[n - 1] == 'Z' && s[n - 5] == '.');
    for (size_t i = n - 4; i < n - 1; i++)
        FUZZ_ASSERT(s[i] >= '0' && s[i] <= '9');
}

static void check_printing(int64_t ms)
{
    char buf[64];
    timefmt_duration(buf, sizeof buf, ms);
    FUZZ_ASSERT(buf[0] != '\0');
    timefmt_iso(buf, sizeof buf, ms);
    check_iso_shape(buf);
    if (ms >= 0 && ms <= YEAR_9999_END_MS) {
        int64_t back;
        const char *why = NULL;
        FUZZ_ASSERT(timefmt_parse_time(buf, &back, &why) == 0);
        FUZZ_ASSERT(back == ms);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t ms;
    const char *why = NULL;
    if (timefmt_parse_duration(s, &ms, &why) == 0) {
        FUZZ_ASSERT(ms >= 0 && ms <= CENTURY_MS);
        check_printing(ms);
    } else {
        FUZZ_ASSERT(why && *why);
    }
    why = NULL;
    if (timefmt_parse_time(s, &ms, &why) == 0)
        check_printing(ms);
    else
        FUZZ_ASSERT(why && *why);
    /* The first eight bytes as a count of milliseconds to print. */
    if (size >= 8) {
        uint64_t u;
        memcpy(&u, data, sizeof u);
        check_printing((int64_t)u);
    }
    free(s);
    return 0;
}
