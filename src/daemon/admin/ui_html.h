/*
 * ui_html: writing values into the dashboard's HTML and JSON safely.
 * Every value that comes from Redis or from a request (ids, types,
 * payloads, errors, queue names, query parameters) goes out through one
 * of these, never through a bare fputs.
 */
#ifndef DQ_UI_HTML_H
#define DQ_UI_HTML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Text for an element or a quoted attribute: & < > " ' escaped; bytes
 * that are not UTF-8 as U+FFFD; control characters but tab and newline
 * as U+FFFD. */
void html_text(FILE *out, const char *s);
void html_textn(FILE *out, const void *p, size_t n);

/* Whether `n` bytes read as text: valid UTF-8, no NUL, no control
 * character but tab, newline and carriage return. */
int html_is_text(const void *p, size_t n);

/* Lowercase hex, a space between bytes, a newline every 32. */
void html_hex(FILE *out, const void *p, size_t n);

/* A path segment or query value: every byte but A-Z a-z 0-9 - . _ ~
 * percent-encoded (the result needs no HTML escaping either). */
void html_url(FILE *out, const char *s);

/* A JSON string, quotes included: " \ and control characters escaped,
 * and < > & as \u003c \u003e \u0026 (safe inside HTML too); bytes that
 * are not UTF-8 as U+FFFD. */
void json_string(FILE *out, const char *s);

/* "2026-11-24 05:40:12.345 UTC" for a Unix time in ms; "-" when < 0. */
void html_time(FILE *out, int64_t unix_ms);

/* A duration, short: "850 ms", "12.3 s", "4 min 5 s", "3 h 12 min",
 * "2 d 4 h"; negative as "-" followed by the duration. */
void html_duration(FILE *out, int64_t ms);

#endif
