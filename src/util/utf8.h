/*
 * utf8: reading UTF-8 strictly, for the places that must tell text from
 * bytes (the CLI's payload display, the dashboard's escaping).
 */
#ifndef DQ_UTIL_UTF8_H
#define DQ_UTIL_UTF8_H

#include <stddef.h>

/* The length of the valid UTF-8 sequence at p (1 to 4; `n` >= 1 bytes
 * left), or 0 when the bytes there are not one: a stray or truncated
 * sequence, an overlong form, a surrogate or a code point past U+10FFFF. */
size_t utf8_seq_len(const void *p, size_t n);

#endif
