#define _GNU_SOURCE
#include "http_post.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HTTP_HEAD_MAX 16384 /* the answer's status line and headers */

int64_t http_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void http_url_free(struct http_url *u)
{
    free(u->host);
    free(u->port);
    free(u->authority);
    free(u->path);
    memset(u, 0, sizeof *u);
}

/* Split "host", "host:port", "[v6]" or "[v6]:port" into u->host, u->port. */
static int split_authority(struct http_url *u, char *err, size_t errlen)
{
    const char *a = u->authority, *port = NULL;
    size_t hlen;
    if (a[0] == '[') {
        const char *close = strchr(a, ']');
        if (!close || (close[1] && close[1] != ':')) {
            snprintf(err, errlen, "http: bad address \"%s\" in url", a);
            return -1;
        }
        a++;
        hlen = (size_t)(close - a);
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *colon = strrchr(a, ':');
        hlen = colon ? (size_t)(colon - a) : strlen(a);
        port = colon ? colon + 1 : NULL;
    }
    if (hlen == 0) {
        snprintf(err, errlen, "http: no host in url");
        return -1;
    }
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (!isdigit((unsigned char)*port) || *end || p < 1 || p > 65535) {
            snprintf(err, errlen, "http: bad port \"%s\" in url", port);
            return -1;
        }
    }
    u->host = strndup(a, hlen);
    u->port = strdup(port ? port : "80");
    if (!u->host || !u->port) {
        snprintf(err, errlen, "http: out of memory");
        return -1;
    }
    return 0;
}

int http_url_parse(const char *url, struct http_url *u, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    if (strncasecmp(url, "https://", 8) == 0) {
        snprintf(err, errlen, "http: url \"%s\": https is not supported; put a TLS "
                 "proxy (stunnel, nginx, haproxy) on this host and post to it over "
                 "http, or use the exec handler with curl", url);
        return -1;
    }
    if (strncasecmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "http: url \"%s\": expected http://HOST[:PORT][/PATH]", url);
        return -1;
    }
    const char *a = url + 7;
    size_t alen = strcspn(a, "/?#");
    if (memchr(a, '@', alen)) {
        snprintf(err, errlen, "http: a user or password in the url is not supported; "
                 "use headers = [\"Authorization: ...\"]");
        return -1;
    }
    for (const char *p = url; *p; p++) {
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            snprintf(err, errlen, "http: url \"%s\": spaces and control characters "
                     "must be percent-encoded", url);
            return -1;
        }
    }
    const char *rest = a + alen;
    size_t plen = strcspn(rest, "#");
    u->authority = strndup(a, alen);
    /* "http://h?q" has the path "/?q"; "http://h" and "http://h#f", "/". */
    if (asprintf(&u->path, "%s%.*s", *rest == '/' ? "" : "/", (int)plen, rest) < 0)
        u->path = NULL;
    if (!u->authority || !u->path) {
        snprintf(err, errlen, "http: out of memory");
        http_url_free(u);
        return -1;
    }
    if (split_authority(u, err, errlen) < 0) {
        http_url_free(u);
        return -1;
    }
    return 0;
}

/* The deadline and the stop of one request. */
struct limits {
    int64_t deadline;           /* 0: none */
    const struct http_stop *stop;   /* NULL: none */
};

/* Wait until fd is ready for `events`, the deadline, or the stop: 1
 * ready, 0 timed out, 2 stopped, -1 error (errno). */
static int wait_fd(int fd, short events, const struct limits *lim)
{
    for (;;) {
        if (lim->stop && lim->stop->fn(lim->stop->arg))
            return 2;
        int wait = -1;
        if (lim->deadline) {
            int64_t left = lim->deadline - http_now_ms();
            if (left <= 0)
                return 0;
            wait = left > 60000 ? 60000 : (int)left;
        }
        if (lim->stop && (wait < 0 || wait > HTTP_STOP_CHECK_MS))
            wait = HTTP_STOP_CHECK_MS;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, wait);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* A connected socket to one address, or -1 with *kind and err set. */
static int connect_one(const struct addrinfo *ai, const struct http_url *u,
                       const struct limits *lim, enum http_status_kind *kind, char *err,
                       size_t errlen)
{
    *kind = HTTP_NET_ERROR;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    int e = errno;
    if (e == EINPROGRESS) {
        int w = wait_fd(fd, POLLOUT, lim);
        socklen_t len = sizeof e;
        if (w == 0 || w == 2) {
            *kind = w == 0 ? HTTP_TIMEOUT : HTTP_STOPPED;
            snprintf(err, errlen, "connecting to %s", u->authority);
            close(fd);
            return -1;
        }
        if (w < 0)
            e = errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
            e = errno;
        if (e == 0)
            return fd;
    }
    snprintf(err, errlen, "connect to %s: %s", u->authority, strerror(e));
    close(fd);
    return -1;
}

/* Send all of buf: HTTP_ANSWERED (meaning: sent), or an error kind. */
static enum http_status_kind send_all(int fd, const char *buf, size_t len,
                                      const struct limits *lim, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            snprintf(err, errlen, "send: %s", strerror(errno));
            return HTTP_NET_ERROR;
        }
        int w = wait_fd(fd, POLLOUT, lim);
        if (w == 0 || w == 2) {
            snprintf(err, errlen, "sending the request");
            return w == 0 ? HTTP_TIMEOUT : HTTP_STOPPED;
        }
        if (w < 0) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return HTTP_NET_ERROR;
        }
    }
    return HTTP_ANSWERED;
}

