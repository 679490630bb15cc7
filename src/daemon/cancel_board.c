#include "daemon/cancel_board.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct cancel_request *cancel_board_create(size_t n)
{
    void *p = mmap(NULL, n * sizeof(struct cancel_request), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void cancel_board_destroy(struct cancel_request *b, size_t n)
{
    if (b)
        munmap(b, n * sizeof *b);
}

void cancel_request_post(struct cancel_request *r, int64_t fence, const char *id,
                         int64_t now_ms)
{
    __atomic_add_fetch(&r->seq, 1, __ATOMIC_ACQ_REL);
    r->fence = fence;
    r->requested_ms = now_ms;
    size_t len = strnlen(id, DQ_ID_MAX);
    memcpy(r->id, id, len);
    r->id[len] = '\0';
    __atomic_add_fetch(&r->seq, 1, __ATOMIC_ACQ_REL);
}

bool cancel_request_matches(const struct cancel_request *r, int64_t fence, const char *id,
                            int64_t *requested_ms)
{
    /* The common answer, on every job's end: no request for this fence. */
    if (__atomic_load_n(&r->fence, __ATOMIC_RELAXED) != fence || fence == 0)
        return false;
    for (int tries = 0; tries < 1000; tries++) {
        uint32_t before = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        if (before & 1)
            continue;
        struct cancel_request copy;
        memcpy(&copy, r, sizeof copy);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&r->seq, __ATOMIC_ACQUIRE) != before)
            continue;
        if (copy.fence != fence || strcmp(copy.id, id) != 0)
            return false;
        if (requested_ms)
            *requested_ms = copy.requested_ms;
        return true;
    }
    return false;   /* the writer died mid-write: no request to trust */
}

/* The next space-separated word of msg[*at..len) into buf (NUL-terminated);
 * false when there is none or it does not fit.  `last`: it must end the
 * message. */
static bool next_word(const char *msg, size_t len, size_t *at, char *buf, size_t buflen,
                      bool last)
{
    size_t from = *at, to = from;
    while (to < len && msg[to] != ' ')
        to++;
    if (to == from || to - from >= buflen || (last ? to != len : to == len))
        return false;
    memcpy(buf, msg + from, to - from);
    buf[to - from] = '\0';
    *at = to + 1;
    return true;
}

bool cancel_message_parse(const char *msg, size_t len, int64_t *fence, char *id,
                          size_t idlen, char *tag, size_t taglen)
{
    static const char word[] = "cancel ";
    size_t at = sizeof word - 1;
    char num[24];
    if (len <= at || memcmp(msg, word, at) != 0
        || !next_word(msg, len, &at, num, sizeof num, false)
        || !next_word(msg, len, &at, id, idlen, false)
        || !next_word(msg, len, &at, tag, taglen, true))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(num, &end, 10);
    if (*end || errno == ERANGE || v <= 0 || num[0] < '0' || num[0] > '9')
        return false;
    *fence = v;
    return true;
}
