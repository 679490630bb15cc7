#include "daemon/admin/ui_html.h"

#include <string.h>
#include <time.h>

#include "util/utf8.h"

#define REPLACEMENT "\xef\xbf\xbd"  /* U+FFFD in UTF-8 */

/* Whether a byte is a control character the pages never show. */
static int is_hidden_control(unsigned char c)
{
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

void html_textn(FILE *out, const void *data, size_t n)
{
    const unsigned char *p = data;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t len = utf8_seq_len(p + i, n - i);
        if (len == 0 || is_hidden_control(c)) {
            fputs(REPLACEMENT, out);
            i++;
            continue;
        }
        switch (c) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fwrite(p + i, 1, len, out);
        }
        i += len;
    }
}

void html_text(FILE *out, const char *s)
{
    html_textn(out, s, s ? strlen(s) : 0);
}

int html_is_text(const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len(p + i, n - i);
        if (len == 0 || p[i] == 0 || is_hidden_control(p[i]))
            return 0;
        i += len;
    }
    return 1;
}

void html_hex(FILE *out, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%02x", p[i]);
        if (i + 1 < n)
            fputc((i + 1) % 32 == 0 ? '\n' : ' ', out);
    }
}

void html_url(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')
            || (*p >= '0' && *p <= '9') || strchr("-._~", *p))
            fputc(*p, out);
        else
            fprintf(out, "%%%02X", *p);
    }
}

void json_string(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq_len(p + i, n - i);
        unsigned char c = p[i];
        if (len == 0) {
            fputs("\\ufffd", out);
            i++;
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fwrite(p + i, 1, len, out);
        i += len;
    }
    fputc('"', out);
}

void html_time(FILE *out, int64_t unix_ms)
{
    if (unix_ms < 0) {
        fputc('-', out);
        return;
    }
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    char buf[40];
    if (!gmtime_r(&t, &tm) || strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0) {
        fputc('-', out);
        return;
    }
    fprintf(out, "%s.%03d UTC", buf, (int)(unix_ms % 1000));
}

void html_duration(FILE *out, int64_t ms)
{
    if (ms < 0) {
        fputc('-', out);
        ms = -ms;
    }
    int64_t s = ms / 1000;
    if (ms < 1000)
        fprintf(out, "%lld ms", (long long)ms);
    else if (ms < 60 * 1000)
        fprintf(out, "%.1f s", (double)ms / 1000.0);
    else if (s < 3600)
        fprintf(out, "%lld min %lld s", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400)
        fprintf(out, "%lld h %lld min", (long long)(s / 3600), (long long)(s % 3600 / 60));
    else
        fprintf(out, "%lld d %lld h", (long long)(s / 86400), (long long)(s % 86400 / 3600));
}