/* Parse a head (NUL-terminated, status line first) into ans; -1 if it is
 * not HTTP. */
static int parse_head(const char *head, struct http_answer *ans)
{
    if (strncmp(head, "HTTP/", 5) != 0)
        return -1;
    const char *p = strchr(head, ' ');
    if (!p || !isdigit((unsigned char)p[1]) || !isdigit((unsigned char)p[2])
        || !isdigit((unsigned char)p[3]) || (p[4] != ' ' && p[4] != '\r' && p[4] != '\n'))
        return -1;
    ans->status = (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
    p += 4;
    while (*p == ' ')
        p++;
    size_t rlen = strcspn(p, "\r\n");
    snprintf(ans->reason, sizeof ans->reason, "%.*s", (int)rlen, p);
    ans->retry_after_s = -1;
    for (const char *line = strchr(p, '\n'); line; line = strchr(line, '\n')) {
        line++;
        if (strncasecmp(line, "Retry-After:", 12) != 0)
            continue;
        const char *v = line + 12;
        while (*v == ' ' || *v == '\t')
            v++;
        /* Digits only, read without overflow: a longer wait than
         * RETRY_AFTER_MAX_S is taken as that (the daemon caps every retry
         * at the queue's backoff cap anyway), never wrapped or dropped. */
        int64_t secs = 0;
        const char *end = v;
        for (; isdigit((unsigned char)*end); end++)
            secs = secs >= RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S
                                             : secs * 10 + (*end - '0');
        if (end > v && (*end == '\r' || *end == '\n' || *end == ' ' || !*end))
            ans->retry_after_s = secs > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : secs;
    }
    return 0;
}

/* Length of the head in buf up to and with its blank line, or 0 if the
 * blank line has not arrived. */
static size_t head_len(const char *buf)
{
    const char *crlf = strstr(buf, "\r\n\r\n"), *lf = strstr(buf, "\n\n");
    if (crlf && (!lf || crlf < lf))
        return (size_t)(crlf - buf) + 4;
    return lf ? (size_t)(lf - buf) + 2 : 0;
}

/* Read the answer's head, skipping interim 1xx answers. */
static enum http_status_kind read_answer(int fd, const struct limits *lim,
                                         struct http_answer *ans, char *err,
                                         size_t errlen)
{
    char buf[HTTP_HEAD_MAX + 1];
    size_t used = 0;
    buf[0] = '\0';
    for (;;) {
        size_t hl = head_len(buf);
        if (hl) {
            buf[hl - 1] = '\0';
            if (parse_head(buf, ans) < 0) {
                snprintf(err, errlen, "not an HTTP answer");
                return HTTP_NET_ERROR;
            }
            if (ans->status >= 200)
                return HTTP_ANSWERED;
            memmove(buf, buf + hl, used - hl + 1);
            used -= hl;
            continue;
        }
        if (used == HTTP_HEAD_MAX) {
            snprintf(err, errlen, "the answer's headers are over %d bytes", HTTP_HEAD_MAX);
            return HTTP_NET_ERROR;
        }
        int w = wait_fd(fd, POLLIN, lim);
        if (w == 0 || w == 2) {
            snprintf(err, errlen, "waiting for the answer");
            return w == 0 ? HTTP_TIMEOUT : HTTP_STOPPED;
        }
        if (w < 0) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return HTTP_NET_ERROR;
        }
        ssize_t n = recv(fd, buf + used, HTTP_HEAD_MAX - used, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0) {
            snprintf(err, errlen, "recv: %s", strerror(errno));
            return HTTP_NET_ERROR;
        }
        if (n == 0) {
            snprintf(err, errlen, "connection closed before an answer");
            return HTTP_NET_ERROR;
        }
        used += (size_t)n;
        buf[used] = '\0';
        if (memchr(buf + used - (size_t)n, '\0', (size_t)n)) {
            snprintf(err, errlen, "not an HTTP answer");
            return HTTP_NET_ERROR;
        }
    }
}

enum http_status_kind http_post(const struct http_url *u, const char *head,
                                size_t headlen, const void *body, size_t bodylen,
                                int64_t deadline, const struct http_stop *stop,
                                struct http_answer *ans, char *err, size_t errlen)
{
    const struct limits lim = { deadline, stop };
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(u->host, u->port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", u->host, gai_strerror(rc));
        return HTTP_NET_ERROR;
    }
    enum http_status_kind kind = HTTP_NET_ERROR;
    int fd = -1;
    for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_one(ai, u, &lim, &kind, err, errlen);
        if (kind == HTTP_TIMEOUT || kind == HTTP_STOPPED)
            break;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return kind;
    char send_err[256] = "";
    kind = send_all(fd, head, headlen, &lim, send_err, sizeof send_err);
    if (kind == HTTP_ANSWERED && bodylen)
        kind = send_all(fd, body, bodylen, &lim, send_err, sizeof send_err);
    if (kind == HTTP_TIMEOUT || kind == HTTP_STOPPED) {
        snprintf(err, errlen, "%s", send_err);
        close(fd);
        return kind;
    }
    /* A server may answer (413, 401...) and close before reading it all:
     * the answer, if there is one, says more than the send error. */
    enum http_status_kind got = read_answer(fd, &lim, ans, err, errlen);
    close(fd);
    if (got != HTTP_ANSWERED && kind == HTTP_NET_ERROR) {
        snprintf(err, errlen, "%s", send_err);
        return HTTP_NET_ERROR;
    }
    return got;
}
