#include "daemon/relay/relay_defer.h"

#include <stdio.h>
#include <string.h>

#define RETRY_FIRST_MS 1000
#define RETRY_MAX_MS 10000      /* each try of a master down costs the
                                   library's connect timeout (5 s) */

static struct relay_held_part *find_part(struct relay_defer *d, const char *queue,
                                         unsigned part)
{
    for (size_t i = 0; i < d->nparts; i++)
        if (d->parts[i].part == part && strcmp(d->parts[i].queue, queue) == 0)
            return &d->parts[i];
    return NULL;
}

bool relay_defer_retry_due(struct relay_defer *d, int64_t now_ms)
{
    if (d->nparts == 0 || now_ms < d->retry_at_ms)
        return false;
    d->nids = 0;
    for (size_t i = 0; i < d->nparts; i++) {
        struct relay_held_part *p = &d->parts[i];
        p->held = p->tried = false;
        if (p->rows > p->rows_before)
            p->rows_before = p->rows;
        p->rows = 0;
    }
    return true;
}

bool relay_defer_holds(struct relay_defer *d, const char *queue, unsigned part)
{
    struct relay_held_part *p = d->nparts ? find_part(d, queue, part) : NULL;
    if (!p)
        return false;
    if (!p->held)
        p->tried = true;
    return p->held;
}

int relay_defer_hold(struct relay_defer *d, const char *queue, unsigned part, int64_t id,
                     int64_t now_ms)
{
    struct relay_held_part *p = find_part(d, queue, part);
    if (d->nids == RELAY_HELD_MAX || (!p && d->nparts == RELAY_HELD_PARTS_MAX))
        return -1;
    int fresh = !p;
    if (fresh) {
        p = &d->parts[d->nparts++];
        *p = (struct relay_held_part){ .queue = queue, .part = part };
    }
    p->held = true;
    p->rows++;
    d->ids[d->nids++] = id;
    /* The first hold since the last try sets the next one, later each
     * time (a master down for long is tried every RETRY_MAX_MS). */
    if (d->retry_at_ms <= now_ms) {
        d->backoff_ms = d->backoff_ms ? 2 * d->backoff_ms : RETRY_FIRST_MS;
        if (d->backoff_ms > RETRY_MAX_MS)
            d->backoff_ms = RETRY_MAX_MS;
        d->retry_at_ms = now_ms + d->backoff_ms;
    }
    return fresh;
}

size_t relay_defer_count(const struct relay_defer *d)
{
    size_t n = 0;
    for (size_t i = 0; d && i < d->nparts; i++)
        n += d->parts[i].rows > d->parts[i].rows_before ? d->parts[i].rows
                                                         : d->parts[i].rows_before;
    return n;
}

bool relay_defer_next_back(struct relay_defer *d, struct relay_held_part *out)
{
    for (size_t i = 0; i < d->nparts; i++) {
        if (d->parts[i].held || !d->parts[i].tried)
            continue;
        *out = d->parts[i];
        d->parts[i] = d->parts[--d->nparts];
        if (d->nparts == 0)
            d->backoff_ms = 0;
        return true;
    }
    return false;
}

const char *relay_defer_ids(struct relay_defer *d)
{
    if (!d)
        return "{}";
    size_t at = 0, len = sizeof d->literal;
    d->literal[at++] = '{';
    for (size_t i = 0; i < d->nids; i++)
        at += (size_t)snprintf(d->literal + at, len - at, "%s%lld", i ? "," : "",
                               (long long)d->ids[i]);
    snprintf(d->literal + at, len - at, "}");
    return d->literal;
}
