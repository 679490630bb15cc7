/*
 * Small helpers of the delayq command line that know nothing of a run:
 * the exit codes and the mapping of library statuses to them, numbers in
 * arguments, and bytes shown to people (escaped text) and to programs
 * (JSON strings, base64).  Every other CLI module may use them; they use
 * no other CLI module.
 */
#ifndef DQ_CLI_UTIL_H
#define DQ_CLI_UTIL_H

#include <delayq/client.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: an interface, listed in `delayq --help` and delayq(1)
 * (sysexits-style). */
#define CLI_EXIT_OK 0           /* done */
#define CLI_EXIT_NOT_DONE 1     /* not found, or not done (running, exists) */
#define CLI_EXIT_USAGE 2        /* bad option, value, name; payload too large */
#define CLI_EXIT_UNAVAILABLE 69 /* EX_UNAVAILABLE: Redis down, refused, timed out */
#define CLI_EXIT_SOFTWARE 70    /* EX_SOFTWARE: out of memory, internal error */
#define CLI_EXIT_IOERR 74       /* EX_IOERR: standard input or output failed */
#define CLI_EXIT_CONFIG 78      /* EX_CONFIG: the -c file or a password file is wrong */

/* The exit code for a library status. */
int cli_exit_code(dq_status st);

/* Parse a whole decimal number in [min, max]; -1 when it is not one. */
int cli_parse_int(const char *s, long long min, long long max, long long *out);

/* Write bytes as a JSON string, quotes included: escapes ", \ and control
 * characters, and replaces bytes that are not UTF-8 with U+FFFD. */
void cli_json_str(FILE *f, const void *p, size_t n);

/* Is the data valid UTF-8 (NUL and control characters allowed)? */
bool cli_is_utf8(const void *p, size_t n);

/* How to show bytes to a person. */
enum cli_text_kind {
    CLI_TEXT_PLAIN,     /* UTF-8 without control characters: as it is */
    CLI_TEXT_ESCAPED,   /* mostly text: print with cli_print_escaped */
    CLI_TEXT_BINARY     /* not text: print only its size */
};
enum cli_text_kind cli_text_kind(const void *p, size_t n);

/* Write bytes on one line: control characters and bytes that are not
 * UTF-8 as \n, \t, \r, \\ or \xNN; the rest as it is. */
void cli_print_escaped(FILE *f, const void *p, size_t n);

/* Write bytes in base64 (RFC 4648, with padding). */
void cli_print_base64(FILE *f, const void *p, size_t n);

/* This host's clock in Unix ms: only to refuse a time too far ahead before
 * connecting (the library and the scripts check it again). */
int64_t cli_now_ms(void);

/* "in 29m 58s", "12.0s ago" or "now": `when` relative to the server's `now`. */
void cli_relative(char *buf, size_t len, int64_t when, int64_t now);

#endif
