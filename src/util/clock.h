/*
 * clock: the monotonic clock in milliseconds, for timeouts, backoffs and
 * intervals.  Never for a time that is stored or shown: a job's times are
 * Redis's TIME, and a log's or a test's the real-time clock.
 */
#ifndef DQ_UTIL_CLOCK_H
#define DQ_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC (which cannot fail with a valid clock
 * id and pointer). */
static inline int64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
