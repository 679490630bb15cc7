#include "daemon/worker/wake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A decimal number filling msg[from..len), into *ms. */
static bool read_ms(const char *msg, size_t from, size_t len, int64_t *ms)
{
    char buf[24];
    size_t n = len - from;
    if (from >= len || n >= sizeof buf)
        return false;
    memcpy(buf, msg + from, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || end == buf || errno == ERANGE)
        return false;
    *ms = v;
    return true;
}

static bool has_word(const char *msg, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len > n && memcmp(msg, word, n) == 0 && msg[n] == ' ';
}

enum wake_kind wake_parse(const char *msg, size_t len, int64_t *ms)
{
    if (has_word(msg, len, "pause"))
        return read_ms(msg, 6, len, ms) ? WAKE_PAUSE : WAKE_UNKNOWN;
    if (has_word(msg, len, "resume"))
        return read_ms(msg, 7, len, ms) ? WAKE_RESUME : WAKE_UNKNOWN;
    return read_ms(msg, 0, len, ms) ? WAKE_DUE : WAKE_UNKNOWN;
}

void pause_view_hear(struct pause_view *v, bool paused, int64_t ms, int64_t now_us)
{
    v->paused = paused;
    v->heard = true;
    v->heard_ms = ms;
    v->heard_at_us = now_us;
}

bool pause_view_observe(struct pause_view *v, bool paused, int64_t server_ms,
                        int64_t sent_us)
{
    if (v->heard && sent_us <= v->heard_at_us && server_ms <= v->heard_ms)
        return false;
    v->paused = paused;
    return true;
}
