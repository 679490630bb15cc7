#include "lib/msgpack.h"

#include <string.h>

void mp_init(struct mp_reader *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = r->p + len;
}

static int fail(struct mp_reader *r)
{
    r->p = r->end = NULL;
    return -1;
}

/* A big-endian unsigned of `n` bytes. */
static int take_be(struct mp_reader *r, size_t n, uint64_t *v)
{
    if (!r->p || (size_t)(r->end - r->p) < n)
        return fail(r);
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = (x << 8) | r->p[i];
    r->p += n;
    *v = x;
    return 0;
}

static int take_tag(struct mp_reader *r, unsigned *tag)
{
    uint64_t t;
    if (take_be(r, 1, &t) < 0)
        return -1;
    *tag = (unsigned)t;
    return 0;
}

int mp_read_array(struct mp_reader *r, size_t *n)
{
    unsigned tag;
    uint64_t len;
    if (take_tag(r, &tag) < 0)
        return -1;
    if ((tag & 0xf0) == 0x90)
        len = tag & 0x0f;
    else if (tag == 0xdc) {
        if (take_be(r, 2, &len) < 0)
            return -1;
    } else if (tag == 0xdd) {
        if (take_be(r, 4, &len) < 0)
            return -1;
    } else {
        return fail(r);
    }
    *n = (size_t)len;
    return 0;
}

int mp_read_nil(struct mp_reader *r)
{
    if (!r->p || r->p == r->end || *r->p != 0xc0)
        return -1;
    r->p++;
    return 0;
}

int mp_at_end(const struct mp_reader *r)
{
    return r->p && r->p == r->end;
}

int mp_read_bytes(struct mp_reader *r, const char **s, size_t *len)
{
    unsigned tag;
    uint64_t n;
    if (take_tag(r, &tag) < 0)
        return -1;
    if ((tag & 0xe0) == 0xa0)
        n = tag & 0x1f;
    else if (tag == 0xd9 || tag == 0xc4) {
        if (take_be(r, 1, &n) < 0)
            return -1;
    } else if (tag == 0xda || tag == 0xc5) {
        if (take_be(r, 2, &n) < 0)
            return -1;
    } else if (tag == 0xdb || tag == 0xc6) {
        if (take_be(r, 4, &n) < 0)
            return -1;
    } else {
        return fail(r);
    }
    if ((uint64_t)(r->end - r->p) < n)
        return fail(r);
    *s = (const char *)r->p;
    *len = (size_t)n;
    r->p += n;
    return 0;
}

int mp_read_str(struct mp_reader *r, const char **s, size_t *len)
{
    if (!r->p || r->p == r->end || (*r->p >= 0xc4 && *r->p <= 0xc6))
        return fail(r);
    return mp_read_bytes(r, s, len);
}

static int read_double(struct mp_reader *r, size_t bytes, int64_t *v)
{
    uint64_t bits;
    if (take_be(r, bytes, &bits) < 0)
        return -1;
    double d;
    if (bytes == 8) {
        memcpy(&d, &bits, sizeof d);
    } else {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        d = f;
    }
    /* A whole number that a double holds exactly (as lib.lua's is_int):
     * a fraction is not an integer, not one to round. */
    if (!(d >= -(double)MP_MAX_EXACT && d <= (double)MP_MAX_EXACT) || (double)(int64_t)d != d)
        return fail(r);
    *v = (int64_t)d;
    return 0;
}

int mp_read_int(struct mp_reader *r, int64_t *v)
{
    unsigned tag;
    uint64_t u;
    if (take_tag(r, &tag) < 0)
        return -1;
    if (tag <= 0x7f) {
        *v = tag;
        return 0;
    }
    if (tag >= 0xe0) {
        *v = (int64_t)tag - 256;
        return 0;
    }
    switch (tag) {
    case 0xcc: case 0xcd: case 0xce: case 0xcf:
        if (take_be(r, (size_t)1 << (tag - 0xcc), &u) < 0)
            return -1;
        *v = (int64_t)u;
        return 0;
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        size_t n = (size_t)1 << (tag - 0xd0);
        if (take_be(r, n, &u) < 0)
            return -1;
        if (n < 8 && (u >> (8 * n - 1)))    /* sign-extend */
            u |= ~(uint64_t)0 << (8 * n);
        *v = (int64_t)u;
        return 0;
    }
    case 0xca:
        return read_double(r, 4, v);
    case 0xcb:
        return read_double(r, 8, v);
    default:
        return fail(r);
    }
}

/* `v` big-endian in `n` bytes after the tag byte. */
static size_t put_be(unsigned char *out, unsigned tag, uint64_t v, size_t n)
{
    out[0] = (unsigned char)tag;
    for (size_t i = 0; i < n; i++)
        out[1 + i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    return 1 + n;
}

size_t mp_write_array_head(unsigned char *out, size_t n)
{
    if (n < 16) {
        out[0] = (unsigned char)(0x90 | n);
        return 1;
    }
    if (n <= 0xffff)
        return put_be(out, 0xdc, n, 2);
    return put_be(out, 0xdd, n, 4);
}

size_t mp_write_str_head(unsigned char *out, size_t len)
{
    if (len < 32) {
        out[0] = (unsigned char)(0xa0 | len);
        return 1;
    }
    if (len <= 0xff)
        return put_be(out, 0xd9, len, 1);
    if (len <= 0xffff)
        return put_be(out, 0xda, len, 2);
    return put_be(out, 0xdb, len, 4);
}

size_t mp_write_uint(unsigned char *out, uint64_t v)
{
    if (v <= 0x7f) {
        out[0] = (unsigned char)v;
        return 1;
    }
    if (v <= 0xff)
        return put_be(out, 0xcc, v, 1);
    if (v <= 0xffff)
        return put_be(out, 0xcd, v, 2);
    if (v <= 0xffffffffu)
        return put_be(out, 0xce, v, 4);
    return put_be(out, 0xcf, v, 8);
}
