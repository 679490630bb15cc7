/*
 * A small blocking HTTP/1.1 client for the http handler: one POST on a new
 * connection, within a deadline, reading only the status line and headers
 * of the answer.  Plain http only.  Knows nothing of jobs.
 */
#ifndef DQ_HTTP_POST_H
#define DQ_HTTP_POST_H

#include <stddef.h>
#include <stdint.h>

struct http_url {
    char *host;             /* name or address, without IPv6 brackets */
    char *port;             /* "80" by default */
    char *authority;        /* for the Host header: "host[:port]" as written */
    char *path;             /* "/..." with the query, "/" by default */
};

/* Split an "http://host[:port][/path]" URL into `u` (owned; free with
 * http_url_free).  Returns 0, or -1 with a reason in err. */
int http_url_parse(const char *url, struct http_url *u, char *err, size_t errlen);
void http_url_free(struct http_url *u);

enum http_status_kind {
    HTTP_ANSWERED,          /* status and retry_after_s are set */
    HTTP_TIMEOUT,           /* the deadline passed; err says at which step */
    HTTP_NET_ERROR,         /* could not resolve, connect, send or read */
    HTTP_STOPPED            /* the caller's stop said so; err says at which step */
};

/* Asked every HTTP_STOP_CHECK_MS (20 ms) while the request waits on the
 * network: a nonzero answer abandons it (the connection is closed). */
#define HTTP_STOP_CHECK_MS 20
struct http_stop {
    int (*fn)(const void *arg);
    const void *arg;
};

/* The longest Retry-After taken as it is: 100 years, the furthest delayq
 * schedules anything; a longer one is taken as this (and capped again by
 * the queue's backoff cap when the job is retried). */
#define RETRY_AFTER_MAX_S INT64_C(3153600000)

struct http_answer {
    int status;             /* 200 */
    char reason[64];        /* "OK" */
    int64_t retry_after_s;  /* Retry-After in seconds (0..RETRY_AFTER_MAX_S),
                               -1 if none or not a number of seconds */
};

/*
 * Resolve and connect to u, send `head` (the request line and headers,
 * ending with the blank line) and then `body`, and read the answer's
 * status and headers.  `deadline` is a CLOCK_MONOTONIC time in ms (0:
 * none); name resolution itself is not bounded by it (getaddrinfo), nor
 * by `stop` (NULL: none), which may end the wait for the network sooner.
 * Writes use MSG_NOSIGNAL: no SIGPIPE.
 */
enum http_status_kind http_post(const struct http_url *u, const char *head,
                                size_t headlen, const void *body, size_t bodylen,
                                int64_t deadline, const struct http_stop *stop,
                                struct http_answer *ans, char *err, size_t errlen);

/* CLOCK_MONOTONIC in ms, for deadlines. */
int64_t http_now_ms(void);

#endif
