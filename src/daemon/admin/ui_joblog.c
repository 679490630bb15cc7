#include "daemon/admin/ui_joblog.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JOBLOG_KEY_MAX 512      /* queue name + NUL + id + NUL */

struct joblog_slot {
    char key[JOBLOG_KEY_MAX];   /* "QUEUE\0ID\0"; empty: unused */
    size_t keylen;
    struct ui_joblog_entry e;
};

struct ui_joblog {
    struct joblog_slot ring[UI_JOBLOG_MAX];
    size_t next;                /* the slot the next action takes */
};

struct ui_joblog *ui_joblog_new(void)
{
    return calloc(1, sizeof(struct ui_joblog));
}

void ui_joblog_free(struct ui_joblog *l)
{
    free(l);
}

/* "QUEUE\0ID\0" into key; 0 when it does not fit. */
static size_t joblog_key(char *key, const char *queue, const char *id)
{
    size_t ql = strlen(queue), il = strlen(id);
    if (ql + il + 2 > JOBLOG_KEY_MAX)
        return 0;
    memcpy(key, queue, ql + 1);
    memcpy(key + ql + 1, id, il + 1);
    return ql + il + 2;
}

static int64_t unix_ms_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ui_joblog_add(struct ui_joblog *l, const char *queue, const char *id,
                   const char *what)
{
    if (!l)
        return;
    struct joblog_slot *s = &l->ring[l->next];
    size_t len = joblog_key(s->key, queue, id);
    if (len == 0)
        return;
    s->keylen = len;
    s->e.at_ms = unix_ms_now();
    s->e.what = what;
    l->next = (l->next + 1) % UI_JOBLOG_MAX;
}

size_t ui_joblog_find(const struct ui_joblog *l, const char *queue, const char *id,
                      struct ui_joblog_entry *out, size_t max)
{
    char key[JOBLOG_KEY_MAX];
    size_t len = l ? joblog_key(key, queue, id) : 0;
    size_t n = 0;
    if (len == 0)
        return 0;
    for (size_t k = 0; k < UI_JOBLOG_MAX && n < max; k++) {
        const struct joblog_slot *s = &l->ring[(l->next + k) % UI_JOBLOG_MAX];
        if (s->keylen == len && memcmp(s->key, key, len) == 0)
            out[n++] = s->e;
    }
    return n;
}
