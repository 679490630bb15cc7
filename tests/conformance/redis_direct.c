/*
 * What Redis holds, read directly (hiredis), as the format describes it:
 * redis_state, record, redis and wake_messages (driver.h).  Key names and
 * routing are worked out here from docs/protocol.md, not taken from the
 * library, so that the library is checked against the document.
 */
#include "driver.h"

#include <ctype.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PIN "delayq pin: keeps this key in its hash-table encoding (never a job)"

/* CRC16-XMODEM of the whole id (docs/protocol.md, "Id -> partition"). */
static unsigned crc16(const char *s, size_t n)
{
    unsigned crc = 0;
    for (size_t k = 0; k < n; k++) {
        crc ^= (unsigned)(unsigned char)s[k] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

/* NAME@[now-]YYYY-MM-DDTHH:MM:SS[.fraction]Z, NAME not empty. */
static int is_schedule_id(const char *id)
{
    const char *at = strchr(id, '@'), *p, *shape = "9999-99-99T99:99:99";
    if (!at || at == id)
        return 0;
    p = at + 1;
    if (strncmp(p, "now-", 4) == 0)
        p += 4;
    for (; *shape; shape++, p++)
        if (*shape == '9' ? (*p < '0' || *p > '9') : *p != *shape)
            return 0;
    if (*p == '.') {
        size_t d = strspn(p + 1, "0123456789");
        if (!d)
            return 0;
        p += 1 + d;
    }
    return strcmp(p, "Z") == 0;
}

unsigned direct_partition_of(const char *id, unsigned nparts)
{
    size_t len = strlen(id);
    if (nparts <= 1 || is_schedule_id(id))
        return 0;
    if (len && strspn(id, "0123456789") == len) {
        unsigned r = 0;
        for (const char *p = id; *p; p++)
            r = (r * 10 + (unsigned)(*p - '0')) % nparts;
        return r;
    }
    return crc16(id, len) % nparts;
}

void direct_tag(const struct case_run *r, unsigned p, char *buf, size_t len)
{
    if (r->nparts <= 1)
        snprintf(buf, len, "%s", r->queue);
    else
        snprintf(buf, len, "%s:%u", r->queue, p);
}

static redisReply *cmd(struct case_run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r->raw, fmt, ap);
    va_end(ap);
    if (!rep) {
        fprintf(stderr, "conformance: redis: %s\n", r->raw->errstr);
        exit(99);
    }
    return rep;
}

static int by_text(const void *a, const void *b)
{
    const struct jv *x = *(struct jv *const *)a, *y = *(struct jv *const *)b;
    return strcmp(x->s, y->s);
}

/* Members of zset `key` (less the pin) into `list`, each also into where. */
static void add_members(struct case_run *r, const char *key, unsigned part, struct jv *list,
                        struct jv *where)
{
    redisReply *rep = cmd(r, "ZRANGE %s 0 -1", key);
    for (size_t k = 0; rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
        const char *m = rep->element[k]->str;
        if (strcmp(m, PIN) == 0)
            continue;
        jv_push(list, jv_str(m));
        jv_set(where, m, jv_int(part));
    }
    freeReplyObject(rep);
}

static int64_t int_reply(redisReply *rep)
{
    int64_t v = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    return v;
}

/* The records of one partition: the hash, and the buckets (SCAN). */
static int64_t count_records(struct case_run *r, const char *tag)
{
    int64_t n = int_reply(cmd(r, "HLEN %s:{%s}:jobs", DRIVER_PREFIX, tag));
    char pattern[512];
    snprintf(pattern, sizeof pattern, "%s:\\{%s\\}:jobs:*", DRIVER_PREFIX, tag);
    size_t base = strlen(DRIVER_PREFIX) + strlen(tag) + 9;
    char cursor[32] = "0";
    do {
        redisReply *rep = cmd(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        for (size_t k = 0; k < rep->element[1]->elements; k++) {
            const char *key = rep->element[1]->element[k]->str;
            const char *suffix = key + base;
            if (strlen(key) >= base && strspn(suffix, "0123456789") == strlen(suffix))
                n += int_reply(cmd(r, "HLEN %s", key));
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

struct jv *direct_state(struct case_run *r)
{
    struct jv *lists[3] = { jv_arr(), jv_arr(), jv_arr() }, *where = jv_obj();
    int64_t records = 0;
    for (unsigned p = 0; p < r->nparts; p++) {
        char tag[300], key[600];
        direct_tag(r, p, tag, sizeof tag);
        for (int lvl = -1; lvl < 10; lvl++) {
            if (lvl == 5)
                continue;
            if (lvl < 0)
                snprintf(key, sizeof key, "%s:{%s}:delayed", DRIVER_PREFIX, tag);
            else
                snprintf(key, sizeof key, "%s:{%s}:delayed:%d", DRIVER_PREFIX, tag, lvl);
            add_members(r, key, p, lists[0], where);
        }
        snprintf(key, sizeof key, "%s:{%s}:processing", DRIVER_PREFIX, tag);
        add_members(r, key, p, lists[1], where);
        snprintf(key, sizeof key, "%s:{%s}:dead", DRIVER_PREFIX, tag);
        add_members(r, key, p, lists[2], where);
        records += count_records(r, tag);
    }
    struct jv *o = jv_obj();
    static const char *const names[3] = { "delayed", "processing", "dead" };
    for (int k = 0; k < 3; k++) {
        if (lists[k]->n)
            qsort(lists[k]->items, lists[k]->n, sizeof *lists[k]->items, by_text);
        jv_set(o, names[k], lists[k]);
    }
    jv_set(o, "records", jv_int(records));
    jv_set(o, "where", where);
    jv_set(o, "registered",
           jv_bool(int_reply(cmd(r, "SISMEMBER %s:queues %s", DRIVER_PREFIX, r->queue)) == 1));
    redisReply *proto = cmd(r, "HGET %s:{%s}:meta protocol", DRIVER_PREFIX, r->queue);
    jv_set(o, "protocol", proto->type == REDIS_REPLY_STRING ? jv_str(proto->str) : jv_null());
    freeReplyObject(proto);
    return o;
}

/* ---- record: the MessagePack formats of a record's body ------------------- */

struct mp {
    const unsigned char *p, *end;
};

static uint64_t be(struct mp *m, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n && m->p < m->end; k++)
        v = (v << 8) | *m->p++;
    return v;
}

/* One element: its format name into `fmt`, its value as a node. */
static struct jv *mp_one(struct mp *m, const char **fmt, int64_t *count)
{
    static const struct { int tag; const char *name; int size; char kind; } sized[] = {
        { 0xcc, "uint8", 1, 'u' }, { 0xcd, "uint16", 2, 'u' }, { 0xce, "uint32", 4, 'u' },
        { 0xcf, "uint64", 8, 'u' }, { 0xd0, "int8", 1, 'i' }, { 0xd1, "int16", 2, 'i' },
        { 0xd2, "int32", 4, 'i' }, { 0xd3, "int64", 8, 'i' }, { 0xd9, "str8", 1, 's' },
        { 0xda, "str16", 2, 's' }, { 0xdb, "str32", 4, 's' }, { 0xc4, "bin8", 1, 's' },
        { 0xc5, "bin16", 2, 's' }, { 0xc6, "bin32", 4, 's' }, { 0xdc, "array16", 2, 'a' },
        { 0xdd, "array32", 4, 'a' },
    };
    if (m->p >= m->end) {
        *fmt = "truncated";
        return jv_null();
    }
    int t = *m->p++;
    *count = 0;
    if (t <= 0x7f) { *fmt = "fixint"; return jv_int(t); }
    if (t >= 0xe0) { *fmt = "negfixint"; return jv_int(t - 256); }
    if (t >= 0x90 && t <= 0x9f) { *fmt = "fixarray"; *count = t & 0x0f; return jv_null(); }
    if (t == 0xc0) { *fmt = "nil"; return jv_null(); }
    if (t >= 0xa0 && t <= 0xbf) {
        size_t n = (size_t)(t & 0x1f);
        *fmt = "fixstr";
        struct jv *v = jv_bytes(m->p, n);
        m->p += n;
        return v;
    }
    for (size_t k = 0; k < sizeof sized / sizeof *sized; k++) {
        if (sized[k].tag != t)
            continue;
        *fmt = sized[k].name;
        uint64_t v = be(m, sized[k].size);
        if (sized[k].kind == 'i') {
            int bits = sized[k].size * 8;
            int64_t s = bits == 64 ? (int64_t)v
                        : (int64_t)(v ^ (UINT64_C(1) << (bits - 1))) - (INT64_C(1) << (bits - 1));
            return jv_int(s);
        }
        if (sized[k].kind == 's') {
            struct jv *b = jv_bytes(m->p, (size_t)v);
            m->p += v;
            return b;
        }
        if (sized[k].kind == 'a')
            *count = (int64_t)v;
        return jv_int((int64_t)v);
    }
    *fmt = "unknown";
    return jv_null();
}

struct jv *direct_record(struct case_run *r, const char *id)
{
    char tag[300];
    direct_tag(r, direct_partition_of(id, r->nparts), tag, sizeof tag);
    size_t len = strlen(id);
    redisReply *rep;
    if (len && strspn(id, "0123456789") == len)
        rep = cmd(r, "HGET %s:{%s}:jobs:%b %s", DRIVER_PREFIX, tag, id, len - (len < 2 ? len : 2),
                  id);
    else
        rep = cmd(r, "HGET %s:{%s}:jobs %s", DRIVER_PREFIX, tag, id);
    if (rep->type != REDIS_REPLY_STRING) {
        freeReplyObject(rep);
        return jv_null();
    }
    const char *c1 = memchr(rep->str, ':', rep->len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', rep->len - (size_t)(c1 + 1 - rep->str)) : NULL;
    struct jv *o = jv_obj(), *formats = jv_arr();
    size_t head = c2 ? (size_t)(c2 + 1 - rep->str) : 0;
    char *h = strndup(rep->str, head);
    jv_set(o, "head", jv_str(h));
    free(h);
    struct mp m = { (const unsigned char *)rep->str + head,
                    (const unsigned char *)rep->str + rep->len };
    static const char *const names[] = { "type", "payload", "max_attempts", "created_ms",
                                         "due_offset_ms", "last_error", "priority" };
    const char *fmt;
    int64_t count;
    json_free(mp_one(&m, &fmt, &count));
    jv_push(formats, jv_str(fmt));
    for (int64_t k = 0; k < count; k++) {
        int64_t ignored;
        struct jv *v = mp_one(&m, &fmt, &ignored);
        jv_push(formats, jv_str(fmt));
        if (k < 7)
            jv_set(o, names[k], v);
        else
            json_free(v);
    }
    jv_set(o, "formats", formats);
    freeReplyObject(rep);
    return o;
}

/* ---- redis, wake_messages --------------------------------------------------- */

/* "$P" and "$Q" in `s` replaced by the prefix and the queue. */
static char *expand(const struct case_run *r, const char *s)
{
    size_t cap = strlen(s) + strlen(r->queue) * 4 + 64, n = 0;
    char *out = malloc(cap);
    for (; *s; s++) {
        const char *with = s[0] == '$' && s[1] == 'P' ? DRIVER_PREFIX
                           : s[0] == '$' && s[1] == 'Q' ? r->queue : NULL;
        if (with) {
            n += (size_t)snprintf(out + n, cap - n, "%s", with);
            s++;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return out;
}

/* An argument given as {"hex": "..."}: its bytes (malloc'd), in *len.  A
 * case file with anything else there is a mistake in the file: the run
 * stops, naming it, rather than plant other bytes than the other runners. */
static char *hex_bytes(const struct jv *arg, size_t *len)
{
    const struct jv *hex = json_get(arg, "hex");
    char *b = hex && hex->t == J_STR && hex->len % 2 == 0 ? malloc(hex->len / 2 + 1) : NULL;
    *len = 0;
    for (size_t k = 0; b && k < hex->len; k += 2) {
        unsigned x = 0;
        if (!isxdigit((unsigned char)hex->s[k]) || !isxdigit((unsigned char)hex->s[k + 1])
            || sscanf(hex->s + k, "%2x", &x) != 1) {
            free(b);
            b = NULL;
            break;
        }
        b[(*len)++] = (char)x;
    }
    if (!b) {
        fprintf(stderr, "conformance: a redis argument that is an object must be "
                "{\"hex\": an even number of hex digits}\n");
        exit(2);
    }
    return b;
}

struct jv *direct_command(struct case_run *r, const struct jv *argv)
{
    char **args = calloc(argv->n, sizeof *args);
    size_t *lens = calloc(argv->n, sizeof *lens);
    for (size_t k = 0; k < argv->n; k++) {
        if (argv->items[k]->t == J_OBJ) {
            args[k] = hex_bytes(argv->items[k], &lens[k]);
        } else {
            args[k] = expand(r, argv->items[k]->s);
            lens[k] = strlen(args[k]);
        }
    }
    redisReply *rep = redisCommandArgv(r->raw, (int)argv->n, (const char **)args, lens);
    free(lens);
    struct jv *v = !rep ? jv_null()
                   : rep->type == REDIS_REPLY_INTEGER ? jv_int(rep->integer)
                   : rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS
                   ? jv_str(rep->str) : jv_null();
    if (rep)
        freeReplyObject(rep);
    for (size_t k = 0; k < argv->n; k++)
        free(args[k]);
    free(args);
    return v;
}

int direct_subscribe(struct case_run *r, const char *sock)
{
    r->sub = redisConnectUnix(sock);
    if (!r->sub || r->sub->err)
        return -1;
    for (unsigned p = 0; p < r->nparts; p++) {
        char tag[300];
        direct_tag(r, p, tag, sizeof tag);
        redisReply *rep = redisCommand(r->sub, "SUBSCRIBE %s:{%s}:wake", DRIVER_PREFIX, tag);
        if (!rep)
            return -1;
        freeReplyObject(rep);
    }
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct jv *direct_wake_messages(struct case_run *r)
{
    int64_t count = 0, digits = 1, deadline = now_ms() + 300;
    while (r->sub && now_ms() < deadline) {
        struct pollfd pfd = { r->sub->fd, POLLIN, 0 };
        if (poll(&pfd, 1, (int)(deadline - now_ms())) <= 0)
            continue;
        if (redisBufferRead(r->sub) != REDIS_OK)
            break;
        void *got;
        while (redisGetReplyFromReader(r->sub, &got) == REDIS_OK && got) {
            redisReply *m = got;
            if (m->type == REDIS_REPLY_ARRAY && m->elements == 3
                && strcmp(m->element[0]->str, "message") == 0) {
                count++;
                const char *d = m->element[2]->str;
                digits &= *d && strspn(d, "0123456789") == strlen(d);
            }
            freeReplyObject(m);
        }
    }
    struct jv *o = jv_obj();
    jv_set(o, "count", jv_int(count));
    jv_set(o, "due_times", jv_bool(digits != 0));
    return o;
}
