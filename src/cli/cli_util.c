/*
 * Small helpers of the command line: exit codes, numbers in arguments, and
 * bytes shown to people (escaped text) and to programs (JSON strings,
 * base64).
 */
#include "cli/cli_util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/timefmt.h"
#include "util/utf8.h"

int cli_exit_code(dq_status st)
{
    switch (st) {
    case DQ_OK:
        return CLI_EXIT_OK;
    case DQ_ERR_NOTFOUND: case DQ_ERR_EXISTS: case DQ_ERR_RUNNING:
    case DQ_ERR_DEAD: case DQ_ERR_STALE: case DQ_ERR_UNIQUE:
        return CLI_EXIT_NOT_DONE;
    case DQ_ERR_INVALID: case DQ_ERR_TOO_LARGE:
        return CLI_EXIT_USAGE;
    case DQ_ERR_CONNECT: case DQ_ERR_AUTH: case DQ_ERR_TIMEOUT: case DQ_ERR_REDIS:
        return CLI_EXIT_UNAVAILABLE;
    case DQ_ERR_NOMEM:
        return CLI_EXIT_SOFTWARE;
    }
    return CLI_EXIT_SOFTWARE;
}

int cli_parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

bool cli_is_utf8(const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0, len; i < n; i += len)
        if (!(len = utf8_seq_len(s + i, n - i)))
            return false;
    return true;
}

enum cli_text_kind cli_text_kind(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t odd = 0, escaped = 0;
    for (size_t i = 0, len; i < n; i += len) {
        len = utf8_seq_len(s + i, n - i);
        if (len == 0 || s[i] == 0) {
            if (s[i] == 0)
                return CLI_TEXT_BINARY;
            odd++;
            len = 1;
        } else if (is_control(s[i])) {
            escaped++;
            if (!strchr("\n\r\t", s[i]))
                odd++;
        }
    }
    if (odd * 10 > n)
        return CLI_TEXT_BINARY;
    return odd || escaped ? CLI_TEXT_ESCAPED : CLI_TEXT_PLAIN;
}

void cli_print_escaped(FILE *f, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0, len; i < n; i += len) {
        len = utf8_seq_len(s + i, n - i);
        if (len > 1) {
            fwrite(s + i, 1, len, f);
            continue;
        }
        len = 1;
        switch (s[i]) {
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (is_control(s[i]) || s[i] >= 0x80)
                fprintf(f, "\\x%02x", s[i]);
            else
                putc(s[i], f);
        }
    }
}

void cli_json_str(FILE *f, const void *p, size_t n)
{
    const unsigned char *s = p;
    putc('"', f);
    for (size_t i = 0, len; i < n; i += len) {
        len = utf8_seq_len(s + i, n - i);
        if (len > 1) {
            fwrite(s + i, 1, len, f);
            continue;
        }
        if (len == 0) {
            fputs("\\ufffd", f); /* not UTF-8: JSON cannot carry the byte */
            len = 1;
            continue;
        }
        switch (s[i]) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (is_control(s[i]))
                fprintf(f, "\\u%04x", s[i]);
            else
                putc(s[i], f);
        }
    }
    putc('"', f);
}

void cli_print_base64(FILE *f, const void *p, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        putc(alphabet[v >> 18 & 63], f);
        putc(alphabet[v >> 12 & 63], f);
        putc(i + 1 < n ? alphabet[v >> 6 & 63] : '=', f);
        putc(i + 2 < n ? alphabet[v & 63] : '=', f);
    }
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cli_relative(char *buf, size_t len, int64_t when, int64_t now)
{
    char d[32];
    timefmt_duration(d, sizeof d, when > now ? when - now : now - when);
    if (when == now)
        snprintf(buf, len, "now");
    else
        snprintf(buf, len, when > now ? "in %s" : "%s ago", d);
}
