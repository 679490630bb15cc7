/*
 * Fuzz target: the MessagePack reader (src/lib/msgpack.c), which decodes
 * job record bodies straight out of Redis, and its writers.
 *
 * The input is read as a stream of values.  At each position every reader
 * is tried on its own copy of the reader state, and these must hold:
 * at most one kind of reader accepts a value (the tags are disjoint); an
 * accepted value lies inside the buffer and moves the reader forward; a
 * refused read leaves the reader unusable, except a refused nil, which
 * leaves it where it was; what a writer writes reads back the same.  The
 * stream then goes on after the accepted value, or stops.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/msgpack.h"
#include "fuzz.h"

/* What the writers write must read back as what they were given. */
static void check_uint_round_trip(uint64_t v)
{
    unsigned char buf[MP_HEAD_MAX];
    struct mp_reader r;
    int64_t back;
    size_t n = mp_write_uint(buf, v);
    FUZZ_ASSERT(n >= 1 && n <= MP_HEAD_MAX);
    mp_init(&r, buf, n);
    FUZZ_ASSERT(mp_read_int(&r, &back) == 0 && mp_at_end(&r));
    FUZZ_ASSERT((uint64_t)back == v);
}

static void check_str_round_trip(const char *s, size_t len)
{
    unsigned char *buf = malloc(MP_HEAD_MAX + len);
    if (!buf)
        return;
    size_t n = mp_write_str_head(buf, len);
    FUZZ_ASSERT(n >= 1 && n <= MP_HEAD_MAX);
    memcpy(buf + n, s, len);
    struct mp_reader r;
    const char *back;
    size_t backlen;
    mp_init(&r, buf, n + len);
    FUZZ_ASSERT(mp_read_bytes(&r, &back, &backlen) == 0 && mp_at_end(&r));
    FUZZ_ASSERT(backlen == len && memcmp(back, s, len) == 0);
    free(buf);
}

static void check_array_round_trip(size_t count)
{
    unsigned char buf[MP_HEAD_MAX];
    struct mp_reader r;
    size_t back;
    if (count > UINT32_MAX)
        return;
    size_t n = mp_write_array_head(buf, count);
    mp_init(&r, buf, n);
    FUZZ_ASSERT(mp_read_array(&r, &back) == 0 && mp_at_end(&r) && back == count);
}

/* After a refused read the reader must refuse everything. */
static void check_unusable(struct mp_reader *r)
{
    int64_t v;
    FUZZ_ASSERT(!mp_at_end(r));
    FUZZ_ASSERT(mp_read_int(r, &v) < 0);
}

/* Try every reader at `r`'s position; advance `r` past the value one of
 * them accepted and return 1, or return 0 when none did. */
static int step(struct mp_reader *r, const unsigned char *buf, size_t len)
{
    struct mp_reader a = *r, b = *r, i = *r, z = *r;
    size_t count, slen;
    const char *s;
    int64_t v;
    int took_a = mp_read_array(&a, &count) == 0;
    int took_b = mp_read_bytes(&b, &s, &slen) == 0;
    int took_i = mp_read_int(&i, &v) == 0;
    int took_z = mp_read_nil(&z) == 0;
    FUZZ_ASSERT(took_a + took_b + took_i + took_z <= 1);
    if (!took_z)
        FUZZ_ASSERT(z.p == r->p && z.end == r->end);
    if (took_a) {
        FUZZ_ASSERT(a.p > r->p && a.p <= a.end);
        check_array_round_trip(count);
        *r = a;
    } else if (took_b) {
        FUZZ_ASSERT((const unsigned char *)s > r->p && (const unsigned char *)s <= buf + len);
        FUZZ_ASSERT(slen <= (size_t)(buf + len - (const unsigned char *)s));
        FUZZ_ASSERT(b.p == (const unsigned char *)s + slen);
        check_str_round_trip(s, slen);
        *r = b;
    } else if (took_i) {
        FUZZ_ASSERT(i.p > r->p && i.p <= i.end);
        if (v >= 0)
            check_uint_round_trip((uint64_t)v);
        *r = i;
    } else if (took_z) {
        FUZZ_ASSERT(z.p == r->p + 1);
        *r = z;
    } else {
        check_unusable(&a);
        check_unusable(&b);
        check_unusable(&i);
        return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so that ASan sees any read past it. */
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct mp_reader r;
    mp_init(&r, buf, size);
    while (!mp_at_end(&r) && step(&r, buf, size))
        ;
    free(buf);
    return 0;
}
