/*
 * What the protocol's files share (proto.c, proto_produce.c,
 * proto_consume.c, proto_admin.c, proto_fsck.c): reading a reply's
 * elements.  The caller has checked that element i exists (is_array).
 */
#ifndef DQ_PROTO_INT_H
#define DQ_PROTO_INT_H

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int is_array(const redisReply *r, size_t min)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

static inline int64_t elem_int(const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    if (e->type == REDIS_REPLY_STRING)
        return strtoll(e->str, NULL, 10);
    return 0;
}

static inline int elem_is(const redisReply *r, size_t i, const char *s)
{
    const redisReply *e = r->element[i];
    return (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS)
           && strcmp(e->str, s) == 0;
}

/* A NUL-terminated copy of a string element (binary-safe: the length is
 * stored in *len when len is not NULL).  NULL when out of memory. */
static inline char *elem_dup(const redisReply *r, size_t i, size_t *len)
{
    const redisReply *e = r->element[i];
    size_t n = (e->type == REDIS_REPLY_STRING) ? e->len : 0;
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    if (n)
        memcpy(s, e->str, n);
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

#endif
