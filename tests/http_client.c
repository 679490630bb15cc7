#include "http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int http_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Write all of p[len]; -1 on an error. */
static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read until EOF or the deadline into a growing buffer; -1 on a timeout
 * or an error (*out holds what came, *len its size). */
static int read_all(int fd, long long deadline, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = -1;
    if (!buf)
        return -1;
    for (;;) {
        long long left = deadline - mono_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        if (cap - n < 4096) {
            char *b = realloc(buf, cap * 2);
            if (!b)
                break;
            buf = b;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0) {
            rc = 0;
            break;
        }
        if (k < 0) {
            rc = n > 0 ? 0 : -1;    /* a reset after the answer */
            break;
        }
        n += (size_t)k;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return rc;
}

/* Split raw[len] into r's status, head and body. */
static void parse_reply(char *raw, size_t len, struct http_reply *r)
{
    int status = 0;
    if (sscanf(raw, "HTTP/1.%*d %d", &status) == 1)
        r->status = status;
    char *end = strstr(raw, "\r\n\r\n");
    char *line = strstr(raw, "\r\n");
    size_t head_from = line ? (size_t)(line + 2 - raw) : len;
    size_t head_to = end ? (size_t)(end + 2 - raw) : len;
    if (head_to < head_from)
        head_to = head_from;
    r->head = strndup(raw + head_from, head_to - head_from);
    size_t body_from = end ? (size_t)(end + 4 - raw) : len;
    r->body_len = len - body_from;
    r->body = malloc(r->body_len + 1);
    if (r->body) {
        memcpy(r->body, raw + body_from, r->body_len);
        r->body[r->body_len] = '\0';
    }
}

/* Whether the header lines name a Host. */
static int has_host(const char *headers)
{
    for (const char *p = headers; p && *p;) {
        if (strncasecmp(p, "Host:", 5) == 0)
            return 1;
        p = strstr(p, "\r\n");
        if (p)
            p += 2;
    }
    return 0;
}

int http_request(int port, const char *method, const char *path, const char *headers,
                 const char *body, size_t body_len, int timeout_ms, struct http_reply *r)
{
    memset(r, 0, sizeof *r);
    long long deadline = mono_ms() + timeout_ms;
    int fd = http_connect(port);
    if (fd < 0)
        return -1;
    char *req = NULL;
    size_t req_len = 0;
    FILE *out = open_memstream(&req, &req_len);
    if (!out) {
        close(fd);
        return -1;
    }
    fprintf(out, "%s %s HTTP/1.1\r\n", method, path);
    if (!has_host(headers))
        fprintf(out, "Host: 127.0.0.1:%d\r\n", port);
    if (headers)
        fputs(headers, out);
    if (body)
        fprintf(out, "Content-Length: %zu\r\n", body_len);
    fputs("Connection: close\r\n\r\n", out);
    if (body)
        fwrite(body, 1, body_len, out);
    int rc = fclose(out) == 0 ? write_all(fd, req, req_len) : -1;
    free(req);
    char *raw = NULL;
    size_t len = 0;
    /* Read even after a failed write: the server may have answered
     * (413) and closed before taking the whole body. */
    int rrc = read_all(fd, deadline, &raw, &len);
    close(fd);
    if (raw) {
        parse_reply(raw, len, r);
        free(raw);
    }
    return r->status ? 0 : (rc < 0 || rrc < 0 ? -1 : 0);
}

const char *http_header(const struct http_reply *r, const char *name, char *out,
                        size_t outlen)
{
    size_t nlen = strlen(name);
    for (const char *p = r->head; p && *p;) {
        const char *eol = strstr(p, "\r\n");
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (*v == ' ')
                v++;
            size_t vlen = len - (size_t)(v - p);
            snprintf(out, outlen, "%.*s", (int)vlen, v);
            return out;
        }
        if (!eol)
            break;
        p = eol + 2;
    }
    return NULL;
}

void http_reply_free(struct http_reply *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

int http_closed_within(int fd, int timeout_ms)
{
    long long deadline = mono_ms() + timeout_ms;
    char buf[4096];
    for (;;) {
        long long left = deadline - mono_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0)
            return 0;
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        ssize_t k = read(fd, buf, sizeof buf);
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
            return 1;
    }
}
