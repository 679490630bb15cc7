/*
 * Reading the MessagePack that the scripts' cmsgpack writes: just what a
 * job record's body holds (an array of strings and integers), bounds-checked
 * so that a corrupt record is an error, never a crash.  Writing the head
 * of a body for enqueue_many, in the encoding cmsgpack itself chooses.
 */
#ifndef DQ_MSGPACK_H
#define DQ_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

struct mp_reader {
    const unsigned char *p;
    const unsigned char *end;
};

void mp_init(struct mp_reader *r, const void *buf, size_t len);

/* Each returns 0 and advances, or -1 (and leaves the reader unusable) when
 * the next value is not of the kind asked for or runs past the end. */
int mp_read_array(struct mp_reader *r, size_t *n);
/* A str or bin: a pointer into the buffer and its length. */
int mp_read_bytes(struct mp_reader *r, const char **s, size_t *len);
/* The largest whole number the scripts' numbers (doubles) hold exactly. */
#define MP_MAX_EXACT 9007199254740991LL

static inline int mp_exact(int64_t v)
{
    return v >= -MP_MAX_EXACT && v <= MP_MAX_EXACT;
}

/* A str only: a bin is refused (what the scripts' cmsgpack cannot read). */
int mp_read_str(struct mp_reader *r, const char **s, size_t *len);
/* An integer (a double holding a whole number within +-2^53 too). */
int mp_read_int(struct mp_reader *r, int64_t *v);
/* A nil: 0 and advances; -1 and leaves the reader as it was otherwise. */
int mp_read_nil(struct mp_reader *r);
/* 1 when every byte was read (and nothing failed), else 0. */
int mp_at_end(const struct mp_reader *r);

/* Writing, just what a record body's head needs: each writes at `out` and
 * returns the number of bytes written, at most MP_HEAD_MAX. */
#define MP_HEAD_MAX 9
size_t mp_write_array_head(unsigned char *out, size_t n);
/* The header of a str of `len` bytes; the bytes follow it. */
size_t mp_write_str_head(unsigned char *out, size_t len);
size_t mp_write_uint(unsigned char *out, uint64_t v);

#endif
