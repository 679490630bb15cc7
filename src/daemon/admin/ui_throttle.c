#include "daemon/admin/ui_throttle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADDR_LEN 64

struct entry {
    char addr[ADDR_LEN];        /* "" for a free entry */
    int64_t failures;           /* on record */
    int64_t last_ms;            /* the last failure */
    int64_t until_ms;           /* no attempt is checked before */
    int64_t unlogged, unlogged_refused;
    int64_t logged_ms;          /* the last line; 0: none yet */
};

struct ui_throttle {
    struct entry e[UI_THROTTLE_ADDRS];
};

struct ui_throttle *ui_throttle_new(void)
{
    return calloc(1, sizeof(struct ui_throttle));
}

void ui_throttle_free(struct ui_throttle *t)
{
    free(t);
}

/* The entry of `addr`, forgotten when stale; NULL when none. */
static struct entry *find(struct ui_throttle *t, const char *addr, int64_t now_ms)
{
    for (size_t i = 0; i < UI_THROTTLE_ADDRS; i++) {
        struct entry *e = &t->e[i];
        if (!e->addr[0] || strncmp(e->addr, addr, ADDR_LEN - 1) != 0)
            continue;
        if (now_ms - e->last_ms > UI_THROTTLE_FORGET_MS && now_ms >= e->until_ms) {
            memset(e, 0, sizeof *e);
            return NULL;
        }
        return e;
    }
    return NULL;
}

/* A new entry for `addr`: a free one, else the one failed longest ago. */
static struct entry *add(struct ui_throttle *t, const char *addr)
{
    struct entry *slot = &t->e[0];
    for (size_t i = 0; i < UI_THROTTLE_ADDRS; i++) {
        if (!t->e[i].addr[0]) {
            slot = &t->e[i];
            break;
        }
        if (t->e[i].last_ms < slot->last_ms)
            slot = &t->e[i];
    }
    memset(slot, 0, sizeof *slot);
    snprintf(slot->addr, sizeof slot->addr, "%s", addr);
    return slot;
}

int64_t ui_throttle_wait(struct ui_throttle *t, const char *addr, int64_t now_ms)
{
    const struct entry *e = find(t, addr, now_ms);
    return e && e->until_ms > now_ms ? e->until_ms - now_ms : 0;
}

void ui_throttle_failed(struct ui_throttle *t, const char *addr, int refused,
                        int64_t now_ms, struct ui_throttle_report *rep)
{
    struct entry *e = find(t, addr, now_ms);
    if (!e)
        e = add(t, addr);
    e->unlogged++;
    if (refused) {
        e->unlogged_refused++;
    } else {
        e->failures++;
        e->last_ms = now_ms;
        if (e->failures >= UI_THROTTLE_FREE) {
            int64_t shift = e->failures - UI_THROTTLE_FREE;
            int64_t wait = shift >= 16 ? UI_THROTTLE_MAX_WAIT_MS : 1000LL << shift;
            e->until_ms = now_ms + (wait < UI_THROTTLE_MAX_WAIT_MS ? wait
                                                                    : UI_THROTTLE_MAX_WAIT_MS);
        }
    }
    *rep = (struct ui_throttle_report){ 0, e->unlogged, e->unlogged_refused, e->failures,
                                        e->until_ms > now_ms ? e->until_ms - now_ms : 0 };
    if (e->logged_ms == 0 || now_ms - e->logged_ms >= 1000) {
        rep->log = 1;
        e->logged_ms = now_ms;
        e->unlogged = e->unlogged_refused = 0;
    }
}

void ui_throttle_passed(struct ui_throttle *t, const char *addr)
{
    for (size_t i = 0; i < UI_THROTTLE_ADDRS; i++)
        if (t->e[i].addr[0] && strncmp(t->e[i].addr, addr, ADDR_LEN - 1) == 0)
            memset(&t->e[i], 0, sizeof t->e[i]);
}
